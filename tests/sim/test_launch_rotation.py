"""The simulator runs `launch % K` protocols over K + 1 consecutive launches, each with
its own landing slot."""

from __future__ import annotations

import ccogen as cg
from tests.analysis.test_launch_rotation import ROTATED


def _failures(text: str) -> set[str]:
    report = cg.simulate(text, ranks=[2, 3], seeds=8)
    return {d.code for i in report.instances for r in i.results for d in r.failures}


def test_two_rotating_slots_pass_back_to_back() -> None:
    assert _failures(ROTATED.replace("SLOTS", "2")) == set()


def test_one_slot_is_overwritten_by_the_next_launch() -> None:
    assert _failures(ROTATED.replace("SLOTS", "1")) & {"E031", "E032"}
