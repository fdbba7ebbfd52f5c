"""Where the user's call is: the span of the calling expression, from Python's frames."""

from __future__ import annotations

import functools
import linecache
import sys
from dataclasses import dataclass
from types import CodeType, FrameType

from ccogen.source import SourceFile, Span

# ----------------------------------------------------------------------------- spans


@dataclass
class _Lines:
    lines: list[str]
    file: SourceFile


_FILES: dict[str, _Lines] = {}


def _source_file(frame: FrameType) -> SourceFile | None:
    """The `SourceFile` of a frame's Python file, cached while linecache's copy is."""
    filename = frame.f_code.co_filename
    lines = linecache.getlines(filename, frame.f_globals)
    if not lines:
        return None
    cached = _FILES.get(filename)
    if cached is None or cached.lines is not lines:
        cached = _FILES[filename] = _Lines(lines, SourceFile(filename, "".join(lines)))
    return cached.file


@functools.lru_cache(maxsize=512)
def _code_positions(code: CodeType) -> tuple[tuple[int | None, ...], ...]:
    return tuple(code.co_positions())


def _char_column(file: SourceFile, line: int, byte_column: int) -> int:
    """1-based character column of a UTF-8 byte offset into a line."""
    text = file.line_text(line)
    if text.isascii():
        return byte_column + 1
    prefix = text.encode("utf-8")[:byte_column]
    return len(prefix.decode("utf-8", errors="ignore")) + 1


def _frame_span(frame: FrameType) -> Span:
    """The span of the expression a frame is executing (its whole line as a fallback)."""
    file = _source_file(frame)
    if file is None:  # no source text (<stdin>, exec): an empty span on the right line
        file = SourceFile(frame.f_code.co_filename, "\n" * frame.f_lineno)
        start = file.offset(frame.f_lineno, 1)
        return Span(file, start, start)
    positions = _code_positions(frame.f_code)
    index = frame.f_lasti // 2
    pos = positions[index] if 0 <= index < len(positions) else (None, None, None, None)
    line, end_line, col, end_col = pos
    if line is None or end_line is None or col is None or end_col is None:
        return _line_span(file, frame.f_lineno)
    start = file.offset(line, _char_column(file, line, col))
    return Span(file, start, file.offset(end_line, _char_column(file, end_line, end_col)))


def _line_span(file: SourceFile, line: int) -> Span:
    text = file.line_text(line)
    start = file.offset(line, len(text) - len(text.lstrip()) + 1)
    return Span(file, start, file.offset(line, len(text.rstrip()) + 1))


def span_at(src_loc_at: int) -> Span:
    """The span of the call to the function that calls this, `src_loc_at` frames up."""
    return _frame_span(sys._getframe(2 + src_loc_at))
