"""benchmarks/b2b (issue 30): what the GPU run would check and time, on the CPU (the GPU
run itself is scripts/gpu_b2b_session.sh)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ccogen.syntax import load_ir
from tests.helpers import RUNTIME_PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "b2b"


def module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"b2b_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    found = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = found  # dataclasses look their module up
    spec.loader.exec_module(found)
    return found


def test_the_graph_check_covers_every_library_protocol() -> None:
    graph = module("graph_check")
    assert set(graph.RUNTIME_PARAMS) == RUNTIME_PROTOCOLS  # each at a small shape
    plans, skipped = graph.plans(2)
    assert {p.name for p in plans} == {p.stem for p in (ROOT / "protocols").glob("*.cco")}
    assert skipped == []
    for plan in plans:
        # something is checked on the first and on the last call, and some rank's caller
        # writes inputs before each call
        for launch in (1, graph.CALLS):
            assert any(plan.checks(launch, r) for r in range(2)), plan.name
        assert plan.inputs_of(0) or plan.inputs_of(1), plan.name
        assert set(plan.read) <= set(plan.sizes()), plan.name
        assert bool(plan.draws) == (plan.name in RUNTIME_PROTOCOLS), plan.name
    at8 = {p.name for p in graph.plans(8)[0]}
    assert "alltoall" in at8 and "pingpong" not in at8  # team lsa(2)


def _written_windows(instance: Any, rank: int) -> set[str]:
    return {op.dst.window for op in instance.ranks[rank] if op.dst is not None}


def test_run_time_inputs_are_drawn_and_refilled_as_the_checker_models_the_caller() -> None:
    """Issue 30: the run-time protocols in the graph check.  Between two calls a rank's
    caller writes exactly what the checker and the simulator let it write at its launch
    boundary (every buffer, the windows `ensure` reads as `init(...)`): never a window the
    protocol lands data in, which a peer's next launch may already be writing; each draw
    satisfies `require` and moves data on the calls that are checked."""
    from ccogen.sim.runtime import caller_keys

    graph = module("graph_check")
    plans, _ = graph.plans(4, set(RUNTIME_PROTOCOLS))
    assert {p.name for p in plans} == RUNTIME_PROTOCOLS
    for plan in plans:
        assert set(plan.inputs) == set(caller_keys(plan.instance)), plan.name
        buffers = {b for b, _ in plan.instance.buffer_sizes}
        for rank in range(4):
            landed = _written_windows(plan.instance, rank) - buffers
            refilled = set(plan.inputs_of(rank)) - buffers
            assert not landed & refilled, (plan.name, landed & refilled)
        assert len(plan.draws) == graph.EPOCHS
        assert not any(d.label.startswith("low") for d in plan.draws), plan.name
        # the checked calls compare some bytes (a `low` draw would compare none)
        assert any(r.stop > r.start for c in plan.checks(1, 0) for r in c.regions()
                   if not r.init), plan.name
        # every rank's contents of every caller input come from the draw
        for rank, name in plan.inputs:
            assert (rank, name) in plan.draws[0].arrays, (plan.name, rank, name)
    moe = next(p for p in plans if p.name == "moe_combine")
    # peers load `topk_rank` and `expert_out`: the caller rewrites them (its closing
    # barrier makes that safe); `back` is where the peers' puts land: never rewritten
    assert {"topk_rank", "expert_out"} <= set(moe.inputs_of(0))
    assert "back" not in moe.inputs_of(0)


def test_the_old_alltoall_is_the_host_sync_one() -> None:
    cases = module("b2b_cases")
    old = load_ir(cases.PROTOCOLS["alltoall"]["old"])
    assert old.between_launches.value == "host_sync"
    assert set(cases.PROTOCOLS["alltoall"]) == {"old", "barrier", "credit", "new"}


def test_the_barrier_alltoall_is_timed_against_the_library_credit_one() -> None:
    """The barrier form left the library (its `alltoall` is the credit form since issue
    30): b2b_graph.py times it from benchmarks/b2b, the credit form from protocols/."""
    from ccogen.ir import Barrier

    cases = module("b2b_cases")
    forms = cases.PROTOCOLS["alltoall"]
    barrier = load_ir(forms["barrier"])
    credit = load_ir(ROOT / "protocols" / forms["credit"])
    assert credit.name == "alltoall" and barrier.name == "alltoall_barrier"
    assert barrier.between_launches.value == credit.between_launches.value == "back_to_back"
    assert isinstance(barrier.kernels[0].body[0], Barrier)
    assert not any(isinstance(op, Barrier) for op in credit.kernels[0].body)
    assert "credit" in {w.name for w in credit.windows}


class _Event:
    def __init__(self, fires_after: int | None) -> None:
        self.polls, self.fires_after = 0, fires_after

    def query(self) -> bool:
        self.polls += 1
        return self.fires_after is not None and self.polls > self.fires_after


def test_a_watched_wait_reports_a_stall_and_gives_up() -> None:
    """graph_check.py --watch: a warm-up or replay that does not finish is reported (the
    ranks print their progress words) instead of hanging until the stage's limit."""
    import pytest

    pytest.importorskip("torch")
    capture = module("graph_capture")
    seen: list[float] = []
    assert capture._finished(_Event(None), 0.05, seen.append) is False
    assert len(seen) == 1 and seen[0] >= 0.05
    assert capture._finished(_Event(3), 5.0, seen.append) is True and len(seen) == 1
    assert capture._finished(_Event(3), 0.0, seen.append) is True  # no watch: waits
