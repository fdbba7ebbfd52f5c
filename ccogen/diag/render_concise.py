"""Concise rendering: one grep-able line per diagnostic.

    protocols/pingpong.cco:10:13: error[E021] `wait_signal` expects 2 signals

A diagnostic without a span prints `error[E030] message` without the location.
Diagnostics are sorted with `sort_key`; the text ends with a newline, and is empty for
no diagnostics.  Notes, help and secondary labels are left out: use `--format full`.
Control characters of a path or message are shown escaped (`ccogen.diag.visible`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.diag import Diagnostic, sort_key
from ccogen.diag.visible import visible, visible_lines


def render(diagnostics: Sequence[Diagnostic], **_opts: object) -> str:
    """One line per diagnostic, sorted."""
    return "".join(line(d) + "\n" for d in sorted(diagnostics, key=sort_key))


def line(diagnostic: Diagnostic) -> str:
    """`path:line:col: severity[CODE] message`."""
    body = f"{diagnostic.sev.value}[{diagnostic.code}] {visible_lines(diagnostic.message)}"
    span = diagnostic.span
    return body if span is None else f"{visible(str(span))}: {body}"


__all__ = ["line", "render"]
