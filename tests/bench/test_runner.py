"""Planning (generated and reference instances per swept value), cases, merging (no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccogen.bench.cases import CaseTimes, RankBench
from ccogen.bench.ceiling import Ceilings, copies_per_sample, sizes_for, sm_copy_grid
from ccogen.bench.collective import INFO_KEY
from ccogen.bench.results import BenchResult
from ccogen.bench.runner import (
    Settings,
    SweepRequest,
    cases_of,
    compare_key,
    compares_of,
    floor_cases,
    floors_dir,
    merge,
    plan_all,
    resolve_compare,
    timing_for,
)

ROOT = Path(__file__).resolve().parents[2]
KIB, MIB = 1 << 10, 1 << 20
CREDIT = 16  # alltoall's 16-byte credit, one per ordered pair, the other way (issue 30)


@pytest.mark.parametrize(("choice", "name", "expected"), [
    ("auto", "alltoall", "alltoall"), ("auto", "my_all_to_all", "alltoall"),
    ("auto", "ring_allgather", "allgather"), ("auto", "pingpong", None),
    ("none", "alltoall", None), ("allgather", "pingpong", "allgather"),
])
def test_compare_choice(choice: str, name: str, expected: str | None) -> None:
    assert resolve_compare(choice, name) == expected


def test_compare_choice_refuses_unknown() -> None:
    with pytest.raises(ValueError, match="--compare is one of"):
        resolve_compare("allreduce", "alltoall")


def plan(tmp_path: Path, target: str = "nccl-lsa"):  # type: ignore[no-untyped-def]
    # graph_max: the 1 MiB alltoall's busiest link, its block and a credit, replays in a
    # graph (the boundary is inclusive), the 4 MiB one does not
    settings = Settings(target=target, out_dir=tmp_path, graph_max=MIB + CREDIT, samples=7,
                        verify_after_max=4 * MIB)
    requests = [SweepRequest(ROOT / "protocols" / "alltoall.cco", "block=8B,1MiB,4MiB"),
                SweepRequest(ROOT / "protocols" / "pingpong.cco", "rounds=1,4", ("size=8B",))]
    return settings, plan_all(requests, settings)


def test_plan_generates_each_instance_and_its_reference(tmp_path: Path) -> None:
    _, p = plan(tmp_path)
    assert [(q.sweep, q.value) for q in p.points] == [
        ("alltoall:block", 8), ("alltoall:block", MIB), ("alltoall:block", 4 * MIB),
        ("pingpong:rounds", 1), ("pingpong:rounds", 4)]
    for q in p.points:
        manifest = json.loads((q.generated_dir / "manifest.json").read_text())
        assert manifest["params"][q.param] == q.value
        assert "ccogen_launch_epoch" in (q.generated_dir / "kernels.cu").read_text()
        assert q.reference_dir is not None and (q.reference_dir / "kernels.cu").is_file()
        assert q.checks  # the instance's ensure comparisons
    a2a = p.points[1]
    # each rank receives, per peer, the block and that peer's credit (ccogen.bench.traffic)
    assert a2a.compare == "alltoall" and a2a.traffic.per_peer == MIB + CREDIT
    assert a2a.window_bytes == 4 * MIB + CREDIT * 2  # send + recv of 2 * block, credit 16 * nranks
    # 4 rounds of 8 B, and rank 1's 16-byte credit at the start of the launch (issue 30)
    assert p.points[3].compare is None and p.points[4].traffic.per_direction == 32 + 16


def test_timing_and_cases(tmp_path: Path) -> None:
    settings, p = plan(tmp_path)
    assert timing_for(p.points[0], settings).graph
    assert timing_for(p.points[1], settings).epochs_per_sample == settings.epochs_per_graph
    assert not timing_for(p.points[2], settings).graph  # 4 MiB > graph_max
    cubins = {d: tmp_path / "fake.cubin" for q in p.points
              for d in (q.generated_dir, q.reference_dir) if d is not None}
    cases = cases_of(p, cubins, settings)
    assert len(cases) == 10 and len({c.key for c in cases}) == 10
    big = [c for c in cases if c.key.startswith("alltoall:block@4194304")]
    assert all(not c.verify_after for c in big)  # 8 MiB of windows > verify_after_max
    ping_ref = next(c for c in cases if c.key == "pingpong:rounds@4/reference")
    assert ping_ref.timer_offset is not None
    assert all(c.timing.samples == 7 for c in cases)
    floors = floor_cases(floors_dir(settings), tmp_path / "e.cubin", settings)
    assert [c.timing.graph for c in floors] == [False, True]
    assert all(not c.module_init for c in floors)


def test_compares_are_shared_between_equal_shapes(tmp_path: Path) -> None:
    settings, p = plan(tmp_path)
    compares = compares_of(p, settings)
    # sized like the instance: per peer, the block and the credit
    assert [(c.kind, c.per_peer) for c in compares] == [
        ("alltoall", 8 + CREDIT), ("alltoall", MIB + CREDIT), ("alltoall", 4 * MIB + CREDIT)]


def test_merge_takes_the_slowest_rank_and_all_verdicts(tmp_path: Path) -> None:
    settings, p = plan(tmp_path)
    first = p.points[0]

    def times(key: str, us: float, verified: bool = True, **kw: object) -> CaseTimes:
        return CaseTimes(key, [us, us, us * 1.1], mode="graph", verified=verified, **kw)  # type: ignore[arg-type]

    ranks = [
        RankBench(0, [times(first.key("generated"), 5.0), times(first.key("reference"), 4.0),
                      times(compare_key("alltoall", 8 + CREDIT), 40.0),
                      CaseTimes(INFO_KEY, note="torch 2.11, NCCL 2.28.9"),
                      times("floors/graph", 1.0)], library="NCCL 2.28.9", device="H200"),
        RankBench(1, [times(first.key("generated"), 6.0),
                      times(first.key("reference"), 4.0, verified=False,
                            failures=["rank 1, epoch 0: ensure failed"]),
                      times(compare_key("alltoall", 8 + CREDIT), 41.0)], device="H200"),
    ]
    # the ceilings are measured (and keyed) at each point's per-direction bytes: block + credit
    ceilings = Ceilings({"ce-bidir": {8 + CREDIT: [2.0, 2.0], MIB + CREDIT: [5.0]}})
    result = BenchResult("nccl-lsa", 2)
    merge(result, p, ranks, ceilings, settings)
    gen = result.find("alltoall:block", "generated", 8)
    assert gen is not None and gen.median_us == 6.0 and gen.verified is True
    assert gen.epochs_per_sample == settings.epochs_per_graph and gen.mode == "graph"
    refp = result.find("alltoall:block", "reference", 8)
    assert refp is not None and refp.verified is False and "ensure failed" in refp.note
    nccl = result.find("alltoall:block", "nccl", 8)
    assert nccl is not None and nccl.median_us == 41.0
    ce = result.find("alltoall:block", "ce-bidir", MIB)
    assert ce is not None and ce.median_us == 5.0
    missing = result.find("pingpong:rounds", "generated", 4)
    assert missing is not None and missing.stats is None and missing.note == "not run"
    assert result.info["collectives"] == "torch 2.11, NCCL 2.28.9"
    assert result.info["devices"] == {"0": "H200", "1": "H200"}
    assert [q.mode for q in result.points if q.sweep == "floors"] == ["graph"]


def test_merge_reports_a_failed_rank(tmp_path: Path) -> None:
    settings, p = plan(tmp_path)
    result = BenchResult("nccl-lsa", 2)
    merge(result, p, [RankBench(0), RankBench(1, error="the kernels did not finish")], None,
          settings)
    assert "rank 1: the kernels did not finish" in result.errors
    gen = result.find("alltoall:block", "generated", MIB)
    assert gen is not None and "a rank failed" in gen.note


def test_ceiling_helpers() -> None:
    assert sizes_for([0, 8, MIB, 8]) == (8, MIB)
    assert copies_per_sample(8) == 17 and copies_per_sample(256 * MIB) == 1
    assert sm_copy_grid(16) == 1 and sm_copy_grid(256 * MIB) == 4 * 132


def test_ceiling_choice(tmp_path: Path) -> None:
    from ccogen.bench.runner import ceiling_for

    settings = Settings(target="nccl-lsa", out_dir=tmp_path)
    p = plan_all([SweepRequest(ROOT / "protocols" / "alltoall.cco", "block=8B"),
                  SweepRequest(ROOT / "protocols" / "pingpong.cco", "rounds=1", ceiling="ce"),
                  SweepRequest(ROOT / "protocols" / "striped_put.cco", "stripe=4KiB"),
                  SweepRequest(ROOT / "protocols" / "broadcast_pipelined.cco", "chunk=1024")],
                 settings)
    assert ceiling_for(p, "alltoall:block") == "ce-bidir"   # both ways at once
    assert ceiling_for(p, "pingpong:rounds") == "ce"        # asked: the two ways take turns
    # one way only (striped_put is not: its receiver's 16-byte credit comes back)
    assert ceiling_for(p, "broadcast_pipelined:chunk") == "ce"
    assert ceiling_for(p, "striped_put:stripe") == "ce-bidir"
