"""Sample sources and diagnostics shared by the renderer tests.

Everything is offered as fixtures (`span_at` is the `span_of` helper), so the tests
import nothing from here and work whether or not `tests/` is a package.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ccogen.diag import Diagnostic, Label, error
from ccogen.source import SourceFile, Span

SpanOf = Callable[..., Span]

PINGPONG = '''\
protocol pingpong(block: bytes = 64 B):
    """One put from rank 0, one wait on rank 1."""
    team lsa(2)
    queues 2
    window send: block
    window recv: block

    kernel ping(threads=32):
        if me == 0:
            put(1, dst=recv, src=send, queue=0,
                signal="remote")
        else:
            wait_signal(0, queue=0, expected=2)
'''

BUILDER = """\
import ccogen as cg

p = cg.Protocol("pingpong", team=cg.lsa(2))
"""


def span_of(file: SourceFile, line: int, needle: str, through: str | None = None) -> Span:
    """The span of `needle` on `line`, or from `needle` to the end of `through` after it."""
    start = file.offset(line, 1) + file.line_text(line).index(needle)
    end = start + len(needle)
    if through is not None:
        end = file.text.index(through, start) + len(through)
    return Span(file, start, end)


@pytest.fixture
def span_at() -> SpanOf:
    """`span_at(file, line, needle, through=None)`: see `span_of`."""
    return span_of


@pytest.fixture
def pingpong() -> SourceFile:
    return SourceFile("protocols/pingpong.cco", PINGPONG)


@pytest.fixture
def builder() -> SourceFile:
    return SourceFile("examples/build.py", BUILDER)


@pytest.fixture
def unsatisfiable(pingpong: SourceFile) -> Diagnostic:
    """E021: primary on line 13, a two-line secondary on lines 10-11, notes and help."""
    return error(
        "E021",
        "`wait_signal` expects 2 signals but only 1 is ever sent",
        span_of(pingpong, 13, "wait_signal(0, queue=0, expected=2)"),
        "waits for 2 signals from rank 0",
        secondary=[(span_of(pingpong, 10, "put(", through='"remote")'), "the only signalled put")],
        notes=[
            "rank 0 sends to rank 1 on queue 0: 1 signal per epoch",
            "every schedule hangs here",
        ],
        help="wait for `expected=1`, or send a second signalled put",
    )


@pytest.fixture
def too_many_queues(pingpong: SourceFile) -> Diagnostic:
    """W107: primary on line 4, a secondary six lines further down."""
    return error(
        "W107",
        "2 queues declared, but only 1 is used",
        span_of(pingpong, 4, "queues 2"),
        "2 queues per peer",
        secondary=[(span_of(pingpong, 10, "queue=0"), "the only queue used")],
        help="declare `queues 1`, or `queues auto`",
    )


@pytest.fixture
def region_mismatch(pingpong: SourceFile, builder: SourceFile) -> Diagnostic:
    """E003: two labels on one line and a label in another file."""
    return Diagnostic(
        "E003",
        "`dst` and `src` differ in length",
        (
            Label(span_of(pingpong, 10, "dst=recv"), "64 bytes", primary=True),
            Label(span_of(pingpong, 10, "src=send"), "32 bytes"),
            Label(span_of(builder, 3, "cg.lsa(2)"), "team declared here"),
        ),
    )


@pytest.fixture
def deadlock() -> Diagnostic:
    """E030 without a span, with a note of several lines."""
    return error(
        "E030",
        "every rank waits before it sends",
        None,
        notes=["cycle:\nrank 0 waits for rank 1\nrank 1 waits for rank 0"],
    )


@pytest.fixture
def all_diagnostics(
    unsatisfiable: Diagnostic,
    too_many_queues: Diagnostic,
    region_mismatch: Diagnostic,
    deadlock: Diagnostic,
) -> list[Diagnostic]:
    """In an order different from the sorted one."""
    return [unsatisfiable, too_many_queues, region_mismatch, deadlock]
