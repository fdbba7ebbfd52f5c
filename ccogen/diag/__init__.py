"""The one diagnostic model: every finding of every stage is a `Diagnostic`.

Renderers (`render_full`, `render_concise`, `render_json`, `render_sarif`,
`render_github`) turn a sequence of diagnostics into text; `codes.RULES` is the
registry of codes with their slug, default severity and summary; `explain` reads each
rule's explanation from docs/reference/rules/.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ccogen.diag.severity import Severity
from ccogen.source import Span


@dataclass(frozen=True, slots=True)
class Label:
    """A span with a message; the primary label marks the offending place."""

    span: Span
    message: str = ""
    primary: bool = False


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A coded finding: message, labels (first primary), notes and a fix hint."""

    code: str
    message: str
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    severity: Severity | None = None

    def __post_init__(self) -> None:
        if self.severity is None:
            from ccogen.diag.codes import RULES

            object.__setattr__(self, "severity", RULES[self.code].severity)

    @property
    def sev(self) -> Severity:
        assert self.severity is not None
        return self.severity

    @property
    def primary(self) -> Label | None:
        for label in self.labels:
            if label.primary:
                return label
        return self.labels[0] if self.labels else None

    @property
    def span(self) -> Span | None:
        label = self.primary
        return label.span if label else None

    @property
    def is_error(self) -> bool:
        return self.sev is Severity.ERROR


def error(
    code: str,
    message: str,
    span: Span | None,
    label: str = "",
    *,
    secondary: Iterable[tuple[Span | None, str]] = (),
    notes: Iterable[str] = (),
    help: str | None = None,
) -> Diagnostic:
    """Build a diagnostic with one primary label and optional secondary labels."""
    labels: list[Label] = []
    if span is not None:
        labels.append(Label(span, label, primary=True))
    labels.extend(Label(s, m) for s, m in secondary if s is not None)
    return Diagnostic(code, message, tuple(labels), tuple(notes), help)


@dataclass
class DiagnosticSink:
    """Collects diagnostics; the driver, not the reporter, decides when to stop."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def emit(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics.extend(diagnostics)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.diagnostics)

    def __len__(self) -> int:
        return len(self.diagnostics)


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    span = d.span
    if span is None:
        return ("", 0, 0, d.code)
    return (span.path, span.line, span.column, d.code)


__all__ = ["Diagnostic", "DiagnosticSink", "Label", "Severity", "error", "sort_key"]
