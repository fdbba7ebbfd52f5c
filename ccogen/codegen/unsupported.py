"""The exception a lowering raises for what it cannot express (E042 at the compiler)."""

from __future__ import annotations

from ccogen.source import Span


class Unsupported(Exception):
    """The instance needs something this lowering cannot express (a clear message)."""

    def __init__(self, message: str, span: Span | None) -> None:
        super().__init__(message)
        self.span = span


__all__ = ["Unsupported"]
