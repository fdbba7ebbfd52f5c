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
    from ccogen.rt.errors import ToolchainError
    from ccogen.rt.toolchain import find_library, find_nvcc

    try:
        find_nvcc()
        find_library(target)
    except ToolchainError as exc:
        pytest.skip(str(exc))
