"""docs/reference/rules/: one explanation per rule, and every example lints as it says.

- Every code of the registry has `CODE.md` and every file there is a registered code;
  the title line is `# CODE (slug): summary`, exactly the registry's.
- `ccogen explain CODE` prints that file (without its title), found through
  `ccogen._resources.rules_dir`, which the wheel gets through `wheel.force-include`.
- Examples are fenced ```` ```python fails ```` or ```` ```python passes ````.  A failing
  example must report its rule, and no other rule; a passing one must lint without any
  finding.  A first line `# lint: --target T` (or `--ranks N,M`) gives the options of
  `ccogen lint` the example needs, as in tests/lint.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

import ccogen as cg
from ccogen import _resources
from ccogen.diag.codes import RULES, explain_text
from ccogen.diag.explain import explanation, rule_file
from ccogen.errors import InternalError

ROOT = Path(__file__).resolve().parent.parent.parent
RULES_DIR = ROOT / "docs" / "reference" / "rules"
FILES = sorted(RULES_DIR.glob("*.md"))
SECTIONS = ("## What it catches", "## Why it matters", "## Example", "## Fixed")
FENCE = re.compile(r"^```(\S*)(?: (\S+))?\n(.*?)^```$", re.S | re.M)


def examples(text: str) -> list[tuple[str, str]]:
    """(marker, code) of every fenced block: marker is `fails` or `passes` (or what is there)."""
    return [(marker, body) for _lang, marker, body in FENCE.findall(text)]


def lint_options(text: str) -> dict[str, Any]:
    first = text.splitlines()[0]
    if not first.startswith("# lint:"):
        return {}
    argv = shlex.split(first.removeprefix("# lint:"))
    options: dict[str, Any] = {}
    while argv:
        flag, value = argv.pop(0), argv.pop(0)
        if flag == "--target":
            options["target"] = value
        elif flag == "--ranks":
            options["ranks"] = tuple(int(x) for x in value.split(","))
        else:
            raise AssertionError(f"unknown `# lint:` option {flag}")
    return options


def codes_of(text: str) -> list[str]:
    result = cg.check(text, **lint_options(text))
    return sorted({d.code for d in result.diagnostics})


CASES = [(path.stem, n, marker, body) for path in FILES
         for n, (marker, body) in enumerate(examples(path.read_text(encoding="utf-8")), 1)]


def test_every_rule_has_a_file_and_every_file_a_rule() -> None:
    assert sorted(path.stem for path in FILES) == sorted(RULES)


def test_the_package_reads_the_files_of_this_checkout() -> None:
    assert _resources.rules_dir() == RULES_DIR
    assert all(rule_file(code).is_file() for code in RULES)


def test_an_installed_package_reads_the_files_the_wheel_ships(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    force = config["tool"]["scikit-build"]["wheel"]["force-include"]
    assert force["docs/reference/rules"] == "ccogen/rules"
    # site-packages/ccogen/rules as the wheel lays it out: no pyproject.toml beside it
    installed = tmp_path / "site-packages" / "ccogen"
    shutil.copytree(RULES_DIR, installed / "rules")
    (installed / "rules" / "E021.md").write_text("# E021 (x): y\n\nfrom the wheel\n")
    monkeypatch.setattr(_resources, "_PACKAGE_DIR", installed)
    explanation.cache_clear()
    try:
        assert _resources.rules_dir() == installed / "rules"
        assert explain_text("E021").endswith("\n\nfrom the wheel")
        shutil.rmtree(installed / "rules")
        explanation.cache_clear()
        with pytest.raises(InternalError, match="explanation of E021 is missing"):
            explain_text("E021")
    finally:
        explanation.cache_clear()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_title_is_the_registry_entry(path: Path) -> None:
    rule = RULES[path.stem]
    title = path.read_text(encoding="utf-8").split("\n", 1)[0]
    assert title == f"# {rule.code} ({rule.slug}): {rule.summary}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_sections_in_order_with_examples_where_they_belong(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    starts = [text.find(f"\n{section}\n") for section in SECTIONS]
    assert -1 not in starts and starts == sorted(starts), path.name
    example, fixed = text[starts[2]:starts[3]], text[starts[3]:]
    assert [m for m, _ in examples(example)] == ["fails"], "## Example: one failing example"
    assert "passes" in [m for m, _ in examples(fixed)], "## Fixed: a passing example"
    assert {m for m, _ in examples(text)} <= {"fails", "passes"}, "unmarked example"


@pytest.mark.parametrize(("code", "n", "marker", "text"), CASES,
                         ids=[f"{c}-{n}-{m}" for c, n, m, _ in CASES])
def test_example_lints_as_marked(code: str, n: int, marker: str, text: str) -> None:
    found = codes_of(text)
    if marker == "fails":
        assert found == [code], f"example {n} should report {code} alone, reports {found}"
    else:
        assert found == [], f"example {n} should lint clean, reports {found}"


def test_explain_prints_the_file_without_its_title() -> None:
    for code, rule in RULES.items():
        _title, body = rule_file(code).read_text(encoding="utf-8").split("\n", 1)
        assert explain_text(code) == f"{code} ({rule.slug}): {rule.summary}\n\n{body.strip()}"
