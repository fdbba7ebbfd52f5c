"""Full, rustc-style rendering: the default on a terminal.

One diagnostic looks like this (`^` under the primary label, `-` under secondary ones)::

    error[E021]: `wait_signal` expects 2 signals but only 1 is ever sent
      --> protocols/pingpong.cco:9:9
       |
     7 |         put(1, dst=recv, src=send, queue=0, signal="remote")
       |         ---------------------------------------------------- the only signalled put
     8 |     else:
     9 |         wait_signal(0, queue=0, expected=2)
       |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ waits for 2 signals from rank 0
       |
       = note: the slot `[0, 0]` of rank 1 reaches 1 in one epoch
       = help: wait for `expected=1`, or send a second signalled put
       = note: for more information about this error, try `ccogen explain E021`

Layout rules:

- The gutter is as wide as the widest line number shown.  Lines are shown in
  increasing order; a gap of at most 2 lines between two labelled lines is shown in
  full, a larger one as a `...` line.
- A label spanning several lines is marked on its first line, up to the end of it.
  Several labels on one line get one mark line each, left to right.
- Labels in another file than the primary one get their own `::: path:line:col`
  section after the primary file's.
- A diagnostic without any label prints its header, an empty gutter and its notes.
- Tabs in source lines are shown as 4 spaces; trailing whitespace is dropped.  Other
  control characters of the user's text (source lines, paths, messages) are shown
  escaped (`\\x1b`, `ccogen.diag.visible`), and the marks count the escaped width.

`render` sorts the diagnostics with `sort_key`, separates them by a blank line and,
unless `with_summary=False`, ends with a blank line and the summary line from `summary`,
e.g. `2 errors, 1 warning`.  Nothing at all is printed for no diagnostics.  ANSI
colour only with `color=True`: bold red errors, bold yellow warnings, bold blue
gutter and secondary labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ccogen.diag import Diagnostic, Label, Severity, sort_key
from ccogen.diag.visible import visible, visible_lines
from ccogen.source import SourceFile, Span

_TAB = "    "
_MAX_GAP = 2
_RESET = "\x1b[0m"
_BOLD = "1"
_BLUE = "1;34"
_SEVERITY_COLOR = {Severity.ERROR: "1;31", Severity.WARNING: "1;33", Severity.NOTE: "1;36"}


@dataclass(frozen=True, slots=True)
class _Style:
    """ANSI painting (a no-op without colour), gutter width and primary mark colour."""

    color: bool
    width: int = 1
    primary: str = _SEVERITY_COLOR[Severity.ERROR]

    def paint(self, text: str, code: str) -> str:
        if not self.color or not text:
            return text
        return f"\x1b[{code}m{text}{_RESET}"

    @property
    def blank(self) -> str:
        """The empty gutter line `   |`."""
        return " " * (self.width + 1) + self.paint("|", _BLUE)


def render(
    diagnostics: Sequence[Diagnostic],
    *,
    color: bool = False,
    with_summary: bool = True,
    **_opts: object,
) -> str:
    """All diagnostics in full form, sorted, blank-line separated, with a summary line."""
    if not diagnostics:
        return ""
    blocks = [render_one(d, color=color) for d in sorted(diagnostics, key=sort_key)]
    if with_summary:
        blocks.append(_Style(color).paint(summary(diagnostics), _BOLD))
    return "\n\n".join(blocks) + "\n"


def summary(diagnostics: Sequence[Diagnostic]) -> str:
    """`N errors, M warnings` (and `, K notes` when there are notes), with the singular
    for a count of 1."""
    errors = sum(1 for d in diagnostics if d.is_error)
    notes = sum(1 for d in diagnostics if d.sev is Severity.NOTE)
    warnings = len(diagnostics) - errors - notes
    text = f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
    return f"{text}, {_plural(notes, 'note')}" if notes else text


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render_one(diagnostic: Diagnostic, *, color: bool = False) -> str:
    """One diagnostic in full form, without a trailing newline."""
    width = max((len(str(x.span.line)) for x in diagnostic.labels), default=1)
    style = _Style(color, width, _SEVERITY_COLOR[diagnostic.sev])
    lines = [_header(diagnostic, style), *_snippet(diagnostic, style), style.blank]
    lines += _footer(diagnostic, style)
    return "\n".join(lines)


def _header(d: Diagnostic, style: _Style) -> str:
    title = style.paint(f"{d.sev.value}[{d.code}]", style.primary)
    return title + style.paint(f": {visible_lines(d.message)}", _BOLD)


# -- source snippet -------------------------------------------------------------------


def _snippet(d: Diagnostic, style: _Style) -> list[str]:
    lines: list[str] = []
    for index, (file, labels) in enumerate(_labels_by_file(d)):
        if index > 0:
            lines.append(style.blank)
        arrow = style.paint("-->" if index == 0 else ":::", _BLUE)
        where = visible(str(labels[0].span if index else d.span))
        lines.append(f"{' ' * style.width}{arrow} {where}")
        lines.append(style.blank)
        lines += _file_lines(file, labels, style)
    return lines


def _labels_by_file(d: Diagnostic) -> list[tuple[SourceFile, list[Label]]]:
    """Labels grouped by file, the primary label's file first, each sorted by position."""
    primary = d.primary
    if primary is None:
        return []
    ordered = [replace(primary, primary=True)] + [x for x in d.labels if x is not primary]
    groups: dict[str, tuple[SourceFile, list[Label]]] = {}
    for label in ordered:
        groups.setdefault(label.span.path, (label.span.file, []))[1].append(label)
    return [(file, sorted(labels, key=_label_key)) for file, labels in groups.values()]


def _label_key(label: Label) -> tuple[int, int]:
    return (label.span.start, label.span.end)


def _file_lines(file: SourceFile, labels: list[Label], style: _Style) -> list[str]:
    lines: list[str] = []
    previous: int | None = None
    for number in sorted({label.span.line for label in labels}):
        lines += _gap(file, previous, number, style)
        lines.append(_source_line(file, number, style))
        lines += [_marks(label, style) for label in labels if label.span.line == number]
        previous = number
    return lines


def _gap(file: SourceFile, previous: int | None, number: int, style: _Style) -> list[str]:
    """The lines between two labelled lines: all of them if few, else `...`."""
    if previous is None or number - previous <= 1:
        return []
    if number - previous - 1 > _MAX_GAP:
        return ["..."]
    return [_source_line(file, n, style) for n in range(previous + 1, number)]


def _source_line(file: SourceFile, number: int, style: _Style) -> str:
    text = _shown(file.line_text(number).rstrip())
    gutter = style.paint(f"{number:>{style.width}} |", _BLUE)
    return f"{gutter} {text}" if text else gutter


def _marks(label: Label, style: _Style) -> str:
    begin, length = _mark_extent(label.span)
    char = "^" if label.primary else "-"
    marks = char * length + (f" {visible_lines(label.message)}" if label.message else "")
    color = style.primary if label.primary else _BLUE
    return f"{style.blank} {' ' * begin}{style.paint(marks, color)}"


def _mark_extent(span: Span) -> tuple[int, int]:
    """Display column (0-based) and width of a span's marks on its first line."""
    text = span.file.line_text(span.line)
    start = span.column - 1
    end = len(text.rstrip("\r")) if span.end_line != span.line else span.end_column - 1
    begin = len(_shown(text[:start]))
    length = len(_shown(text[start:end]))
    return begin, max(1, length)


def _shown(text: str) -> str:
    """A piece of a source line as printed: tabs expanded, control characters escaped."""
    return visible(text.replace("\t", _TAB))


# -- notes ------------------------------------------------------------------------------


def _footer(d: Diagnostic, style: _Style) -> list[str]:
    items = [("note", note) for note in d.notes]
    if d.help:
        items.append(("help", d.help))
    kind = d.sev.value
    items.append(("note", f"for more information about this {kind}, try `ccogen explain {d.code}`"))
    return [_note(name, text, style) for name, text in items]


def _note(name: str, text: str, style: _Style) -> str:
    """`= note: text`; continuation lines of a multi-line text align with the text."""
    pad = " " * (style.width + 1)
    prefix = pad + style.paint("=", _BLUE) + " " + style.paint(f"{name}:", _BOLD)
    indent = pad + " " * len(f"= {name}: ")
    first, *rest = visible_lines(text).split("\n")
    return "\n".join([f"{prefix} {first}"] + [f"{indent}{line}".rstrip() for line in rest])


__all__ = ["render", "render_one", "summary"]
