"""The protocols of issue 31 (tests/runtime/data/stall/) are right: they lint clean at the
ranks they ran at on the GPU, for nvshmem, and the simulator passes them under seeded
schedules.  The GPU looked stalled on them because nvcc took minutes to build them
(tests/codegen/test_step_inline.py) while `ccogen run` said nothing; they pass 100
launches on the GPU (tests/runtime/test_gpu_stall.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.diag import Severity
from ccogen.diag.render import render
from ccogen.driver import CheckOptions, check_text
from ccogen.sim import simulate

DATA = Path(__file__).resolve().parent / "data" / "stall"
CASES = [("halo2d", 4), ("halo2d_2x1", 2), ("moe_ll_dispatch_fp8", 2),
         ("moe_ll_dispatch_fp8", 4)]


@pytest.mark.parametrize(("stem", "ranks"), CASES)
def test_the_protocol_lints_clean(stem: str, ranks: int) -> None:
    path = DATA / f"{stem}.cco"
    result = check_text(path.read_text(encoding="utf-8"), path.name,
                        CheckOptions(ranks=(ranks,), target="nvshmem"))
    assert result.instances
    # clean: no error or warning (N001 notes say which `ensure` lines the simulator judges)
    findings = [d for d in result.diagnostics if d.sev is not Severity.NOTE]
    assert not findings, render(findings, "full")


@pytest.mark.parametrize(("stem", "ranks"), CASES)
def test_the_simulator_passes_it(stem: str, ranks: int) -> None:
    report = simulate(DATA / f"{stem}.cco", ranks=ranks, seeds=3, target="nvshmem")
    assert report.passed, render(report.diagnostics, "full")
