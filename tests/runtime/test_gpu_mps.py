"""Issue 20 on a GPU shared by several NVSHMEM ranks under CUDA MPS (`gpu` marker).

Skipped without a GPU, without MPS running (`nvidia-cuda-mps-control -d`) or without the
nvshmem toolchain.  The full matrix (every protocol x 2, 4, 8 ranks x default and
largest size x 100 launches, the compute-kernel run, the budget's cost) is
scripts/gpu_mps_session.sh; these tests run the issue's own case through `ccogen.run`,
the refusal, and a slice of the matrix through the same script.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ccogen.rt import run
from ccogen.rt.placement import ResidencyError

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("mps_nvshmem")


@pytest.mark.gpu
def test_counted_broadcast_at_three_ranks_on_shared_gpus() -> None:
    """The hang of issue 20: 8 MiB, 3 ranks, second launch.  Now 100 epochs pass."""
    from ccogen.rt import native as runtime

    ranks = max(3, runtime.device_count() + 1)  # more ranks than GPUs: they share
    report = run(ROOT / "protocols" / "counted_broadcast.cco", target="nvshmem", ranks=ranks,
                 iters=100, seed=3, watchdog_s=20)
    print(report.format())
    assert report.ok, report.format()
    assert "functional only" in report.placement


@pytest.mark.gpu
def test_a_budget_the_gpu_cannot_hold_is_refused_before_launching() -> None:
    from ccogen.rt import native as runtime

    ranks = 8 * max(1, runtime.device_count())  # 8 per GPU x 129 CTAs > 4 per SM x SMs
    with pytest.raises(ResidencyError, match=r"must be resident at once.*--max-ctas \d+ or less"):
        run(ROOT / "protocols" / "counted_broadcast.cco", target="nvshmem", ranks=ranks,
            iters=1, max_ctas=128, watchdog_s=10)


@pytest.mark.gpu
@pytest.mark.parametrize("stage", [
    ["matrix", "--protocols", "counted_broadcast,alltoall,ring_allgather", "--ranks", "2,8"],
    ["hog", "--hog-sms", "100", "--hog-seconds", "15"],
], ids=["matrix", "hog"])
def test_mps_matrix_script(stage: list[str], tmp_path: Path) -> None:
    out = tmp_path / "mps.md"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "mps_matrix.py"), *stage,
                           "--out", str(out), "--work", str(tmp_path / "work"),
                           "--total-s", "400"], capture_output=True, text=True, timeout=480,
                          cwd=ROOT)
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert done.returncode == 0, out.read_text() if out.exists() else done.stderr[-3000:]
    assert "| FAIL" not in out.read_text() and "| hang" not in out.read_text()
