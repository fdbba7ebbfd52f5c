"""The binding on GPUs (marker gpu; needs torch with CUDA and the nvshmem toolchain).

The example under torchrun at 2 ranks — eager steps, 100 CUDA-graph replays, torch.compile
— checked bit for bit against all_to_all_single's definition on gathered data, and the
debug-build hang reported as a DeviceError; examples/dp_allreduce_step.py at 2 ranks
(eager, CUDA-graph replay, torch.compile), its sums checked against the exact sum and its
trained parameters against a communication-free replica.  With fewer GPUs than ranks the
ranks share a GPU: that needs CUDA MPS running (`nvidia-cuda-mps-control -d`) and uses a
gloo group and the nvshmem engine; set CCOGEN_TEST_MPS=1 to say MPS is up (skipped
otherwise).
scripts/gpu_torch_session.sh runs the same at 2 and 4 ranks and measures the overhead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the binding's GPU tests need torch with CUDA")

ROOT = Path(__file__).resolve().parent.parent.parent
RANKS = 2


def _shared() -> list[str]:
    if torch.cuda.device_count() >= RANKS:
        return []
    if os.environ.get("CCOGEN_TEST_MPS") != "1":
        pytest.skip(f"{RANKS} ranks on {torch.cuda.device_count()} GPU(s) need CUDA MPS "
                    "(start nvidia-cuda-mps-control -d and set CCOGEN_TEST_MPS=1)")
    return ["--shared-gpu"]


def _torchrun(script: Path, *args: str, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           str(RANKS), "--master-port", str(port), str(script), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.gpu
def test_example_eager_graph_compile() -> None:
    done = _torchrun(ROOT / "examples" / "alltoall_step.py", *_shared(),
                     "--modes", "eager,graph,compile", port=29611)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RESULT: PASS" in done.stdout
    assert "graph: 100 replays back to back" in done.stdout


@pytest.mark.gpu
def test_a_hung_wait_is_a_device_error() -> None:
    done = _torchrun(ROOT / "tests" / "torch" / "gpu_device_error.py", *_shared(), "hang",
                     port=29612)
    assert "rank 1: DeviceError: " in done.stdout, done.stdout + done.stderr
    assert "wait at hang_generated.cco:12 for (src 0, queue 0) expected 2" in done.stdout


@pytest.mark.gpu
def test_a_violated_require_is_a_device_error() -> None:
    done = _torchrun(ROOT / "tests" / "torch" / "gpu_device_error.py", *_shared(), "require",
                     port=29619)
    line = next(i for i, text in enumerate(
        (ROOT / "protocols" / "alltoallv.cco").read_text().splitlines(), 1)
        if "0 <= counts[p] <= cap" in text)
    said = [text for text in done.stdout.splitlines() if text.startswith("rank 0: ")]
    print("\n".join(text for text in done.stdout.splitlines() if text.startswith("rank ")))
    assert said and "DeviceError: alltoallv(" in said[0], done.stdout + done.stderr
    assert (f"rank 0: require at alltoallv.cco:{line} does not hold: element 1 is 69"
            in said[0]), done.stdout + done.stderr


@pytest.mark.gpu
@pytest.mark.parametrize(("mode", "port"), [("eager", 29613), ("graph", 29614),
                                            ("compile", 29615)])
def test_data_parallel_example(mode: str, port: int) -> None:
    flags = [] if mode == "eager" else [f"--{mode}"]
    done = _torchrun(ROOT / "examples" / "dp_allreduce_step.py", *_shared(), *flags,
                     "--steps", "20", port=port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"RESULT: PASS ({RANKS} ranks" in done.stdout
    line = rf"^{mode}[^\n]*: 20 steps on {RANKS} ranks [^\n]*: ok$"
    assert re.search(line, done.stdout, re.MULTILINE), done.stdout
    if mode == "graph":
        assert "capture, 20 replays" in done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize(("mode", "port"), [("eager", 29616), ("graph", 29617),
                                            ("compile", 29618)])
def test_moe_example(mode: str, port: int) -> None:
    flags = [] if mode == "eager" else [f"--{mode}"]
    done = _torchrun(ROOT / "examples" / "moe_layer.py", *_shared(), *flags,
                     "--steps", "20", port=port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"RESULT: PASS ({RANKS} ranks" in done.stdout
    line = rf"^{mode}[^\n]*: 20 steps on {RANKS} ranks [^\n]*: ok$"
    assert re.search(line, done.stdout, re.MULTILINE), done.stdout
    if mode == "graph":
        assert "capture, 20 replays" in done.stdout


@pytest.mark.gpu
def test_run_time_batch_sizes() -> None:
    """The fixture gather_rows.cco: 20 eager calls with `x[:n]` and 20 replays of one CUDA
    graph with the count in a device tensor, counts drawn per rank and call (0 .. cap),
    every row checked (tests/torch/gpu_batch.py)."""
    done = _torchrun(ROOT / "tests" / "torch" / "gpu_batch.py", *_shared(), port=29620)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"RESULT: PASS ({RANKS} ranks, 20 eager calls and 20 graph replays" in done.stdout
    for rank in range(RANKS):
        assert f"rank {rank}: eager ok" in done.stdout and f"rank {rank}: graph ok" in done.stdout
