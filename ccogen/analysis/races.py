"""Conflicting memory accesses: the facts behind E024, E025, E031 and E032.

Every access to window bytes is placed at one event of the happens-before graph:
a transfer reads its source at `read` and writes its destination at `land`; a copy
reads and writes at its `issue`; a postcondition reads the final state of a window
at the `end` of the rank that evaluates it (transfers may still be in flight after
the kernel ends, so only a wait on that rank orders their arrival).

Candidate pairs come from interval overlap per `(rank, window)`: accesses are
grouped by identical byte range, and a sweep over sorted ranges pairs groups that
overlap, so no all-pairs loop.  Writes to one range are sorted in topological order;
when that sequence is a chain (each write ordered before the next) a read is
checked against it with two binary searches.

A `Conflict` is one of:

- `write-write`: two writes of overlapping bytes with no order between them (E031);
- `read-before-arrival`: a read of bytes that a transfer or a copy writes, neither
  ordered before nor after the write (E032): a peer's `get` of my window and my
  `copy` into it race like two transfers;
- `other-queue`: the same, where the reading rank waits for a signal that the writer
  sent after the data but on another queue (E024);
- `source-reuse`: a transfer's source is written (by a transfer or a copy, on any
  rank) after the transfer was issued but not surely after it read its source (no
  quiet or local-signal wait between) (E025);
- `remote-read`: a `reduce` reads a peer's bytes (`x@p`) that an op of that peer
  (a `copy` or a `reduce`) writes, with no order between them (E031: the peer may
  overwrite them while they are read, or before).

A `reduce` reads each source and writes its destination at its `issue`, like a
copy; its sources may be on other ranks.

A `load(...)` is a read of the element it names, on the rank whose memory holds it
(a peer's for `load(x@p[i])`), at the `issue` of the next op its issuer runs (the
load runs after that op's predecessors and before it; nothing but program order
leads to an issue, so the two are ordered alike with every other event).  The
elements `ensure` reads as run-time values (`got[p]` in a bound) are its caller's
reads at the end of each launch, like the regions it compares.  A load is checked
like any read: before arrival (E032), another queue's signal (E024), a peer's load
unordered with an op of that peer writing the element (`remote-read`, E031).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from weakref import WeakKeyDictionary

from ccogen.analysis._hb_derive import prefix_len
from ccogen.analysis.events import EventKind
from ccogen.analysis.hb_graph import HBGraph
from ccogen.ir.instance import CheckInst, LoadInst, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.postcondition import check_regions, input_windows

MAX_PAIRWISE = 64


class ConflictKind(StrEnum):
    WRITE_WRITE = "write-write"
    READ_BEFORE_ARRIVAL = "read-before-arrival"
    OTHER_QUEUE = "other-queue"
    SOURCE_REUSE = "source-reuse"
    REMOTE_READ = "remote-read"


@dataclass(slots=True, unsafe_hash=True)
class Access:
    """Bytes `region` read or written at event `event` by `op`, or by the caller of
    `region.rank` at the end of launch `epoch`: reading an output (postcondition
    `check`), or writing an input (`check` None) for the next launch.

    Never changed once made (not `frozen` only because a frozen dataclass takes twice
    as long to make, and there is one per access: 120,000 in a 20k-op ring)."""

    region: RegionInst
    event: int
    issue: int
    op: OpInst | None
    check: CheckInst | None = None
    epoch: int = 0
    load: LoadInst | None = None  # a `load(...)` (of `op`'s issuer, or of the caller)

    @property
    def caller(self) -> bool:
        return self.op is None

    @property
    def launch(self) -> int:
        """The launch the access belongs to (a caller's: the one that just ended)."""
        return self.op.epoch if self.op is not None else self.epoch

    @property
    def by_transfer(self) -> bool:
        return self.op is not None and self.op.kind.traits.queued


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two accesses that may touch the same bytes in either order (see the module docstring).

    `first` is the read (or one write), `second` the write; `overlap` the shared bytes.
    For `other-queue`, `wait` is the reader's wait and `signal` the op whose signal it
    waits for.
    """

    kind: ConflictKind
    first: Access
    second: Access
    overlap: RegionInst
    wait: OpInst | None = None
    signal: OpInst | None = None


# ============================================================================= accesses


def accesses(graph: HBGraph) -> tuple[list[Access], list[Access]]:
    """Every read and every write of the instance that happens."""
    reads: list[Access] = []
    writes: list[Access] = []
    later_reads: list[Access] = []  # reduces' sources and loads, after every transfer's
    later_writes: list[Access] = []
    ids = graph.event_ids
    transfers = {k for k in OpKind if k.traits.transfer}
    reduces = {k for k in OpKind if k.traits.reduces}
    for op in graph.iter_ops():
        kind = op.kind
        if kind in transfers and op.src is not None and op.dst is not None:
            r, i = op.rank, op.index
            issue = ids[(EventKind.ISSUE, r, i)]
            reads.append(Access(op.src, ids.get((EventKind.READ, r, i), issue), issue, op))
            writes.append(Access(op.dst, ids.get((EventKind.LAND, r, i), issue), issue, op))
        if kind in reduces and op.dst is not None:
            issue = graph.issue(op.rank, op.index)
            later_reads += [Access(src, issue, issue, op) for src in op.srcs]
            later_writes.append(Access(op.dst, issue, issue, op))
        if op.loads:
            issue = graph.issue(op.rank, op.index)
            later_reads += [Access(x.region, issue, issue, op, load=x) for x in op.loads]
    reads += later_reads
    writes += later_writes
    inst = graph.instance
    for e in range(inst.launches):
        ends = [graph.launch_end(rank, e) for rank in range(inst.nranks)]
        for check in inst.checks_at(e):  # (`launch % K`: the regions of launch e)
            if check.reduction is None:  # (`check_regions`, without its list)
                if not check.left_init:
                    end = ends[check.left.rank]
                    reads.append(Access(check.left, end, end, None, check, e))
                if check.right is not None and not check.right_init:
                    end = ends[check.right.rank]
                    reads.append(Access(check.right, end, end, None, check, e))
            else:
                for region, init in check_regions(check):
                    if not init:
                        end = ends[region.rank]
                        reads.append(Access(region, end, end, None, check, e))
            for x in check.loads:
                if not x.init:
                    end = ends[check.rank]
                    reads.append(Access(x.region, end, end, None, check, e, load=x))
    for rank, window in sorted(input_windows(inst)):
        whole = RegionInst(window, 0, inst.window_size(window), rank)
        for e in range(inst.launches - 1):
            end = graph.launch_end(rank, e)
            writes.append(Access(whole, end, end, None, None, e))
    topo = graph.clock.topo
    return ([a for a in reads if topo[a.event] >= 0], [a for a in writes if topo[a.event] >= 0])


def remote(a: Access) -> bool:
    """A load of another rank's bytes by a `reduce` or a `load(x@p[i])`."""
    return a.op is not None and (a.op.kind.traits.reduces or a.load is not None) \
        and a.region.rank != a.op.rank


def _overlap(a: RegionInst, b: RegionInst) -> RegionInst:
    return RegionInst(a.window, max(a.start, b.start), min(a.stop, b.stop), a.rank)


# ============================================================================= overlap sweep


@dataclass(slots=True)
class _Group:
    """Accesses of one kind to one exact byte range, in topological order."""

    region: RegionInst
    items: list[Access]
    write: bool
    chain: bool | None = None  # each item ordered before the next (`_is_chain`, once)


def _groups(graph: HBGraph, accs: list[Access], write: bool) -> list[_Group]:
    by_range: dict[tuple[int, str, int, int], list[Access]] = {}
    for a in accs:
        r = a.region
        key = (r.rank, r.window, r.start, r.stop)
        found = by_range.get(key)
        if found is None:
            by_range[key] = [a]
        else:
            found.append(a)
    topo = graph.clock.topo

    def ordered(items: list[Access]) -> list[Access]:  # (`sorted`, stable; two: one compare)
        if len(items) == 1:
            return items
        if len(items) == 2:
            a, b = items
            return items if topo[a.event] <= topo[b.event] else [b, a]
        return sorted(items, key=lambda a: topo[a.event])

    return [_Group(items[0].region, ordered(items), write) for items in by_range.values()]


def overlapping(groups: list[_Group]) -> Iterator[tuple[_Group, _Group]]:
    """Pairs of groups on one (rank, window) whose ranges overlap (writes first in reads' pairs)."""
    by_place: dict[tuple[int, str], list[_Group]] = {}
    for g in groups:
        by_place.setdefault((g.region.rank, g.region.window), []).append(g)
    for place in by_place.values():
        yield from _sweep(sorted(place, key=lambda g: (g.region.start, g.region.stop)))


def _sweep(place: list[_Group]) -> Iterator[tuple[_Group, _Group]]:
    active: list[tuple[int, int, _Group]] = []
    for n, g in enumerate(place):
        while active and active[0][0] <= g.region.start:
            heapq.heappop(active)
        for _, _, other in active:
            if other.write or g.write:
                yield (other, g) if other.write else (g, other)
        heapq.heappush(active, (g.region.stop, n, g))


# ============================================================================= conflicts


def conflicts(graph: HBGraph) -> list[Conflict]:
    """Every conflict of the instance, in a deterministic order."""
    reads, writes = accesses(graph)
    wgroups = _groups(graph, writes, True)
    found: list[Conflict] = []
    for g in wgroups:
        found += _within(graph, g)
    for a, b in overlapping(wgroups + _groups(graph, reads, False)):
        if b.write:
            found += _between_writes(graph, a, b)
        else:
            found += _reads_against(graph, b, a)
    return found


def _within(graph: HBGraph, g: _Group) -> list[Conflict]:
    """Writes to one exact range: every adjacent pair in topological order must be ordered."""
    out = []
    for x, y in pairwise(g.items):
        if not graph.hb(x.event, y.event):
            out.append(Conflict(ConflictKind.WRITE_WRITE, x, y, g.region))
    return out


def _between_writes(graph: HBGraph, a: _Group, b: _Group) -> list[Conflict]:
    merged = sorted(a.items + b.items, key=lambda x: graph.topo(x.event))
    overlap = _overlap(a.region, b.region)
    for x, y in pairwise(merged):
        if x.region != y.region and not graph.hb(x.event, y.event):
            return [Conflict(ConflictKind.WRITE_WRITE, x, y, overlap)]
    return []


def _is_chain(graph: HBGraph, g: _Group) -> bool:
    if g.chain is None:
        hb = graph.clock.hb
        g.chain = all(hb(x.event, y.event) for x, y in pairwise(g.items))
    return g.chain


def _reads_against(graph: HBGraph, reads: _Group, writes: _Group) -> list[Conflict]:
    items = writes.items
    if not _is_chain(graph, writes):  # writes racing each other (E031): each read's first
        items = items[:MAX_PAIRWISE]  # conflict of every kind, not only the first one
        found: dict[tuple[int, ConflictKind], Conflict] = {}
        for r in reads.items:
            for w in items:
                c = _classify(graph, r, w)
                if c is not None:
                    found.setdefault((r.event, c.kind), c)
        return list(found.values())
    out = []
    for r in reads.items:
        found_ = _read_in_chain(graph, r, items)
        if found_:
            out += found_
    return out


def _read_in_chain(graph: HBGraph, r: Access, chain: list[Access]) -> list[Conflict]:
    """The read against a chain of writes: the writes neither before nor after it are a
    run `chain[k:j]`; the first is classified, and the last too when it belongs to
    another launch (a different mistake: the next launch overwriting, say)."""
    hb = graph.clock.hb
    event = r.event
    if len(chain) == 1:  # (the common case, without the searches)
        k = 1 if hb(chain[0].event, event) else 0
    else:
        k = prefix_len(chain, lambda w: hb(w.event, event))
    if k and r.issue != event and hb(r.issue, chain[k - 1].event):
        w = chain[k - 1]
        return [Conflict(ConflictKind.SOURCE_REUSE, r, w, _overlap(r.region, w.region))]
    if k == len(chain):
        return []
    first = _classify(graph, r, chain[k])
    out = [] if first is None else [first]
    if len(chain) - k < 2:
        return out  # (j - 1 > k needs two writes from k on)
    j = prefix_len(chain, lambda w: not hb(event, w.event))
    if j - 1 > k and chain[j - 1].launch != chain[k].launch:
        last = _classify(graph, r, chain[j - 1])
        if last is not None:
            out.append(last)
    return out


def _classify(graph: HBGraph, r: Access, w: Access) -> Conflict | None:
    """The conflict between read `r` and write `w`, if they are not safely ordered."""
    if w.op is r.op:  # one op reading what it writes, or the caller's read and write
        return None
    hb = graph.clock.hb
    reused = r.issue != r.event and hb(r.issue, w.event)
    if reused and not hb(r.event, w.event):
        return Conflict(ConflictKind.SOURCE_REUSE, r, w, _overlap(r.region, w.region))
    if hb(r.event, w.event) or hb(w.event, r.event):
        return None
    overlap = _overlap(r.region, w.region)
    if not w.by_transfer and remote(r) and w.op is not None:
        return Conflict(ConflictKind.REMOTE_READ, r, w, overlap)
    announced = _other_queue(graph, r, w)
    if announced is not None:
        wait, signal = announced
        return Conflict(ConflictKind.OTHER_QUEUE, r, w, overlap, wait, signal)
    return Conflict(ConflictKind.READ_BEFORE_ARRIVAL, r, w, overlap)


_WAITS: WeakKeyDictionary[HBGraph, dict[tuple[int, int], list[OpInst]]] = WeakKeyDictionary()


def _queued_waits(graph: HBGraph) -> dict[tuple[int, int], list[OpInst]]:
    """(rank, peer) -> the rank's `wait_signal`s on that peer with a queue, in program
    order; built once per graph (a scan of the rank's ops per read was quadratic)."""
    found = _WAITS.get(graph)
    if found is None:
        found = {}
        for rank, ops in enumerate(graph.instance.ranks):
            for op in ops:
                if op.kind is OpKind.WAIT_SIGNAL and op.queue is not None:
                    found.setdefault((rank, op.peer), []).append(op)  # type: ignore[arg-type]
        _WAITS[graph] = found
    return found


def _other_queue(graph: HBGraph, r: Access, w: Access) -> tuple[OpInst, OpInst] | None:
    """A wait before `r` on a signal that `w`'s issuer sent after `w`, on another queue."""
    put = w.op
    if put is None or put.kind is not OpKind.PUT or put.queue is None:
        return None
    reader = r.op.rank if r.op is not None else r.check.rank  # type: ignore[union-attr]
    m = graph.matching
    issue_put = graph.issue(put.rank, put.index)
    for op in _queued_waits(graph).get((reader, put.rank), ()):
        if op.queue is None or op.queue == put.queue:
            continue
        done = graph.done(reader, op.index)
        if not graph.hb(done, r.event):
            continue
        for inc in m.increments.get((reader, put.rank, op.queue), ()):
            sig = graph.signal_event(inc.sender, inc.first, inc.local)
            if (graph.hb(issue_put, graph.issue(inc.sender, inc.first))
                    and sig is not None and graph.hb(sig, done)):
                return op, graph.instance.ranks[inc.sender][inc.first]
    return None


__all__ = ["Access", "Conflict", "ConflictKind", "accesses", "conflicts", "overlapping",
           "remote"]
