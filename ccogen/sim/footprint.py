"""Footprints: what the next step of a process touches, for partial-order reduction.

A footprint is a set of keys `(object, mode, value)` and of memory ranges.  Modes:
`r` reads, `w` writes, `a` adds (adds commute with each other).  For a slot or
counter the value matters: a wait reads it needing a value, an increment adds to
it starting from a value, and a wait depends only on the increments it needs
(see `ccogen.sim.dpor`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ccogen.sim.state import WindowKey

NEVER = 1 << 62
Obj = tuple[object, ...]  # a state object: ("slot", key), ("qi", queue, item), ...
Key = tuple[Obj, str, int]  # (state object, "r"/"w"/"a", value)
Keys = tuple[Key, ...]
Mems = tuple[tuple[WindowKey, int, int, bool], ...]


def rd(obj: Obj, need: int = 0) -> Key:
    """Reads `obj`; a wait says which value it needs."""
    return (obj, "r", need)


def wr(obj: Obj) -> Key:
    return (obj, "w", 0)


def add(obj: Obj, before: int = 0) -> Key:
    """Adds to `obj` (adds commute); an increment says the value it starts from."""
    return (obj, "a", before)


@dataclass(frozen=True, slots=True)
class StepDesc:
    """The next step of a process: a stable id, whether it may run, what it touches."""

    id: tuple[object, ...]
    enabled: bool
    keys: Keys
    mems: Mems
    also: tuple[int, ...] = ()  # other processes the step moves (a posting group's lanes)


