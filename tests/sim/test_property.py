"""Property tests on random small protocols (`tests/sim/gen.py`).

* A protocol the linter reports clean computes one final memory, whatever the
  schedule: exhaustive exploration finds a single result, and it passes.
* Partial-order reduction loses nothing: on tiny instances (bugs included) the
  outcomes of the explored schedules are exactly those of every interleaving.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ccogen.driver import CheckOptions, check_text
from ccogen.instantiate import instantiate
from ccogen.sim import simulate
from ccogen.sim.plan import build_plan
from ccogen.sim.schedule import Setup
from ccogen.sim.state import random_image
from ccogen.syntax import parse_ir
from tests.sim.brute import brute_outcomes, dpor_outcomes
from tests.sim.gen import Gen, protocols

SCHEDULES = 1000
SETTINGS = settings(max_examples=20, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _lint_clean(g: Gen) -> bool:
    result = check_text(g.text, f"{g.shape}.cco", CheckOptions(ranks=g.ranks))
    return not result.has_errors


@SETTINGS
@given(protocols())
def test_lint_clean_protocols_end_with_one_memory(g: Gen) -> None:
    assume(_lint_clean(g))
    # bounded by a count of schedules, never by time (a loaded machine must not stop the
    # search early); 60 drawn protocols needed at most 2 schedules each
    report = simulate(g.text, ranks=g.ranks, exhaustive=True, path=f"{g.shape}.cco",
                      digests=True, max_schedules=SCHEDULES, time_limit=math.inf)
    assert report.passed, g.text
    for inst in report.instances:
        assert inst.complete, inst.limit
        assert len(inst.digests) == 1, g.text


@SETTINGS
@given(protocols(mutate=True), st.sampled_from([1, 2]), st.sampled_from([1, 2]))
def test_reduction_finds_every_outcome(g: Gen, epochs: int, pieces: int) -> None:
    inst, _ = instantiate(parse_ir(g.text, f"{g.shape}.cco"), 2, {})
    assert inst is not None
    plan = build_plan(inst)
    setup = Setup(plan, random_image(plan, 0), epochs, pieces)
    try:
        every, _ = brute_outcomes(setup, limit=3000)
    except AssertionError:
        assume(False)  # too many states to enumerate
    explored, _ = dpor_outcomes(setup)
    assert explored == every, g.text
