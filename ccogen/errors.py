"""Exceptions that cross module boundaries.

`DiagnosticError` carries user-facing diagnostics (the user's mistake);
`InternalError` is a bug in ccogen and is rendered with a request to report it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ccogen.diag import Diagnostic


class DiagnosticError(Exception):
    """Raised when user input cannot be processed further; carries the reasons."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(f"{d.code}: {d.message}" for d in self.diagnostics))


class InternalError(Exception):
    """An invariant of ccogen itself was broken: this is a bug in ccogen."""
