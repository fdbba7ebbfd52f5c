"""The GitHub Actions renderer: workflow commands and their escaping."""

from __future__ import annotations

from collections.abc import Callable

from ccogen.diag import Diagnostic, error
from ccogen.diag.render_github import command, escape_data, escape_property, render
from ccogen.source import SourceFile, Span


def test_error_with_help(unsatisfiable: Diagnostic) -> None:
    assert command(unsatisfiable) == (
        "::error title=ccogen (E021),file=protocols/pingpong.cco,line=13,col=13,"
        "endLine=13,endColumn=48::E021 `wait_signal` expects 2 signals but only 1 is ever "
        "sent%0A  help: wait for `expected=1`, or send a second signalled put"
    )


def test_warning_and_spanless(too_many_queues: Diagnostic, deadlock: Diagnostic) -> None:
    assert command(too_many_queues).startswith(
        "::warning title=ccogen (W107),file=protocols/pingpong.cco,line=4,col=5,"
        "endLine=4,endColumn=13::W107 "
    )
    assert command(deadlock) == "::error title=ccogen (E030)::E030 every rank waits before it sends"


def test_render_is_sorted_one_line_each(all_diagnostics: list[Diagnostic]) -> None:
    lines = render(all_diagnostics).split("\n")
    assert lines[-1] == ""
    assert [line.split("::")[2].split(" ")[0] for line in lines[:-1]] == [
        "E030",
        "W107",
        "E003",
        "E021",
    ]
    assert render([]) == ""


def test_escaping_rules() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_message_and_path_are_escaped(span_at: Callable[..., Span]) -> None:
    file = SourceFile("dir,with:odd%name.cco", "queues 2\n")
    diagnostic = error(
        "E012", "50% of\nqueues", span_at(file, 1, "queues 2"), help="use 1, or 2: fine"
    )
    assert command(diagnostic) == (
        "::error title=ccogen (E012),file=dir%2Cwith%3Aodd%25name.cco,line=1,col=1,"
        "endLine=1,endColumn=9::E012 50%25 of%0Aqueues%0A  help: use 1, or 2: fine"
    )
