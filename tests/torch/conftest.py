"""The binding's tests: those that need torch import it through `torch_or_skip`."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
               ) -> None:
    """Generated files go to a cache of this test session (never the user's), unless
    CCOGEN_TEST_KEEP_CACHE=1: the GPU session scripts set it so that the torchrun jobs of
    the GPU tests find the cubins and shims they prebuilt in $CCOGEN_CACHE_DIR (with `-m
    gpu` only: the CPU tests count compiler runs, which a warm cache does not make)."""
    if os.environ.get("CCOGEN_TEST_KEEP_CACHE") == "1":
        return
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
