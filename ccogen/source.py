"""Source text and spans.

A `SourceFile` holds the text of one input (a `.cco` file, a spec snippet, or a
Python file that used the builder).  A `Span` is a half-open byte range in it;
line and column numbers are 1-based and computed on demand.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True, eq=False)
class SourceFile:
    """One input text, identified by its display path."""

    path: str
    text: str

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        starts = [0]
        for i, ch in enumerate(self.text):
            if ch == "\n":
                starts.append(i + 1)
        return tuple(starts)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a byte offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline."""
        starts = self.line_starts
        if line < 1 or line > len(starts):
            return ""
        begin = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[begin:end]

    def offset(self, line: int, column: int) -> int:
        """Byte offset of a 1-based (line, column)."""
        starts = self.line_starts
        line = max(1, min(line, len(starts)))
        return min(starts[line - 1] + column - 1, len(self.text))

    def __repr__(self) -> str:
        return f"SourceFile({self.path!r})"


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range [start, end) of offsets in a source file."""

    file: SourceFile = field(repr=False)
    start: int
    end: int

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def line(self) -> int:
        return self.file.position(self.start)[0]

    @property
    def column(self) -> int:
        return self.file.position(self.start)[1]

    @property
    def end_line(self) -> int:
        return self.file.position(self.end)[0]

    @property
    def end_column(self) -> int:
        return self.file.position(self.end)[1]

    @property
    def text(self) -> str:
        return self.file.text[self.start : self.end]

    def to(self, other: Span | None) -> Span:
        """The smallest span covering both."""
        if other is None or other.file is not self.file:
            return self
        return Span(self.file, min(self.start, other.start), max(self.end, other.end))

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"
