"""The concise renderer: one line per diagnostic."""

from __future__ import annotations

from ccogen.diag import Diagnostic
from ccogen.diag.render_concise import line, render


def test_one_sorted_line_each(all_diagnostics: list[Diagnostic]) -> None:
    assert render(all_diagnostics) == (
        "error[E030] every rank waits before it sends\n"
        "protocols/pingpong.cco:4:5: warning[W107] 2 queues declared, but only 1 is used\n"
        "protocols/pingpong.cco:10:20: error[E003] `dst` and `src` differ in length\n"
        "protocols/pingpong.cco:13:13: error[E021] "
        "`wait_signal` expects 2 signals but only 1 is ever sent\n"
    )


def test_line_uses_the_primary_span(unsatisfiable: Diagnostic) -> None:
    assert line(unsatisfiable) == (
        "protocols/pingpong.cco:13:13: error[E021] "
        "`wait_signal` expects 2 signals but only 1 is ever sent"
    )


def test_nothing_renders_empty() -> None:
    assert render([]) == ""
