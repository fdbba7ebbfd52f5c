"""Fixtures of the code generation tests.

`per_rank`: the SM backends print one function per rank and logical block, as before
codegen.ranks folded them over the ranks.  For the tests of the other passes (CTA split,
spread rows, rotation, run-time values...) that read one rank's program in the text:
the fold itself is checked against exactly those per-rank programs by
tests/codegen/test_ranks.py, and what users get (folded) by the goldens.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ccogen.codegen.backends.sm import SmBackend


@pytest.fixture
def per_rank(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(SmBackend, "folds_ranks", False)
    yield
