"""The simulator against the checker's UI fixtures (`tests/lint/*.cco`): two judges agree.

The simulator never reads the checker's findings; this test compares verdicts.

* every `-ok` fixture passes every seed;
* a fixture annotated with an ordering/completion rule (E020-E033) fails with that
  code, except where a rule forbids a pattern whose run does no harm, or where the
  simulator sees the effect rather than the cause (`EFFECTS`, each explained);
* fixtures for static rules (names, ranks, queue ids, alignment, capabilities) that
  still instantiate pass: the simulator judges behaviour, not API conformance.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ccogen.errors import DiagnosticError
from ccogen.sim import simulate
from tests.helpers import REPO_ROOT

FIXTURES = sorted((REPO_ROOT / "tests" / "lint").glob("*.cco"))
ANNOTATION = re.compile(r"#\s*~\^*\s*ERROR\s+([EW]\d{3}(?:\s*,\s*[EW]\d{3})*)")
RUNTIME = re.compile(r"E0[23]\d")

# fixture -> what the simulator reports instead (empty: the run does no harm)
EFFECTS: dict[str, set[str]] = {
    # `quiet` before `commit` waits for nothing, but nothing here depends on it (the host
    # barrier between launches comes after rank 1's wait for the data)
    "E020-commit-after-quiet": set(),
    # a second hand-written wait that is already met orders nothing, and needs not
    "E022-expected-decreasing": set(),
    "E022-expected-equal": set(),
    # wrong hand-written expected values: the wait never passes, or passes too early
    "E022-expected-shared-across-queues": {"E021"},
    "E023-expected-counted-per-lane": {"E021"},
    "E023-expected-per-group-with-signal-per-copy": {"E032"},
    # a wait for more bytes than the reset leaves: the run hangs there
    "E026-expected-after-reset": {"E030"},
    # the run hangs at the first wait: the wait nothing satisfies behind it is never reached
    "E030-deadlock-beside-an-extra-wait": {"E030"},
    # a run-time `expected=` above what the counted puts bring (drawn contents with more
    # rows from the first warp): the wait can never be met
    "E034-runtime-total-mismatch": {"E026"},
    # the simulator runs what the generated code waits for (the footprint per launch):
    # the second launch hangs
    "E035-static-wait-on-runtime-count": {"E030"},
    # the checker could not prove the writes disjoint; they are, for every drawn contents
    "E036-unproved-disjoint-writes": set(),
    # the checker cannot tell which contents route a run-time peer onto rank 1 (E036:
    # could not prove); the simulator draws `dest` and meets the race on the draws that do
    "E036-runtime-peer": {"E031"},
}

# fixtures of a target's limit that the language does not have, too large to simulate in CI:
# the simulator runs without a target, where they are fine (E029: the `mori-sdma` ring of
# amd-mori 1.2.4; its 2731 signalled puts take minutes to simulate)
TARGET_LIMITS = frozenset({"E029-sdma-ring-overflow", "E029-sdma-ring-overflow-ok"})


def _expected(text: str) -> set[str]:
    return {c.strip() for m in ANNOTATION.finditer(text) for c in m.group(1).split(",")}


def _options(text: str) -> tuple[list[int] | None, dict[str, int]]:
    first = text.splitlines()[0] if text else ""
    ranks: list[int] | None = None
    params: dict[str, int] = {}
    argv = shlex.split(first.removeprefix("# lint:")) if first.startswith("# lint:") else []
    while argv:
        flag, value = argv.pop(0), argv.pop(0)
        if flag == "--ranks":
            ranks = [int(x) for x in value.split(",")]
        elif flag == "--param":
            key, _, val = value.partition("=")
            params[key] = int(val)
    return ranks, params


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_the_simulator_agrees_with_the_checker(path: Path) -> None:
    if path.stem in TARGET_LIMITS:
        pytest.skip("a limit of one target, not of the language the simulator runs")
    text = path.read_text(encoding="utf-8")
    expected = _expected(text)
    ranks, params = _options(text)
    try:
        report = simulate(text, ranks=ranks, params=params, seeds=6, path=path.name)
    except DiagnosticError as exc:  # syntax and names: the same front end
        assert {d.code for d in exc.diagnostics} == expected
        return
    got = {d.code for d in report.diagnostics if d.is_error}
    if path.stem in EFFECTS:
        assert got == EFFECTS[path.stem]
    elif any(RUNTIME.fullmatch(c) for c in expected):
        assert got == {c for c in expected if RUNTIME.fullmatch(c)}
    elif got:  # instantiation errors (E002-E005) come from the shared front end
        assert got == expected
    else:
        assert report.passed
