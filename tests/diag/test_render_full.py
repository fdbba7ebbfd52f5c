"""The full (rustc-style) renderer, asserted verbatim."""

from __future__ import annotations

from collections.abc import Callable

from ccogen.diag import Diagnostic, Label, error
from ccogen.diag.render_full import render, render_one, summary
from ccogen.source import SourceFile, Span

UNSATISFIABLE = """\
error[E021]: `wait_signal` expects 2 signals but only 1 is ever sent
  --> protocols/pingpong.cco:13:13
   |
10 |             put(1, dst=recv, src=send, queue=0,
   |             ----------------------------------- the only signalled put
11 |                 signal="remote")
12 |         else:
13 |             wait_signal(0, queue=0, expected=2)
   |             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ waits for 2 signals from rank 0
   |
   = note: rank 0 sends to rank 1 on queue 0: 1 signal per epoch
   = note: every schedule hangs here
   = help: wait for `expected=1`, or send a second signalled put
   = note: for more information about this error, try `ccogen explain E021`"""

TOO_MANY_QUEUES = """\
warning[W107]: 2 queues declared, but only 1 is used
  --> protocols/pingpong.cco:4:5
   |
 4 |     queues 2
   |     ^^^^^^^^ 2 queues per peer
...
10 |             put(1, dst=recv, src=send, queue=0,
   |                                        ------- the only queue used
   |
   = help: declare `queues 1`, or `queues auto`
   = note: for more information about this warning, try `ccogen explain W107`"""

REGION_MISMATCH = """\
error[E003]: `dst` and `src` differ in length
  --> protocols/pingpong.cco:10:20
   |
10 |             put(1, dst=recv, src=send, queue=0,
   |                    ^^^^^^^^ 64 bytes
   |                              -------- 32 bytes
   |
  ::: examples/build.py:3:34
   |
 3 | p = cg.Protocol("pingpong", team=cg.lsa(2))
   |                                  --------- team declared here
   |
   = note: for more information about this error, try `ccogen explain E003`"""

DEADLOCK = """\
error[E030]: every rank waits before it sends
  |
  = note: cycle:
          rank 0 waits for rank 1
          rank 1 waits for rank 0
  = note: for more information about this error, try `ccogen explain E030`"""


def test_primary_secondary_multiline_span_and_short_gap(unsatisfiable: Diagnostic) -> None:
    assert render_one(unsatisfiable) == UNSATISFIABLE


def test_long_gap_is_elided_and_gutter_fits_widest_line(too_many_queues: Diagnostic) -> None:
    assert render_one(too_many_queues) == TOO_MANY_QUEUES


def test_two_labels_on_one_line_and_a_label_in_another_file(
    region_mismatch: Diagnostic,
) -> None:
    assert render_one(region_mismatch) == REGION_MISMATCH


def test_spanless_diagnostic_has_header_and_notes_only(deadlock: Diagnostic) -> None:
    assert render_one(deadlock) == DEADLOCK


def test_render_sorts_separates_and_summarises(all_diagnostics: list[Diagnostic]) -> None:
    expected = "\n\n".join(
        [DEADLOCK, TOO_MANY_QUEUES, REGION_MISMATCH, UNSATISFIABLE, "3 errors, 1 warning"]
    )
    assert render(all_diagnostics) == expected + "\n"


def test_render_without_summary(deadlock: Diagnostic) -> None:
    assert render([deadlock], with_summary=False) == DEADLOCK + "\n"


def test_render_of_nothing_is_empty() -> None:
    assert render([]) == ""


def test_summary_counts_and_plurals(unsatisfiable: Diagnostic, too_many_queues: Diagnostic) -> None:
    assert summary([]) == "0 errors, 0 warnings"
    assert summary([unsatisfiable]) == "1 error, 0 warnings"
    assert summary([unsatisfiable, unsatisfiable, too_many_queues]) == "2 errors, 1 warning"


def test_equal_sort_keys_keep_the_callers_order(
    pingpong: SourceFile, span_at: Callable[..., Span]
) -> None:
    span = span_at(pingpong, 4, "queues 2")
    first = error("E012", "first", span)
    second = error("E012", "second", span)
    headers = [line for line in render([first, second]).splitlines() if line.startswith("error")]
    assert headers == ["error[E012]: first", "error[E012]: second"]


def test_colour_only_when_asked(too_many_queues: Diagnostic) -> None:
    assert "\x1b[" not in render([too_many_queues])
    coloured = render([too_many_queues], color=True).splitlines()
    assert coloured[0] == (
        "\x1b[1;33mwarning[W107]\x1b[0m\x1b[1m: 2 queues declared, but only 1 is used\x1b[0m"
    )
    assert coloured[4] == "   \x1b[1;34m|\x1b[0m     \x1b[1;33m^^^^^^^^ 2 queues per peer\x1b[0m"
    assert coloured[7] == (
        "   \x1b[1;34m|\x1b[0m                                        "
        "\x1b[1;34m------- the only queue used\x1b[0m"
    )


def test_error_marks_are_red_in_colour(unsatisfiable: Diagnostic) -> None:
    lines = render_one(unsatisfiable, color=True).splitlines()
    assert lines[0].startswith("\x1b[1;31merror[E021]\x1b[0m")
    assert lines[8].endswith("\x1b[1;31m" + "^" * 35 + " waits for 2 signals from rank 0\x1b[0m")


def test_tabs_expand_to_four_spaces(span_at: Callable[..., Span]) -> None:
    file = SourceFile("t.cco", "kernel k(threads=32):\n\tquiet()\n")
    diagnostic = error("E002", "unknown peer", span_at(file, 2, "quiet()"))
    assert render_one(diagnostic).splitlines()[3:5] == [
        "2 |     quiet()",
        "  |     ^^^^^^^",
    ]


def test_empty_span_at_end_of_line_gets_one_caret() -> None:
    file = SourceFile("t.cco", "kernel k(threads=32)\n    quiet()\n")
    end = len(file.line_text(1))
    label = Label(Span(file, end, end), "add `:`", primary=True)
    assert render_one(Diagnostic("E001", "expected `:`", (label,))).splitlines()[1:5] == [
        " --> t.cco:1:21",
        "  |",
        "1 | kernel k(threads=32)",
        "  |                     ^ add `:`",
    ]


def test_first_label_is_primary_when_none_is_marked(
    pingpong: SourceFile, span_at: Callable[..., Span]
) -> None:
    labels = (Label(span_at(pingpong, 4, "queues"), "this one"),)
    lines = render_one(Diagnostic("W107", "too many", labels)).splitlines()
    assert lines[1] == " --> protocols/pingpong.cco:4:5"
    assert lines[4] == "  |     ^^^^^^ this one"
