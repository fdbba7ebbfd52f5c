"""GitHub Actions rendering (`--format github`): one workflow command per diagnostic.

    ::error title=ccogen (E021),file=protocols/pingpong.cco,line=10,col=13,endLine=10,
    endColumn=48::E021 `wait_signal` expects 2 signals%0A  help: wait for `expected=1`

(one line, wrapped here).  `::warning` for warnings, `::notice` for notes.  Lines and
columns are 1-based, `endColumn` is exclusive.  A diagnostic without a span has only the
`title` property.  The data after `::` is the code, the message and, on a second line,
`  help: ...`; notes and secondary labels are left out.  Escaping follows the
workflow-command rules: `%`, `\\r`, `\\n` become `%25`, `%0D`, `%0A` everywhere, and in
property values `:` and `,` also become `%3A`, `%2C`; other control characters are shown
escaped (`\\x1b`, `ccogen.diag.visible`).  Diagnostics are sorted with `sort_key`; the
text ends with a newline, and is empty for no diagnostics.
"""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.diag import Diagnostic, Severity, sort_key
from ccogen.diag.visible import visible
from ccogen.source import Span

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def render(diagnostics: Sequence[Diagnostic], **_opts: object) -> str:
    """One workflow command per diagnostic, sorted."""
    return "".join(command(d) + "\n" for d in sorted(diagnostics, key=sort_key))


def command(d: Diagnostic) -> str:
    """`::error title=...,file=...::CODE message` for one diagnostic."""
    props = [("title", f"ccogen ({d.code})"), *_span_properties(d.span)]
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in props)
    data = f"{d.code} {d.message}" + (f"\n  help: {d.help}" if d.help else "")
    return f"::{_COMMAND[d.sev]} {rendered}::{escape_data(data)}"


def _span_properties(span: Span | None) -> list[tuple[str, str]]:
    if span is None:
        return []
    return [
        ("file", span.path),
        ("line", str(span.line)),
        ("col", str(span.column)),
        ("endLine", str(span.end_line)),
        ("endColumn", str(span.end_column)),
    ]


def escape_data(text: str) -> str:
    """Escape the message part of a workflow command."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """Escape a property value of a workflow command."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


__all__ = ["command", "escape_data", "escape_property", "render"]
