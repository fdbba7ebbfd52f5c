"""Race detection on the synchronisation order (vector clocks, FastTrack style).

Every process (issuer, engine queue, host) has a vector clock.  Only what the
device APIs guarantee orders two events:

* program order of an issuer, and the order of steps of one queue (FIFO);
* program order across issuers: an issuer block forks after what precedes it and
  joins before what follows it (`OpInst.preds` on another issuer);
* a post (and, for aggregate ops, the ring) before the transfer's first step;
* `fence()`: the landing of the issuer's transfers before it before the first write
  of its transfers after it;
* a signal or counted add before a wait that needed it: increments from one queue
  land in order, so the wait joins the one that reached its expected value; a slot
  or counter that several queues feed joins every increment that had landed;
* the last source read of a transfer before a `quiet` that saw it consumed;
* every arrival at a barrier before every departure from it;
* the end of every issuer of a rank's launch before that rank's host step (its
  caller between two launches), and that step before the rank's next launch; with
  `between_launches: host_sync`, every rank's host step before any next launch.
  Hosts do *not* wait for engines.

Each memory access is recorded as `Access` on its `(rank, window)`.  Two accesses
of overlapping bytes, at least one a write, race when the earlier one is not
ordered before the later one (its clock is ahead of what the later one knows).
That finds a race whatever the interleaving of the schedule that exposed it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ccogen.ir.instance import RegionInst
from ccogen.sim.state import WindowKey

Clock = np.ndarray
_WRITES = frozenset(("dst", "copy-w", "count", "reset", "queue-w", "input", "caller"))


@dataclass(frozen=True, slots=True)
class Who:
    """What made an access: `role` is copy-r / copy-w (a `copy` or a `reduce`) / src /
    dst, or ensure / input (a rank's caller reading its outputs / writing its inputs
    between launches) / caller (the caller refilling a local buffer before a launch),
    or count / reset on a counter (`state.counter_cell`), or queue-r / queue-w on an
    engine queue's reservation (`queues.queue_cell`: plain posts / batches and commits)."""

    role: str
    rank: int
    op: int  # op index on `rank`; -1 for ensure/init
    epoch: int
    region: RegionInst  # the whole region the op reads or writes (accesses may be pieces)
    xid: int = -1  # the transfer, for src/dst
    check: int = -1  # the postcondition, for ensure

    @property
    def write(self) -> bool:
        return self.role in _WRITES


@dataclass(frozen=True, slots=True)
class Access:
    window: WindowKey
    start: int
    stop: int
    proc: int
    clock: int
    vc: Clock
    who: Who


class HB:
    """The vector clocks (arrays are never mutated in place, so copies can share them)."""

    __slots__ = ("barrier", "consumed", "counter", "done", "fin_vc", "finish", "host", "land",
                 "post", "ring", "slot", "vc")

    def __init__(self, nprocs: int, steps: int | None = None) -> None:
        # a component counts one process's steps: 32 bits when at most `steps` are taken
        # (the `sim-steps` budget), which halves the clocks every step and access keeps
        wide = steps is None or steps >= 2**31 - 1
        zero = np.zeros(nprocs, dtype=np.int64 if wide else np.int32)
        self.vc: list[Clock] = [zero] * nprocs
        self.post: dict[int, Clock] = {}
        self.ring: dict[int, Clock] = {}
        self.finish: dict[int, int] = {}
        self.fin_vc: dict[int, Clock] = {}
        self.slot: dict[object, Clock] = {}
        self.counter: dict[object, Clock] = {}
        self.consumed: dict[int, Clock] = {}
        self.barrier: dict[tuple[int, int, int], Clock] = {}  # (launch, kernel, generation)
        self.done: dict[tuple[int, int], Clock] = {}  # (rank, op) -> clock at its completion
        self.land: dict[int, Clock] = {}  # a fenced-on transfer's clock when its last byte landed
        self.host: dict[tuple[int, int], Clock] = {}  # (rank, launch) -> its end step

    def copy(self) -> HB:
        other = HB.__new__(HB)
        other.vc = list(self.vc)
        other.post, other.ring, other.finish = dict(self.post), dict(self.ring), dict(self.finish)
        other.fin_vc = dict(self.fin_vc)
        other.slot, other.counter = dict(self.slot), dict(self.counter)
        other.consumed, other.barrier = dict(self.consumed), dict(self.barrier)
        other.done, other.land = dict(self.done), dict(self.land)
        other.host = dict(self.host)
        return other

    def tick(self, proc: int, *joins: Clock | None) -> Clock:
        """Advance `proc` by one step after joining `joins`; return its new clock."""
        vc = self.vc[proc]
        for other in joins:
            if other is not None:
                vc = np.maximum(vc, other)
        vc = vc.copy() if vc is self.vc[proc] else vc
        vc[proc] += 1
        self.vc[proc] = vc
        return vc

    def absorb(self, proc: int, other: Clock | None) -> None:
        """Let `proc` know everything `other` knows (no step of its own)."""
        if other is not None:
            self.vc[proc] = np.maximum(self.vc[proc], other)

    @staticmethod
    def merge(into: Clock | None, vc: Clock) -> Clock:
        return vc if into is None else np.maximum(into, vc)


class _Spans:
    """The accesses of one window, and an index of them by byte range.

    Accesses are kept in the order they were made (`records`); the index files each
    one, by its position there, under its length class (`stop - start` of bit length
    k: shorter than 2**k) and whether it writes, in start order, so the accesses that
    may overlap `[s, e)` are those of each class with a start in `(s - 2**k, e)`: a
    bisection per class, not a scan of every earlier access (which made a long run
    quadratic).  A read races only with writes: it looks up the writing classes alone
    (the many loads of a routing table do not look at one another).
    """

    __slots__ = ("classes", "records")

    def __init__(self, records: list[Access] | None = None) -> None:
        self.records: list[Access] = []
        # (k, writes) -> starts, positions
        self.classes: dict[tuple[int, bool], tuple[list[int], list[int]]] = {}
        for r in records or ():
            self.add(r)

    def __iter__(self) -> Iterator[Access]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def copy(self) -> _Spans:
        other = _Spans.__new__(_Spans)
        other.records = list(self.records)
        other.classes = {k: (list(a), list(b)) for k, (a, b) in self.classes.items()}
        return other

    def add(self, r: Access) -> None:
        k = (max(r.stop - r.start, 0).bit_length(), r.who.write)
        found = self.classes.get(k)
        if found is None:
            found = self.classes[k] = ([], [])
        starts, positions = found
        i = bisect.bisect_right(starts, r.start)
        starts.insert(i, r.start)
        positions.insert(i, len(self.records))
        self.records.append(r)

    def overlapping(self, start: int, stop: int, writes: bool = False) -> list[Access]:
        """The accesses with `rec.start < stop and start < rec.stop`, in the order made
        (`writes`: only those that write)."""
        hits: list[int] = []
        for (k, write), (starts, positions) in self.classes.items():
            if writes and not write:
                continue
            lo = bisect.bisect_right(starts, start - (1 << k))
            hi = bisect.bisect_left(starts, stop, lo)
            if lo < hi:
                hits += positions[lo:hi]
        if len(hits) > 1:
            hits.sort()
        records = self.records
        return [rec for i in hits if (rec := records[i]).start < stop and start < rec.stop]


class RaceLog:
    """Accesses per window and the races found between them."""

    __slots__ = ("owned", "records", "reported")

    def __init__(self) -> None:
        self.records: dict[WindowKey, _Spans] = {}
        self.reported: set[tuple[object, ...]] = set()
        # the windows whose `_Spans` only this log holds; the others it shares with the
        # copies made of it (copy on write: a clone in exploration copies only the
        # windows its next steps access, not every window's history)
        self.owned: set[WindowKey] = set()

    def copy(self) -> RaceLog:
        other = RaceLog.__new__(RaceLog)
        other.records = dict(self.records)
        other.reported = set(self.reported)
        other.owned = set()
        self.owned = set()  # shared with `other` from now on
        return other

    def _spans(self, window: WindowKey) -> _Spans:
        """The window's accesses, this log's own (to add to)."""
        spans = self.records.get(window)
        if spans is None:
            spans = self.records[window] = _Spans()
        elif window not in self.owned:
            spans = self.records[window] = spans.copy()
        self.owned.add(window)
        return spans

    def access(self, new: Access) -> list[Access]:
        """Record `new`; return the earlier accesses it races with."""
        found: list[Access] = []
        spans = self._spans(new.window)
        write = new.who.write
        adds = new.who.role == "count"
        for rec in spans.overlapping(new.start, new.stop, writes=not write):
            if ((write or rec.who.write)
                    and not (adds and rec.who.role == "count")  # counted adds commute
                    and rec.clock > new.vc[rec.proc]):
                found.append(rec)
        spans.add(new)
        return found

    def first_report(self, key: tuple[object, ...]) -> bool:
        if key in self.reported:
            return False
        self.reported.add(key)
        return True

    def prune(self, host: Clock) -> None:
        """Drop accesses ordered before `host` (valid only when nothing is in flight)."""
        for key, spans in self.records.items():
            self.records[key] = _Spans([r for r in spans.records if r.clock > host[r.proc]])
        self.owned = set(self.records)
