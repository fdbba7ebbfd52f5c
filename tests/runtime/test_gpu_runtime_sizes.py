"""Run-time sizes (language v2 §3, §7) on one GPU shared by 2 NVSHMEM ranks under CUDA MPS
(`gpu` marker): alltoallv, moe_dispatch and moe_combine, 100 epochs, each epoch's
contents drawn afresh to satisfy `require` (skewed routings included) and `ensure`
checked on them.  Skipped without a GPU, without MPS running or without the nvshmem
toolchain.  The 2/4/8-rank matrix is scripts/v2_runtime_mps_run.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.rt import run

ROOT = Path(__file__).resolve().parents[2]
CASES = {"alltoallv": {"cap": 256},
         "moe_dispatch": {"tokens": 16, "hidden": 64, "k": 2},
         "moe_combine": {"tokens": 16, "hidden": 64, "k": 2}}


pytestmark = pytest.mark.usefixtures("mps_nvshmem")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_runtime_protocol_holds_on_fresh_draws_under_mps(name: str) -> None:
    report = run(ROOT / "protocols" / f"{name}.cco", target="nvshmem", ranks=2,
                 params=CASES[name], iters=100, seed=11, watchdog_s=30)
    print(report.format())
    assert report.ok, report.format()
    draws = report.ranks[0].draws
    assert len(draws) == 100 and draws[:2] == ["low", "high"]
    assert len(set(draws)) == 100  # a fresh draw every epoch


@pytest.mark.gpu
def test_runtime_protocol_debug_build_runs_its_require_checks() -> None:
    """Debug build: `require` checked on the device every launch; drawn contents satisfy
    it, so nothing is reported and every epoch passes."""
    report = run(ROOT / "protocols" / "alltoallv.cco", target="nvshmem", ranks=2,
                 params={"cap": 64}, iters=10, seed=5, debug=True, watchdog_s=30)
    print(report.format())
    assert report.ok, report.format()
