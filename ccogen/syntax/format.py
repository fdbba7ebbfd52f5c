"""`ccogen fmt`: canonical printing that keeps the user's comments.

Comments are found with a small scanner that skips string literals.  A comment alone
on its line is printed before the next statement or declaration that starts after it
(at that statement's indentation); a comment after code on a line is printed after
the statement that covers that line.  Comments after the last statement end the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ccogen.source import SourceFile


@dataclass
class Comments:
    """The comments of one file, consumed as the printer reaches them."""

    own_line: list[tuple[int, str]] = field(default_factory=list)
    trailing: dict[int, str] = field(default_factory=dict)

    def before(self, line: int | None) -> Iterator[str]:
        """Comments above `line` (all remaining ones when `line` is None), in source order.

        Besides own-line comments, a trailing comment that no statement claimed (on
        the `protocol` line or its parameters, the docstring, `else:`, `ensure:`, a
        continued line) comes out here, on its own line: no comment is ever dropped.
        """
        while True:
            own = self.own_line[0][0] if self.own_line else None
            trail = min(self.trailing) if self.trailing else None
            if own is not None and (trail is None or own < trail):
                if line is not None and own >= line:
                    return
                yield self.own_line.pop(0)[1]
            elif trail is not None and (line is None or trail < line):
                yield self.trailing.pop(trail)
            else:
                return

    def inline(self, first: int, last: int) -> str | None:
        found = [self.trailing.pop(n) for n in range(first, last + 1) if n in self.trailing]
        return "  ".join(found) if found else None


def scan_comments(file: SourceFile) -> Comments:
    comments = Comments()
    text, i, n = file.text, 0, len(file.text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            line, column = file.position(i)
            body = text[i:end].rstrip()
            if file.line_text(line)[: column - 1].strip():
                comments.trailing[line] = body
            else:
                comments.own_line.append((line, body))
            i = end
            continue
        i += 1
    return comments


def _skip_string(text: str, i: int) -> int:
    quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else text[i]
    j = i + len(quote)
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j):
            return j + len(quote)
        if len(quote) == 1 and text[j] == "\n":
            return j
        j += 1
    return j


def format_text(text: str, path: str = "<string>") -> str:
    """Canonical text of a `.cco` file, comments kept; raises `DiagnosticError`."""
    from ccogen.syntax import parse_ir
    from ccogen.syntax.printer import print_protocol

    protocol = parse_ir(text, path)
    return print_protocol(protocol, scan_comments(SourceFile(path, text)))
