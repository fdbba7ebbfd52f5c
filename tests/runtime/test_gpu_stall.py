"""Issue 31 on a GPU shared by NVSHMEM ranks under CUDA MPS (`gpu` marker).

The two protocols that looked stalled at 4 ranks (a 2 x 2 halo exchange and an FP8
low-latency MoE dispatch, tests/runtime/data/stall/) and their 2-rank forms: 100
back-to-back launches each.  Then three stalls, each of which must end within the
watchdog with a message naming what stalled: a protocol that hangs (the checker rejects
it: run with `force`), a rank that never launches its kernel and a stalled bootstrap
(both injected with CCOGEN_FAULT_STALL, ccogen.rt.watchdog).  Skipped without MPS or the
nvshmem toolchain; scripts/gpu_stall_session.sh runs them on the device machine.  The
hung kernels go last: a release kernel that never finishes keeps spinning in the MPS
server after its process is gone, and a debug build's trap ends its context.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ccogen.rt import run
from ccogen.rt.watchdog import FAULT_ENV, STALL_MARGIN_S

DATA = Path(__file__).resolve().parent / "data"
WATCHDOG_S = 5.0
# the run's end: the watchdog, the margin of a stalled phase, the other ranks' grace and
# the processes' exit, never the 115 s of issue 31 or the overall deadline
ENDS_WITHIN_S = 3 * WATCHDOG_S + STALL_MARGIN_S + 40.0

pytestmark = pytest.mark.usefixtures("mps_nvshmem")


@pytest.mark.gpu
@pytest.mark.parametrize(("stem", "ranks"), [
    ("halo2d", 4), ("halo2d_2x1", 2), ("moe_ll_dispatch_fp8", 4), ("moe_ll_dispatch_fp8", 2),
])
def test_the_protocols_of_issue_31_pass_100_launches(stem: str, ranks: int) -> None:
    report = run(DATA / "stall" / f"{stem}.cco", target="nvshmem", ranks=ranks, iters=100,
                 watchdog_s=20)
    print(report.format())
    assert report.ok, report.format()
    assert all(r.epochs == 100 for r in report.ranks)


def _timed_run(path: Path, ranks: int, **kw: object) -> tuple[str, float]:
    start = time.monotonic()
    report = run(path, target="nvshmem", ranks=ranks, iters=2, watchdog_s=WATCHDOG_S, **kw)
    text = report.format()
    print(text)
    assert not report.ok
    return text, time.monotonic() - start


def _error_of(text: str, rank: int) -> str:
    """The report's error line of `rank` (its stack, if any, follows on other lines)."""
    lines = [ln for ln in text.splitlines() if ln.startswith(f"  rank {rank} error:")]
    assert lines, text
    return lines[0]


@pytest.mark.gpu
def test_a_rank_that_never_launches_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1:epoch 0: kernels")
    text, took = _timed_run(DATA / "stall" / "halo2d_2x1.cco", 2)
    assert "kernels that had not finished: `exchange` on rank 0" in text
    assert "epoch 0: kernels" in _error_of(text, 1)
    assert took < ENDS_WITHIN_S


@pytest.mark.gpu
def test_a_stalled_bootstrap_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1:nvshmem engine bootstrap")
    text, took = _timed_run(DATA / "stall" / "halo2d_2x1.cco", 2)
    assert "nvshmem engine bootstrap" in _error_of(text, 1)
    assert "nvshmem engine bootstrap" in _error_of(text, 0)
    assert took < ENDS_WITHIN_S


@pytest.mark.gpu
def test_a_hung_release_kernel_names_the_kernel_and_the_ranks() -> None:
    text, took = _timed_run(DATA / "hang_generated.cco", 2, force=True)
    assert "kernel `k` did not finish within 5 s" in text
    assert "kernels that had not finished: `k` on rank 1" in text
    assert took < ENDS_WITHIN_S


@pytest.mark.gpu
def test_a_hung_debug_kernel_names_the_line_and_the_values() -> None:
    text, took = _timed_run(DATA / "hang_generated.cco", 2, force=True, debug=True)
    assert "timed-out wait:" in text and "hang_generated.cco:12" in text
    assert took < ENDS_WITHIN_S
