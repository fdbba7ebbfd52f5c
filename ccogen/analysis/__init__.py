"""Analyses of an instance, shared by the checks and the code generators.

`analyse(instance)` returns the `Analysis`: the signal/counter matching with the
expected values the generated code waits for (`matching.Matching`,
`matching.ExpectedValues`), the inferred thread mode of every posting group of lanes,
and -- built on first use, the code generators never need it -- the happens-before
graph (`hb_graph.HBGraph`) of two launches back to back (`launches.back_to_back`:
`Analysis.launches` is that instance; the graph's op indices and events refer to it,
and its first launch has the indices of `instance`).  Results are cached per
instance (a few recent instances); the checks get them through
`ccogen.passes.base.analysis_of(ctx)`, which caches in `PassContext.cache`.
`Analysis.conflicts` lists the memory conflicts (`races.conflicts`) behind E024, E025,
E031 and E032.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

from ccogen.analysis.events import EventKind
from ccogen.analysis.hb_graph import HBGraph
from ccogen.analysis.launches import back_to_back, launch_matching
from ccogen.analysis.matching import ExpectedValues, Matching, match
from ccogen.analysis.races import Conflict, ConflictKind, conflicts
from ccogen.ir.instance import Instance, OpInst
from ccogen.ir.nodes import Mode
from ccogen.ir.opkind import OpKind

_RECENT = 2


@dataclass(frozen=True)
class Analysis:
    """Everything the checks and the code generators learn about one instance."""

    instance: Instance
    matching: Matching
    max_bytes: int | None = None  # the graph's clocks may take at most this (None: no limit)

    @cached_property
    def launches(self) -> Instance:
        """The instance launched twice back to back: what the graph describes."""
        return back_to_back(self.instance)

    @cached_property
    def graph(self) -> HBGraph:
        with gc_paused():
            return HBGraph(self.launches, launch_matching(self.launches, self.matching),
                           self.max_bytes)

    @property
    def expected(self) -> ExpectedValues:
        return self.matching.expected

    @property
    def modes(self) -> dict[tuple[int, int], Mode]:
        """`(rank, posting group)` -> `same_queue` or `independent`, for lanes' put/get."""
        return dict(self.matching.modes)

    @cached_property
    def conflicts(self) -> list[Conflict]:
        """Accesses that may touch the same bytes in either order (`races.conflicts`)."""
        with gc_paused():
            return conflicts(self.graph)

    def conflicts_of(self, kind: ConflictKind) -> list[Conflict]:
        return [c for c in self.conflicts if c.kind is kind]

    def after_reset(self, rank: int, index: int) -> tuple[OpInst, int] | None:
        """For `wait_count` `index` of `rank` (first launch) behind a `reset_count` of its
        counter: the last such reset, and the bytes counted to the key that it does not
        erase (those not surely counted before it).  None without a reset."""
        g = self.graph
        w = self.matching.waits.get((rank, index))
        op = self.instance.ranks[rank][index]
        if w is None or op.kind is not OpKind.WAIT_COUNT:
            return None
        issue = g.issue(rank, index)
        resets = [r for r in self.launches.ranks[rank][:index]
                  if r.kind is OpKind.RESET_COUNT and r.counter == op.counter
                  and g.hb(g.issue(r.rank, r.index), issue)]
        if not resets:
            return None
        last = g.issue(resets[-1].rank, resets[-1].index)
        counts = [(c.nbytes, g.event(EventKind.COUNT, c.sender, c.op))
                  for c in self.matching.writes(w)]
        return resets[-1], sum(n for n, e in counts if e is None or not g.hb(e, last))


_cache: dict[int, Analysis] = {}
_cache_lock = threading.Lock()  # lookups and evictions from several threads (the API)


_frozen = False  # the permanent generation holds what `gc_paused` froze (and nothing else)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the checker builds; what it built is frozen.

    The instance, the graph and the symbolic memory are hundreds of thousands of small
    lists, tuples and dataclasses, none of them garbage; each allocation burst triggers
    collections that scan all of them again, and re-enabling collection only defers
    that: the first collection after it scans everything built during the pause (with
    the pause, a third of a 20k-op ring's lint was still collections, and as much again
    at exit).  So on leaving the outermost pause the objects alive are moved to the
    permanent generation (`gc.freeze`): reference counting still frees them, only
    cycles among them wait for `gc_release()`, which `driver.check_protocol` calls when
    it is done.  Where the program froze objects of its own (a pre-fork server), the
    pause only pauses.
    """
    global _frozen
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if _frozen or gc.get_freeze_count() == 0:
                gc.freeze()
                _frozen = True
            gc.enable()


def gc_release() -> None:
    """Return what `gc_paused` froze to the collector (the oldest generation)."""
    global _frozen
    if _frozen:
        gc.unfreeze()
        _frozen = False


def forget() -> None:
    """Drop the cached analyses (`ccogen` drops them before it exits: collecting a
    large graph at interpreter exit took longer than freeing it)."""
    with _cache_lock:
        _cache.clear()


def analyse(instance: Instance, max_bytes: int | None = None) -> Analysis:
    """The analysis of `instance`, computed once for the most recent instances.

    Raises `LimitExceeded` when its clocks would need more than `max_bytes`.
    """
    with _cache_lock:
        found = _cache.get(id(instance))
    if found is not None and found.instance is instance:
        return found
    with gc_paused():
        result = Analysis(instance=instance, matching=match(instance), max_bytes=max_bytes)
    if max_bytes is not None:
        result.graph  # noqa: B018 -- over the limit: raise here, as documented
    with _cache_lock:
        while len(_cache) >= _RECENT:
            _cache.pop(next(iter(_cache)))
        _cache[id(instance)] = result
    return result


__all__ = ["Analysis", "Conflict", "ConflictKind", "ExpectedValues", "HBGraph", "Matching",
           "analyse", "forget", "gc_paused", "gc_release"]
