"""Merging findings: one diagnostic per distinct finding, and the places it was seen.

A check finds one mistake on many ranks, loop iterations, instances or schedules.
Every layer that collects findings (the instantiation, the checks of
`ccogen.passes`, the driver across instances, the simulator across schedules) keeps
them in a `FindingSet`: the first diagnostic of each key, and the places (`where`:
a rank, an instance label, a schedule) in the order first seen, each once.  Adding is
O(1) (dicts, no list scans), so merging n findings costs O(n).

One mistake can also read differently from place to place: a region out of bounds
names its bytes, which depend on the rank, the iteration and the team size.
`shape_key` keys a finding by its code, its place and its message with the numbers
taken out, so that those merge too (the diagnostic kept is the first one seen, whose
notes say which rank and instance its numbers are from).

`capped` keeps at most `limit` findings of each code and says how many it left out;
`ranks_note` is the one wording of "on ranks ...".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from ccogen.diag import Diagnostic

W = TypeVar("W", bound=Hashable)
RANKS_SHOWN = 16


def span_key(d: Diagnostic) -> tuple[object, ...]:
    """Code, message and primary span: the same finding at the same place."""
    span = d.span
    return (d.code, d.message, span and (span.path, span.start, span.end))


_NUMBER = re.compile(r"(?<!\w)-?\d[\d_.]*")  # not the 16 of `bf16` nor the 1 of `x_1`


def message_shape(message: str) -> str:
    """The message with its numbers replaced by `#`: `region `x[#:#]` is outside ...`."""
    return _NUMBER.sub("#", message)


# the note a finding carries when its instance stopped at the findings limit
# (`instantiate.findings.Findings(stop=True)`); the driver keeps it when merging instances
STOPPED_NOTE = "stopped after "


def shape_key(d: Diagnostic) -> tuple[object, ...]:
    """Code, primary span and message shape: one mistake, whatever its numbers."""
    span = d.span
    return (d.code, message_shape(d.message), span and (span.path, span.start, span.end))


def is_ranks_note(note: str) -> bool:
    """A note of `ranks_note`."""
    return note.startswith(("on rank ", "on ranks ", "on every rank"))


@dataclass
class Entry(Generic[W]):
    diagnostic: Diagnostic
    places: dict[W, None] = field(default_factory=dict)  # an ordered set

    @property
    def where(self) -> list[W]:
        return list(self.places)


class FindingSet(Generic[W]):
    """Findings keyed by `key(d)` (default `span_key`), each with the places seen."""

    def __init__(self, key: Callable[[Diagnostic], Hashable] = span_key) -> None:
        self._key = key
        self._entries: dict[Hashable, Entry[W]] = {}

    def add(self, d: Diagnostic, where: W | None = None) -> Entry[W]:
        entry = self._entries.get(k := self._key(d))
        if entry is None:
            entry = self._entries[k] = Entry(d)
        if where is not None:
            entry.places[where] = None
        return entry

    def get(self, d: Diagnostic) -> Entry[W] | None:
        return self._entries.get(self._key(d))

    def __iter__(self) -> Iterator[Entry[W]]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


def ranks_note(ranks: Sequence[int], nranks: int) -> str:
    """`on every rank`, `on rank 3`, `on ranks 0, 2` (long lists end with a count)."""
    if len(ranks) == nranks > 1:
        return "on every rank"
    if len(ranks) == 1:
        return f"on rank {ranks[0]}"
    shown = ", ".join(map(str, ranks[:RANKS_SHOWN]))
    more = len(ranks) - RANKS_SHOWN
    return f"on ranks {shown}" + (f" and {more} more" if more > 0 else "")


def capped(diagnostics: Sequence[Diagnostic], limit: int | None) -> list[Diagnostic]:
    """At most `limit` findings of each code (in the given order); the last one shown
    of a code that had more says how many were left out and how to see them."""
    if limit is None:
        return list(diagnostics)
    counts: dict[str, int] = {}
    for d in diagnostics:
        counts[d.code] = counts.get(d.code, 0) + 1
    out: list[Diagnostic] = []
    shown: dict[str, int] = {}
    for d in diagnostics:
        n = shown[d.code] = shown.get(d.code, 0) + 1
        if n > limit:
            continue
        if n == limit and counts[d.code] > limit:
            rest = counts[d.code] - limit
            d = replace(d, notes=(*d.notes, f"{rest} more {d.code} finding{'s' if rest > 1 else ''}"
                                  f" not shown: at most {limit} per rule (`--limit "
                                  "findings=N` shows more)"))
        out.append(d)
    return out


__all__ = [
    "RANKS_SHOWN",
    "STOPPED_NOTE",
    "Entry",
    "FindingSet",
    "capped",
    "is_ranks_note",
    "message_shape",
    "ranks_note",
    "shape_key",
    "span_key",
]
