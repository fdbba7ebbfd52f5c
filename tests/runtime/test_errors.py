"""Clear errors without a GPU: messages, exit codes, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ccogen.errors import NoGpuError, NotEnoughGpusError
from ccogen.rt import native, run_manifest
from tests.helpers import run_child

from .conftest import DATA

REPO = Path(__file__).resolve().parents[2]
NO_GPU = pytest.mark.skipif(native.driver_available(), reason="covers machines without a GPU")


@NO_GPU
def test_no_gpu() -> None:
    with pytest.raises(NoGpuError, match=r"^no NVIDIA GPU found: "):
        run_manifest(DATA / "nccl_putsig", iters=1)


def test_too_few_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "device_count", lambda: 1)
    with pytest.raises(NotEnoughGpusError, match=r"^protocol needs 2 GPUs, this machine has 1; "
                       r".*NCCL refuses two ranks of one communicator on one GPU"):
        run_manifest(DATA / "nccl_putsig", iters=1)


def test_zero_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "device_count", lambda: 0)
    with pytest.raises(NoGpuError, match="reports 0 devices"):
        run_manifest(DATA / "nccl_putsig", iters=1)


def test_iters_must_be_positive() -> None:
    from ccogen.errors import RunError

    with pytest.raises(RunError, match="iters must be at least 1"):
        run_manifest(DATA / "nccl_putsig", iters=0)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_child([sys.executable, "-m", "ccogen", *args], cpu_s=300, cwd=REPO, env=env)


@NO_GPU
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_cli_run_without_gpu(target: str) -> None:
    done = _cli("run", "protocols/pingpong.cco", "--target", target, "--ranks", "2",
                "--iters", "3")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: no NVIDIA GPU found: ")
    assert "Traceback" not in done.stderr + done.stdout


def test_cli_run_protocol_errors_are_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cco"
    bad.write_text("protocol broken(\n")
    done = _cli("run", str(bad), "--target", "nccl-lsa")
    assert done.returncode == 1
    assert "E001" in done.stderr and "Traceback" not in done.stderr


def test_cli_run_usage() -> None:
    done = _cli("run", "protocols/pingpong.cco", "--iters", "0")
    assert done.returncode == 2 and "must be at least 1" in done.stderr
    assert "--target" in _cli("run", "--help").stdout
