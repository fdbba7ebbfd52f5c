"""benchmarks/b2b (issue 30): what the GPU run would check and time, on the CPU (the GPU
run itself is scripts/gpu_b2b_session.sh)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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


def test_the_graph_check_covers_every_static_library_protocol() -> None:
    graph = module("graph_check")
    assert graph.RUNTIME == RUNTIME_PROTOCOLS
    plans, skipped = graph.plans(2)
    static = {p.stem for p in (ROOT / "protocols").glob("*.cco")} - RUNTIME_PROTOCOLS
    assert {p.name for p in plans} == static
    assert len(skipped) == len(RUNTIME_PROTOCOLS)
    for plan in plans:
        # something is checked on the first and on the last call, and some rank's caller
        # writes inputs before each call
        for launch in (1, graph.CALLS):
            assert any(plan.checks(launch, r) for r in range(2)), plan.name
        assert plan.inputs_of(0) or plan.inputs_of(1), plan.name
        assert set(plan.read) <= set(plan.sizes()), plan.name
    at8 = {p.name for p in graph.plans(8)[0]}
    assert "alltoall" in at8 and "pingpong" not in at8  # team lsa(2)


def test_the_old_alltoall_is_the_host_sync_one() -> None:
    cases = module("b2b_cases")
    old = load_ir(cases.PROTOCOLS["alltoall"]["old"])
    assert old.between_launches.value == "host_sync"
    assert set(cases.PROTOCOLS["alltoall"]) == {"old", "barrier", "new"}
