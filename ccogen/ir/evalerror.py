"""`EvalError`: an expression that cannot be evaluated at instantiation (its own module so
that `ccogen.ir.evaluate` and `ccogen.ir.runtime` both use it without an import cycle)."""

from __future__ import annotations

from ccogen.source import Span


class EvalError(Exception):
    """An expression that cannot be evaluated: becomes a diagnostic at `span`."""

    def __init__(
        self, message: str, span: Span | None, label: str = "", *,
        code: str = "E004", help: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.label = label
        self.code = code
        self.help = help


__all__ = ["EvalError"]
