"""Fixtures of the runtime tests: an isolated build cache, the toolchain skip, test data."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty build cache for this test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(path))
    return path


def require_toolchain(target: str) -> None:
    """Skip unless nvcc and the target's headers are installed (the message says how)."""
    __tracebackhide__ = True
    from ccogen.errors import ToolchainError
    from ccogen.toolchains.libraries import find_library, find_nvcc

    try:
        find_nvcc()
        find_library(target)
    except ToolchainError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def mps_nvshmem() -> None:
    """Skip unless CUDA MPS runs and the nvshmem toolchain is installed (ranks sharing a GPU)."""
    from ccogen.rt.placement import detect_mps

    status = detect_mps()
    if not status.running:
        pytest.skip(f"needs CUDA MPS (nvidia-cuda-mps-control -d): {status.detail}")
    require_toolchain("nvshmem")
