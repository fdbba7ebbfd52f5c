"""The README's quick-start protocol lints clean, simulates and is in canonical form."""

from __future__ import annotations

import re
from pathlib import Path

from ccogen.driver import check_text
from ccogen.sim import simulate
from ccogen.syntax.format import format_text

README = Path(__file__).resolve().parent.parent / "README.md"


def _hello() -> str:
    found = re.search(r"```python\n(# hello\.cco\n.*?)```", README.read_text(), re.S)
    assert found, "the README lost its quick-start protocol"
    return found.group(1)


def test_quick_start_protocol_is_clean_and_canonical() -> None:
    text = _hello()
    result = check_text(text, "hello.cco")
    assert not result.diagnostics and result.instances
    assert format_text(text, "hello.cco") == text


def test_quick_start_protocol_simulates() -> None:
    report = simulate(_hello(), exhaustive=True)
    assert report.passed and report.schedules >= 1
