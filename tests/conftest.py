"""Shared pytest configuration.

- `--update-golden`: rewrite golden files instead of failing on a mismatch (fixture
  `update_golden`; see `helpers.assert_golden`).
- `@pytest.mark.gpu` tests are skipped automatically when no NVIDIA GPU / CUDA driver is
  usable here, with the reason the runtime gives.
- `@pytest.mark.toolchain` tests skip themselves through `helpers.require_tool`, naming the
  missing tool and how to install it.
- `cache_dir`: a fresh, empty build cache (`CCOGEN_CACHE_DIR`) for the test.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


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
