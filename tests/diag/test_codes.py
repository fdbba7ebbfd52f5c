"""The code registry: every rule of the catalogue, with slug, summary and explanation.

The explanation files themselves (sections, examples that lint as they say) are tested
in tests/reference/test_rules.py.
"""

from __future__ import annotations

import re

import pytest

from ccogen.diag import Severity
from ccogen.diag.codes import RULES, explain_text, lookup

# The codes of the rule catalogue (docs/reference/rules.md), spelled out so that a code
# cannot disappear from the registry unnoticed.
_CATALOGUE_TEXT = """
E001 E002 E003 E004 E005
E010 E011 E012 E013 E014
E020 E021 E022 E023 E024 E025 E026 E027
E030 E031 E032 E033
E040 E041 E042
W100 W101 W102 W103 W104 W105 W106 W107 W108
"""
CATALOGUE = tuple(_CATALOGUE_TEXT.split())
# codes ccogen adds beyond the catalogue, each documented in docs/ (E006: docs/reliability.md,
# E028: docs/checker.md; E034, a run-time total of `wait_count`: docs/reference/language.md
# §14, language v2 §4; E035, a static wait on such a counter: the same section; E036, writes
# of run-time bounds not proved disjoint: the same §14; E037, a credit toward a run-time
# peer: §14 "Run-time peers"; E038, synchronisation in a loop to a run-time count: §14
# "Loops to a run-time count"; N001, an `ensure` line left to the simulator:
# docs/checker.md; E015 and E029, amd-mori 1.2.4 queue and ring limits: docs/targets.md)
PROJECT_CODES = ("E006", "E015", "E028", "E029", "E034", "E035", "E036", "E037", "E038",
                 "N001")
SECTIONS = ("## What it catches", "## Why it matters", "## Example", "## Fixed")
KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def test_catalogue_has_34_codes() -> None:
    assert len(CATALOGUE) == 34


def test_registry_is_exactly_the_catalogue_in_order() -> None:
    assert tuple(RULES) == tuple(sorted((*CATALOGUE, *PROJECT_CODES),
                                        key=lambda c: (c[0] == "W", c)))


def test_keys_match_codes_and_severity_follows_prefix() -> None:
    for code, rule in RULES.items():
        assert rule.code == code
        expected = {"E": Severity.ERROR, "N": Severity.NOTE}.get(code[0], Severity.WARNING)
        assert rule.severity is expected


def test_slugs_are_unique_kebab_case() -> None:
    slugs = [rule.slug for rule in RULES.values()]
    assert len(set(slugs)) == len(slugs)
    assert [slug for slug in slugs if not KEBAB.match(slug)] == []


def test_summaries_are_lowercase_without_final_period() -> None:
    for rule in RULES.values():
        assert rule.summary
        assert not rule.summary.endswith(".")
        assert not rule.summary[0].isupper() or rule.summary.split()[0].isupper(), rule.code


@pytest.mark.parametrize("code", CATALOGUE + PROJECT_CODES)
def test_explain_has_the_four_sections_in_order(code: str) -> None:
    explain = RULES[code].explain
    positions = [explain.find(f"{section}\n") for section in SECTIONS]
    assert -1 not in positions, code
    assert positions == sorted(positions), code
    for start, end in zip(positions, [*positions[1:], len(explain)], strict=True):
        body = explain[start:end].split("\n", 1)[1]
        assert body.strip(), f"{code}: empty section"


@pytest.mark.parametrize("code", CATALOGUE + PROJECT_CODES)
def test_explain_examples_are_fenced_and_short(code: str) -> None:
    explain = RULES[code].explain
    assert explain.count("```python fails\n") >= 1, code
    assert explain.count("```python passes\n") >= 1, code
    assert explain.count("```") == 2 * explain.count("```python"), code
    assert 30 <= len(explain.splitlines()) <= 80, code
    assert explain == explain.strip()


@pytest.mark.parametrize("code", [c for c in CATALOGUE if c.startswith("W")])
def test_warnings_cite_a_figure(code: str) -> None:
    why = RULES[code].explain.split("## Why it matters", 1)[1].split("## Example", 1)[0]
    assert re.search(r"\d", why), f"{code}: no figure in 'Why it matters'"


def test_explain_text_renders_header_and_body() -> None:
    rule = RULES["E021"]
    assert explain_text("E021") == f"E021 (unsatisfiable-wait): {rule.summary}\n\n{rule.explain}"


def test_explain_text_accepts_lowercase_codes_and_slugs() -> None:
    assert explain_text("e021") == explain_text("E021")
    assert explain_text("unsatisfiable-wait") == explain_text("E021")
    assert explain_text("Many-Small-Copies") == explain_text("W100")
    assert lookup("w107").code == "W107"


@pytest.mark.parametrize("name", ["E999", "CCO203", "", "unsatisfiable"])
def test_explain_text_rejects_unknown_names(name: str) -> None:
    with pytest.raises(KeyError):
        explain_text(name)
