"""The binding's tests: those that need torch import it through `torch_or_skip`."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
               ) -> None:
    """Generated files go to a cache of this test session (never the user's)."""
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
