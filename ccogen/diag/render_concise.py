"""Concise rendering: one grep-able line per diagnostic.

    protocols/pingpong.cco:10:13: error[E021] `wait_signal` expects 2 signals

A diagnostic without a span prints `error[E030] message` without the location.
Diagnostics are sorted with `sort_key`; the text ends with a newline, and is empty for
no diagnostics.  Notes, help and secondary labels are left out: use `--format full`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.diag import Diagnostic, sort_key


def render(diagnostics: Sequence[Diagnostic], **_opts: object) -> str:
    """One line per diagnostic, sorted."""
    return "".join(line(d) + "\n" for d in sorted(diagnostics, key=sort_key))


def line(diagnostic: Diagnostic) -> str:
    """`path:line:col: severity[CODE] message`."""
    body = f"{diagnostic.sev.value}[{diagnostic.code}] {diagnostic.message}"
    span = diagnostic.span
    return body if span is None else f"{span}: {body}"


__all__ = ["line", "render"]
