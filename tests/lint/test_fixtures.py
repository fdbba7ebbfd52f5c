"""Lint UI tests: every `tests/lint/*.cco` fixture is linted and compared.

- Lines carry annotations `# ~ ERROR E003` / `# ~ WARNING W100` / `# ~ NOTE N001` (several codes may
  follow one `~`, comma-separated); `# ~^ ERROR E001` points at the line above.  The set
  of (line, severity, code) that `ccogen lint` reports must equal the annotations:
  an unannotated finding fails the test, and so does an annotation nothing matched.
- An optional first-line header `# lint: --ranks 2 --target nccl-cft --param k=v` sets
  the options.
- The full rendering must equal the blessed `<name>.stderr` beside the fixture
  (`pytest --update-golden` rewrites it); a fixture without findings has none.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ccogen.diag.render import render
from ccogen.driver import CheckOptions, check_text
from tests.helpers import assert_golden

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = sorted(HERE.glob("*.cco"))
ANNOTATION = re.compile(
    r"#\s*~(\^*)\s*(ERROR|WARNING|NOTE)\s+([EWN]\d{3}(?:\s*,\s*[EWN]\d{3})*)")


def annotations(text: str) -> set[tuple[int, str, str]]:
    found: set[tuple[int, str, str]] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        for m in ANNOTATION.finditer(line):
            target = lineno - len(m.group(1))
            for code in m.group(3).split(","):
                found.add((target, m.group(2).lower(), code.strip()))
    return found


def options(text: str) -> CheckOptions:
    first = text.splitlines()[0] if text else ""
    if not first.startswith("# lint:"):
        return CheckOptions()
    argv = shlex.split(first.removeprefix("# lint:"))
    ranks: list[int] = []
    params: dict[str, int] = {}
    target = None
    while argv:
        flag, value = argv.pop(0), argv.pop(0)
        if flag == "--ranks":
            ranks += [int(x) for x in value.split(",")]
        elif flag == "--param":
            key, _, val = value.partition("=")
            params[key] = int(val)
        elif flag == "--target":
            target = value
    return CheckOptions(ranks=tuple(ranks) or None, params=params, target=target)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_lint_fixture(fixture: Path, update_golden: bool) -> None:
    text = fixture.read_text(encoding="utf-8")
    rel = fixture.relative_to(ROOT).as_posix()
    result = check_text(text, rel, options(text))
    reported = {(d.span.line if d.span else 0, d.sev.value, d.code) for d in result.diagnostics}
    expected = annotations(text)
    assert reported == expected, (
        f"unannotated findings: {sorted(reported - expected)}; "
        f"annotations nothing matched: {sorted(expected - reported)}\n"
        + render(result.diagnostics, "full"))
    stderr = fixture.with_suffix(".stderr")
    rendering = render(result.diagnostics, "full")
    if not result.diagnostics:
        assert not stderr.exists(), f"{stderr.name} is stale: the fixture has no findings"
        return
    assert_golden(stderr, rendering, update_golden)


def test_every_code_has_failing_and_passing_fixtures() -> None:
    """Every rule of the registry has a fixture that fires it and one that does not."""
    from ccogen.diag.codes import RULES

    names = {f.stem for f in FIXTURES}
    for code in RULES:
        assert any(n.startswith(code) and not n.endswith("-ok") for n in names), code
        assert any(n.startswith(code) and n.endswith("-ok") for n in names), code
