"""The engine host shims (`ccogen.rt.engines`): built with the installed headers, loaded
without a GPU (toolchain: nvcc + the engine headers)."""

from __future__ import annotations

import os

import pytest

from ccogen.toolchains.libraries import find_library

from .conftest import require_toolchain

TARGETS = ("nccl-lsa", "nvshmem")


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_engine_shim_builds_and_loads(target: str) -> None:
    """The host shim compiles against the installed headers and loads without a GPU.

    In the run's build cache (tests/conftest.py), not a fresh one: the shim's key covers
    every input (source, flags, nvcc, library), so where another test of the run (the
    bench's --build-only) built the same shim, this loads those very bytes, and the
    build is the same compile either way.  The cache's own behaviour is tested in
    tests/toolchains/."""
    require_toolchain(target)
    from ccogen.rt.engines import load_engine
    from ccogen.toolchains.cache import cache_dir

    engine = load_engine(target)
    library = find_library(target)
    assert engine.header_version == engine.runtime_version() == library.version_code
    if target == "nccl-lsa":
        assert engine.devcomm_size in (200, 248) or engine.devcomm_size > 0
        assert len(engine.unique_id()) == 128  # ncclGetUniqueId works without a GPU
    assert os.path.getsize(next(cache_dir().glob("engine/*/libccogen_engine.so"))) > 0
