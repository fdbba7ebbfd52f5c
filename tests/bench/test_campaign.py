"""The campaign's sweeps and its reading of the issue's targets (synthetic results)."""

from __future__ import annotations

from pathlib import Path

from ccogen.bench.campaign import evaluate_targets, requests, targets_markdown
from ccogen.bench.results import BenchResult
from ccogen.bench.sweep import parse_sweep
from ccogen.syntax import load_ir
from tests.bench.synthetic import synthetic

ROOT = Path(__file__).resolve().parents[2]


def test_campaign_sweeps_parse_against_their_protocols() -> None:
    for quick in (False, True):
        for r in requests(ROOT, quick):
            sweep = parse_sweep(r.sweep, load_ir(r.path))
            assert len(sweep.values) >= 2 and r.path.is_file()
    full = {r.sweep.partition("=")[0]: r for r in requests(ROOT)}
    # the issue quotes the copy engine at 1 GiB
    assert parse_sweep(full["block"].sweep, load_ir(full["block"].path)).values[-1] == 1 << 30
    assert full["block"].compare == "alltoall" and full["chunk"].compare == "allgather"
    assert full["rounds"].params == ("size=8B",) and full["size"].params == ("rounds=1",)


def checks_by_name(result: BenchResult) -> dict[str, object]:
    return {c.name: c for c in evaluate_targets(result)}


def test_targets_read_from_the_results() -> None:
    c = checks_by_name(synthetic())
    large = c["large: alltoall vs copy engine"]
    # judged from 16 MiB up (the sizes): 1 MiB's 67.5 % does not count
    assert large.met is True and "worst 96.4 % at 256MiB" in large.measured  # type: ignore[attr-defined]
    vs_nccl = c["large: alltoall vs NCCL"]
    assert vs_nccl.met is True and "worst 1.23x at 256MiB" in vs_nccl.measured  # type: ignore[attr-defined]
    small = c["small: alltoall at 8 B"]
    assert small.met is True and small.measured == "6.00 us"  # type: ignore[attr-defined]
    five = c["small: alltoall at 8 B vs NCCL"]
    assert five.met is True and five.measured.startswith("6.7x")  # type: ignore[attr-defined]
    ping = c["small: pingpong one-way put + signal"]
    assert ping.met is True and "0.800 us" in ping.measured  # type: ignore[attr-defined]
    assert "reference in-kernel 0.700-0.700 us" in ping.measured  # type: ignore[attr-defined]
    put = c["large: put vs copy engine"]
    assert put.met is False and "worst 90.8 % at 16MiB" in put.measured  # type: ignore[attr-defined]
    zero = c["zero cost"]
    assert zero.met is False and "worst 1.047x (pingpong:rounds 8)" in zero.measured  # type: ignore[attr-defined]


def test_nothing_measured_is_said_so() -> None:
    checks = evaluate_targets(BenchResult("nvshmem", 2))
    assert len(checks) == 7 and all(c.met is None for c in checks)
    assert all(c.measured == "not measured" for c in checks)
    table = targets_markdown(checks)
    assert table.count("| not measured |") == 7 and "| nvshmem |" in table
