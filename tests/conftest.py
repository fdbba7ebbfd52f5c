"""Shared pytest configuration.

- `--update-golden`: rewrite golden files instead of failing on a mismatch (fixture
  `update_golden`; see `helpers.assert_golden`).
- `@pytest.mark.gpu` tests are skipped automatically when no NVIDIA GPU / CUDA driver is
  usable here, with the reason the runtime gives.
- `@pytest.mark.toolchain` tests skip themselves through `helpers.require_tool`, naming the
  missing tool and how to install it.
- `cache_dir`: a fresh, empty build cache (`CCOGEN_CACHE_DIR`) for the test.
- Every other test builds into one build cache for the whole run (`CCOGEN_CACHE_DIR`, a
  temporary directory the controller makes, shared by the xdist workers, which inherit
  the environment, and removed at the end): two tests building the same text with the
  same flags and toolchain compile it once (the cache's key and per-entry lock,
  `ccogen.toolchains.cache`), and every run compiles each distinct source once, whatever
  the user's own cache (`~/.cache/ccogen`) holds.  A `CCOGEN_CACHE_DIR` set by the caller
  is used as it is.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_RUN_CACHE = "CCOGEN_TEST_RUN_CACHE"  # set (to the directory) when this run made the cache


def pytest_configure(config: pytest.Config) -> None:
    """The run's build cache (module docstring); xdist workers find it in the environment
    their controller made before starting them."""
    if hasattr(config, "workerinput") or os.environ.get("CCOGEN_CACHE_DIR", "").strip():
        return
    path = tempfile.mkdtemp(prefix="ccogen-test-cache-")  # mode 0700, as the cache wants
    os.environ["CCOGEN_CACHE_DIR"] = os.environ[_RUN_CACHE] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    path = os.environ.pop(_RUN_CACHE, None)
    if path is not None:
        os.environ.pop("CCOGEN_CACHE_DIR", None)
        shutil.rmtree(path, ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files with the current output instead of comparing",
    )


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty build cache for this test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(path))
    return path


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@functools.cache
def _gpu_missing_reason() -> str | None:
    """None when at least one NVIDIA GPU is usable, else why not."""
    from ccogen.rt import native

    try:
        count = native.device_count()
    except native.GpuUnavailable as exc:
        return f"no NVIDIA GPU: {exc}"
    if count < 1:
        return "no NVIDIA GPU: the CUDA driver reports 0 devices"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _gpu_missing_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in gpu_items:
        item.add_marker(skip)
