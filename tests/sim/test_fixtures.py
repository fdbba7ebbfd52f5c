"""Seeded bug fixtures: each fails in simulation with the right code and explanation.

Every `tests/sim/fixtures/<name>.cco` is simulated with the default seeds and
exhaustively; the findings must be exactly the expected code, the message and the
key notes are asserted verbatim, and the full rendering must equal the blessed
`<name>.stdout` (`pytest --update-golden` rewrites it).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ccogen.diag import Diagnostic
from ccogen.diag.render import render
from ccogen.sim import simulate
from tests.helpers import REPO_ROOT, assert_golden

HERE = Path(__file__).resolve().parent / "fixtures"

# name -> (code, message, texts that must appear in the notes, labels or help)
EXPECTED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "race": ("E031", "data race: `put` and `put` write overlapping bytes with nothing ordering "
             "them", ("rank 1 and rank 2 both write `recv@0[0:4096]` here",
                      "so the final bytes depend on the schedule")),
    "read_before_arrival": ("E032", "read before arrival: `copy` reads bytes that `put` may "
                            "still be writing",
                            ("reads `recv@1[0:4096]`", "the `put` issued by rank 0 on queue 0 "
                             "toward rank 1 lands at a time nothing here observes")),
    "wrong_postcondition": ("E033", "postcondition does not hold",
                            ("fails on rank 0", "`recv@0[0:4096]` differs from "
                             "`init(send@1)[0:4096]`", "came from `init(send@2)[0:")),
    "signal_other_queue": ("E024", "`copy` reads data announced by a signal on another queue",
                           ("the data travels on queue 0", "the signal comes on queue 1",
                            "send the signal on the data's queue (`queue=0`)")),
    "wait_first_deadlock": ("E030", "deadlock: every rank that has not finished waits for "
                            "another",
                            ("rank 0 (block 0) blocks in `wait_signal((me - 1) % nranks, "
                             "queue=0)` (line 10): waits for slot [from 1, queue 0] to reach 1, "
                             "has seen 0",
                             "rank 1 (block 0) blocks in")),
    "uncommitted_aggregate": ("E020", "aggregate `put` is never committed",
                              ("posted without ringing the doorbell",
                               "posted but never rung: it moves nothing, and `quiet` does not "
                               "wait for it", "blocks in `wait_count(landed)`",
                               "add `commit(1, queue=0)` after the last aggregate op")),
    "unsatisfiable_wait": ("E021", "`wait_signal` can never be satisfied",
                           ("waits for 2 signals from rank 0 on queue 0",
                            "rank 0 sends 1 signal to rank 1 on queue 0 per launch")),
    "source_reuse": ("E025", "`copy` overwrites the source of a `put` that may still be "
                     "reading it", ("still reading its source here",
                                    "`quiet(1, queue=0)` (or wait for a local signal)")),
    "counted_too_many": ("E026", "`wait_count` can never be satisfied",
                         ("waits for 12288 bytes counted to `landed`",
                          "counted puts deliver 8192 bytes to `landed` on rank 0 per launch")),
    "barrier_mismatch": ("E030", "deadlock: `barrier()` is reached a different number of times",
                         ("`barrier()` is called per launch in kernel `sync` by rank 0 "
                          "(block 0) 2 times, rank 1 (block 0) 1 time",
                          "waits in barrier 2: 1 of 2 parties arrived")),
}


def _texts(d: Diagnostic) -> str:
    return "\n".join([*(label.message for label in d.labels), *d.notes, d.help or ""])


def test_every_fixture_is_listed() -> None:
    assert sorted(p.stem for p in HERE.glob("*.cco")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_fails_with_the_right_explanation(name: str, update_golden: bool) -> None:
    path = str((HERE / f"{name}.cco").relative_to(REPO_ROOT))
    report = simulate(path, path=path)
    code, message, texts = EXPECTED[name]
    assert not report.passed
    assert [(d.code, d.message) for d in report.diagnostics] == [(code, message)]
    found = _texts(report.diagnostics[0])
    for text in texts:
        assert text in found
    assert f"`ccogen simulate {path} --ranks" in found
    assert_golden(HERE / f"{name}.stdout", render(report.diagnostics, "full") +
                  report.summary() + "\n", update_golden)


SCHEDULES = 1000
"""The bound of the exhaustive runs (a count, never time: a loaded machine must not stop
one early); each fixture finishes within 16 schedules."""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_fails_in_every_explored_schedule(name: str) -> None:
    report = simulate(HERE / f"{name}.cco", exhaustive=True, ranks=_smallest(name),
                      max_schedules=SCHEDULES, time_limit=math.inf)
    code = EXPECTED[name][0]
    assert {d.code for d in report.diagnostics} == {code}
    assert all(i.complete for i in report.instances)
    assert all(not r.passed for i in report.instances for r in i.results)


def _smallest(name: str) -> int | None:
    return 2 if name in ("wait_first_deadlock", "uncommitted_aggregate") else None
