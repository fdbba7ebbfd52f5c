"""Fixtures of the runtime tests: the toolchain skip, test data (the isolated build cache,
`cache_dir`, is tests/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


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
