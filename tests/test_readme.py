"""The README's quick-start protocol lints clean, simulates and is in canonical form."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ccogen import cli
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


def test_the_clean_lint_line_is_what_lint_prints(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    said = re.search(r"# clean: (hello\.cco: .*)", README.read_text())
    assert said, "the README lost the line a clean `ccogen lint` prints"
    (tmp_path / "hello.cco").write_text(_hello())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "hello.cco"]) == 0
    assert capsys.readouterr().out == said.group(1) + "\n"


def test_quick_start_protocol_simulates() -> None:
    # bounded by a count of schedules, not by time (a loaded machine must not stop it)
    report = simulate(_hello(), exhaustive=True, max_schedules=1000, time_limit=math.inf)
    assert report.passed and report.schedules >= 1
    assert all(i.complete for i in report.instances)
