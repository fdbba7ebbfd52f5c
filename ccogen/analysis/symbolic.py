"""Symbolic execution with provenance: which initial bytes every byte of every window holds.

The state of a `(rank, window)` is an interval map of segments; a segment says that
its bytes hold consecutive bytes of the initial state, starting at `(rank, window,
offset)`, and which op wrote them last (None: never written).  Copies and transfers
are applied in a topological order of the happens-before graph: a transfer takes
its source bytes at its `read` event and writes them at its `land` event, a copy at
its `issue`.  The result is meaningful only when the order of conflicting accesses
is fixed (no race, no deadlock): the checks skip it otherwise.

A `reduce` writes combinations (language v2): a segment of its destination holds a
`Combo` — the reduce op and, per source in list order, its weight and the piece
the source held (itself perhaps a combination).  `normal(piece)` forgets the order
and nesting of sums (a sum of sums is one sum; equal terms add their weights): two
pieces with the same normal form hold the same value up to rounding.  `shape(piece)`
keeps them: two ranks that compute the same normal form in different shapes differ
in the last bits (W108).  `Memory.reduced` records every combination a `reduce`
wrote, for W108.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from ccogen.analysis.events import EventKind
from ccogen.analysis.hb_graph import HBGraph
from ccogen.ir import rounding
from ccogen.ir.dtype import DType
from ccogen.ir.instance import CheckInst, Instance, OpInst, ReductionInst, RegionInst
from ccogen.ir.nodes import ReduceOp
from ccogen.ir.opkind import OpKind
from ccogen.ir.postcondition import check_regions, input_windows


@dataclass(frozen=True, slots=True)
class Combo:
    """What a `reduce` wrote: `op` over `terms` (weight, the piece a source held), in order,
    stored as `dtype`.  `sources`: each term's element type where some differs from
    `dtype` (a converting `reduce`; empty: all are `dtype`)."""

    op: ReduceOp
    dtype: DType
    terms: tuple[tuple[int | float, Piece], ...]
    sources: tuple[DType, ...] = ()
    by: OpInst | None = field(default=None, compare=False)  # the `reduce` that computed it

    def source_dtypes(self) -> tuple[DType, ...]:
        return self.sources or (self.dtype,) * len(self.terms)


@dataclass(frozen=True, slots=True)
class Piece:
    """`length` bytes holding the initial bytes `window@rank[offset : offset+length]`,
    or (`combo` set) the combination of the pieces of `combo.terms`."""

    length: int
    rank: int
    window: str
    offset: int
    writer: OpInst | None = None
    combo: Combo | None = None

    def origin(self) -> RegionInst:
        return RegionInst(self.window, self.offset, self.offset + self.length, self.rank)

    def cut(self, skip: int, length: int) -> Piece:
        if not skip and length == self.length:
            return self  # (pieces are immutable: the whole piece is itself)
        combo = self.combo
        if combo is not None and (skip or length != self.length):
            if combo.sources:  # a term's bytes per byte of the result: its width over dst's
                size = combo.dtype.size
                combo = Combo(combo.op, combo.dtype, tuple(
                    (w, t.cut(skip * d.size // size, length * d.size // size))
                    for (w, t), d in zip(combo.terms, combo.sources, strict=True)),
                    combo.sources, combo.by)
            else:
                combo = Combo(combo.op, combo.dtype,
                              tuple((w, t.cut(skip, length)) for w, t in combo.terms),
                              by=combo.by)
        return Piece(length, self.rank, self.window, self.offset + skip, self.writer, combo)


@dataclass(slots=True)
class _Window:
    """One window of one rank: segment starts and, per segment, its stop and piece."""

    starts: list[int]
    pieces: list[Piece]

    @staticmethod
    def initial(rank: int, window: str, size: int) -> _Window:
        return _Window([0], [Piece(size, rank, window, 0)])

    def _split(self, x: int) -> int:
        """Make `x` a segment boundary; return the index of the segment starting at `x`."""
        i = bisect.bisect_right(self.starts, x) - 1
        if i < 0:
            return 0
        start, piece = self.starts[i], self.pieces[i]
        if start == x:
            return i
        if x >= start + piece.length:
            return i + 1
        self.pieces[i] = piece.cut(0, x - start)
        self.starts.insert(i + 1, x)
        self.pieces.insert(i + 1, piece.cut(x - start, start + piece.length - x))
        return i + 1

    def read(self, start: int, stop: int) -> list[Piece]:
        starts, pieces = self.starts, self.pieces
        i = max(0, bisect.bisect_right(starts, start) - 1)
        out = []
        n = len(starts)
        while i < n:
            s = starts[i]
            if s >= stop:
                break
            p = pieces[i]
            end = s + p.length
            lo = s if s > start else start
            hi = end if end < stop else stop
            if lo < hi:
                out.append(p.cut(lo - s, hi - lo))
            i += 1
        return out

    def write(self, start: int, pieces: list[Piece], writer: OpInst | None) -> None:
        stop = start + (pieces[0].length if len(pieces) == 1 else sum(p.length for p in pieces))
        i, j = self._split(start), self._split(stop)
        starts, new = [], []
        at = start
        for p in pieces:
            starts.append(at)
            new.append(p if p.writer is writer else
                       Piece(p.length, p.rank, p.window, p.offset, writer, p.combo))
            at += p.length
        self.starts[i:j] = starts
        self.pieces[i:j] = new


@dataclass
class Memory:
    """The symbolic memory of every rank (windows are created on first touch).

    `seen[(launch, region)]`: what the caller of `region.rank` read there when that
    launch ended, for every region a postcondition reads.
    """

    instance: Instance
    windows: dict[tuple[int, str], _Window] = field(default_factory=dict)
    seen: dict[tuple[int, RegionInst], list[Piece]] = field(default_factory=dict)
    reduced: list[tuple[OpInst, Piece]] = field(default_factory=list)  # what reduces wrote
    rounds: bool | None = None  # some `reduce` writes f16/bf16 (`rounds_anywhere`), once known

    def _window(self, rank: int, window: str) -> _Window:
        key = (rank, window)
        w = self.windows.get(key)
        if w is None:
            w = self.windows[key] = _Window.initial(rank, window,
                                                    self.instance.window_size(window))
        return w

    def read(self, r: RegionInst) -> list[Piece]:
        w = self.windows.get((r.rank, r.window))
        return (w or self._window(r.rank, r.window)).read(r.start, r.stop)

    def write(self, r: RegionInst, pieces: list[Piece], writer: OpInst | None) -> None:
        w = self.windows.get((r.rank, r.window))
        (w or self._window(r.rank, r.window)).write(r.start, pieces, writer)


def initial(r: RegionInst) -> list[Piece]:
    return [Piece(r.size, r.rank, r.window, r.start)]


_ENDS = frozenset({EventKind.BOUNDARY, EventKind.END})


def execute(graph: HBGraph) -> Memory:
    """Apply every copy and transfer in topological order; return the final memory.

    At the end of each launch of a rank its caller reads the regions postconditions
    read (`Memory.seen`) and, when another launch follows, writes its inputs: they
    hold their initial bytes again (the next launch's `init`).
    """
    inst = graph.instance
    mem = Memory(inst)
    taken: dict[tuple[int, int], list[Piece]] = {}
    outputs = _outputs(inst)
    inputs = input_windows(inst)
    kinds = graph.kinds
    ranks, indices = graph.event_places  # `graph.op(e)`, inlined: one lookup per event
    ops = inst.ranks
    seen = mem.seen
    ISSUE, READ, LAND = EventKind.ISSUE, EventKind.READ, EventKind.LAND
    at_issue = (OpKind.REDUCE, OpKind.COPY)
    for e in graph.order:
        kind = kinds[e]
        if kind is ISSUE:  # (most events: the issue of an op that moves nothing then)
            at, i = ranks[e], indices[e]
            op = ops[at][i] if at >= 0 and i >= 0 else None
            if op is None or op.kind not in at_issue:
                continue
            if op.kind is OpKind.REDUCE:
                _reduce(mem, op)
            elif op.src is not None and op.dst is not None:
                mem.write(op.dst, mem.read(op.src), op)
            continue
        if kind is READ or kind is LAND:
            at, i = ranks[e], indices[e]
            op = ops[at][i] if at >= 0 and i >= 0 else None
            if op is None or op.src is None or op.dst is None:
                continue
            if kind is READ:
                taken[(op.rank, op.index)] = mem.read(op.src)
            else:
                mem.write(op.dst, taken.pop((op.rank, op.index)), op)
            continue
        if kind in _ENDS:
            ev = graph.event_at(e)
            launch = inst.launches - 1 if kind is EventKind.END else -1 - ev.op
            for r in outputs.get(ev.rank, ()):
                seen[(launch, r)] = mem.read(r)
            if kind is EventKind.BOUNDARY:
                for rank, window in inputs:
                    if rank == ev.rank:
                        whole = RegionInst(window, 0, inst.window_size(window), rank)
                        mem.write(whole, initial(whole), None)
    return mem


def _outputs(instance: Instance) -> dict[int, list[RegionInst]]:
    """Per rank, the regions of it that postconditions read (not through `init`)."""
    out: dict[int, list[RegionInst]] = {}
    seen: set[RegionInst] = set()  # membership in O(1): MoE instances have ~10^5 regions
    for c in [c for i in (instance, *instance.rotation) for c in i.checks]:  # `launch % K`
        for r, init in check_regions(c):
            if not init and r not in seen:
                seen.add(r)
                out.setdefault(r.rank, []).append(r)
    return out


def _reduce(mem: Memory, op: OpInst) -> None:
    assert op.dst is not None and op.reduce_op is not None and op.dtype is not None
    weights = op.weights or (1,) * len(op.srcs)
    src_dtypes = tuple(mem.instance.dtype(s.window) for s in op.srcs)
    pieces = combine(op.reduce_op, op.dtype, [mem.read(s) for s in op.srcs], weights, op,
                     src_dtypes if any(d is not op.dtype for d in src_dtypes) else ())
    mem.reduced.extend((op, p) for p in pieces)
    mem.write(op.dst, pieces, op)


def combine(op: ReduceOp, dtype: DType, sources: Sequence[list[Piece]],
            weights: Sequence[int | float], writer: OpInst | None,
            src_dtypes: tuple[DType, ...] = ()) -> list[Piece]:
    """Pieces of the element-wise combination of `sources` (pieces of equal total length;
    with `src_dtypes`, of as many elements of those types)."""
    if src_dtypes:
        return _combine_converting(op, dtype, sources, weights, writer, src_dtypes)
    out: list[Piece] = []
    idx = [0] * len(sources)
    off = [0] * len(sources)
    total = sum(p.length for p in sources[0]) if sources else 0
    done = 0
    while done < total:
        n = min(src[i].length - o for src, i, o in zip(sources, idx, off, strict=True))
        terms = tuple((w, src[i].cut(o, n))
                      for w, src, i, o in zip(weights, sources, idx, off, strict=True))
        out.append(Piece(n, -1, "", 0, writer, Combo(op, dtype, terms, by=writer)))
        done += n
        for k, src in enumerate(sources):
            off[k] += n
            if off[k] == src[idx[k]].length:
                idx[k], off[k] = idx[k] + 1, 0
    return out


def _combine_converting(op: ReduceOp, dtype: DType, sources: Sequence[list[Piece]],
                        weights: Sequence[int | float], writer: OpInst | None,
                        src_dtypes: tuple[DType, ...]) -> list[Piece]:
    """`combine` of sources whose element types differ from `dtype`: walks elements."""
    out: list[Piece] = []
    widths = [d.size for d in src_dtypes]
    idx = [0] * len(sources)
    off = [0] * len(sources)
    total = sum(p.length for p in sources[0]) // widths[0] if sources else 0
    done = 0
    while done < total:
        n = max(1, min((src[i].length - o) // w
                       for src, i, o, w in zip(sources, idx, off, widths, strict=True)))
        terms = tuple((wt, src[i].cut(o, n * w)) for wt, src, i, o, w
                      in zip(weights, sources, idx, off, widths, strict=True))
        out.append(Piece(n * dtype.size, -1, "", 0, writer,
                         Combo(op, dtype, terms, src_dtypes, writer)))
        done += n
        for k, src in enumerate(sources):
            off[k] += n * widths[k]
            if off[k] >= src[idx[k]].length:
                idx[k], off[k] = idx[k] + 1, 0
    return out


# ============================================================================= roundings


@dataclass(frozen=True, slots=True)
class Roundings:
    """The most roundings to f16/bf16 along a path from the inputs to a piece's value
    (`ir.rounding`): how many, to which types, and the `reduce`s that rounded, first
    to last, on one such path."""

    count: int = 0
    types: int = 0
    chain: tuple[OpInst, ...] = ()


def roundings(p: Piece) -> Roundings:
    """How often the value `p` holds was rounded to f16/bf16 (see `Roundings`)."""
    c = p.combo
    if c is None:
        return Roundings()
    below = [roundings(t) for _, t in c.terms]
    worst = max(below, key=lambda r: r.count)
    types = 0
    for r in below:
        types |= r.types
    if rounding.rounds(c.op, c.dtype, c.source_dtypes(), [w for w, _ in c.terms]):
        chain = worst.chain + ((c.by,) if c.by is not None else ())
        return Roundings(worst.count + 1, types | rounding.type_bit(c.dtype), chain)
    return Roundings(worst.count, types, worst.chain)


def rounds_anywhere(instance: Instance) -> bool:
    """Whether some `reduce` of the instance writes an f16/bf16 region (else no value is
    ever rounded to one and `evaluate` counts nothing)."""
    return any(op.kind is OpKind.REDUCE and op.dtype is not None and
               rounding.type_bit(op.dtype) for ops in instance.ranks for op in ops)


# ============================================================================= normal forms


def leaf_key(p: Piece) -> Hashable:
    return (p.rank, p.window, p.offset)


def flatten(p: Piece, op: ReduceOp, weight: int | float, into: dict[Hashable, int | float],
            leaves: dict[Hashable, Piece]) -> None:
    """Add `weight` times `p`'s terms of `op` to `into` (sums of sums are one sum)."""
    c = p.combo
    if c is not None and c.op is op:
        for w, t in c.terms:
            flatten(t, op, weight * w, into, leaves)
        return
    key = normal(p)
    into[key] = into.get(key, 0) + weight
    leaves.setdefault(key, p)


def terms_of(p: Piece) -> tuple[ReduceOp | None, dict[Hashable, int | float],
                                dict[Hashable, Piece]]:
    """The contributions of `p`: (its op, weight per normal term, a piece per term)."""
    into: dict[Hashable, int | float] = {}
    leaves: dict[Hashable, Piece] = {}
    if p.combo is None:
        into[leaf_key(p)] = 1
        leaves[leaf_key(p)] = p
        return None, into, leaves
    flatten(p, p.combo.op, 1, into, leaves)
    return p.combo.op, into, leaves


def normal(p: Piece) -> Hashable:
    """What `p` holds, up to the order and nesting of its combinations."""
    if p.combo is None:
        return leaf_key(p)
    op, into, _ = terms_of(p)
    if len(into) == 1:
        (key, w), = into.items()
        if w == 1:
            return key  # the combination of one term is the term
    return (op, frozenset(into.items()))


def shape(p: Piece) -> Hashable:
    """What `p` holds and in which order it was combined (`a + b` and `b + a` are one
    shape: the first step of a combination commutes; `(a + b) + c` and `(a + c) + b`
    are two)."""
    if p.combo is None:
        return leaf_key(p)
    terms = [(w, shape(t)) for w, t in p.combo.terms]
    return (p.combo.op, frozenset(Counter(terms[:2]).items()), tuple(terms[2:]))


# ============================================================================= postconditions


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Bytes `[start, stop)` of the check's left region differ: `got` vs `want` provenance.

    For a failing `!=` (`equal` True) the two sides hold the same bytes and `got`
    is the first piece of both.  Where a combination is involved, `missing` and
    `extra` are the contributions the bytes lack and hold too many times (a piece
    and the weight by which it is off).
    """

    check: CheckInst
    start: int
    stop: int
    got: Piece
    want: Piece
    equal: bool = False
    missing: tuple[tuple[Piece, int | float], ...] = ()
    extra: tuple[tuple[Piece, int | float], ...] = ()
    rounded: Roundings | None = None  # the contributions are right, rounded too often


def side(mem: Memory, r: RegionInst, init: bool, launch: int | None = None) -> list[Piece]:
    """A postcondition's side: the initial bytes, what the caller read after `launch`,
    or (None) the memory as it is."""
    if init:
        return initial(r)
    if launch is not None:
        seen = mem.seen.get((launch, r))
        if seen is not None:
            return seen
    return mem.read(r)


def expected(mem: Memory, r: ReductionInst, launch: int | None = None) -> list[Piece]:
    """The pieces a reduction in `ensure` states (after `launch`, as `side`)."""
    sources = [side(mem, t, init, launch) for t, init in zip(r.terms, r.init, strict=True)]
    return combine(r.op, r.dtype, sources, r.weights or (1,) * len(sources), None)


def evaluate(mem: Memory, check: CheckInst, launch: int | None = None) -> Mismatch | None:
    """Why `check` fails after `launch` (None: on the memory as it is), or None when it
    holds."""
    left = side(mem, check.left, check.left_init, launch)
    if check.reduction is not None:
        right = expected(mem, check.reduction, launch)
    else:
        assert check.right is not None
        right = side(mem, check.right, check.right_init, launch)
    diff = first_difference(left, right)
    if check.op == "!=":
        if diff is not None or not left:
            return None
        return Mismatch(check, check.left.start, check.left.stop, left[0], left[0], equal=True)
    if diff is None:
        return _rounded_too_often(mem, check, left)
    pos, got, want = diff
    start = check.left.start + pos
    missing, extra = contributions(got, want)
    return Mismatch(check, start, start + got.length, got, want, missing=missing, extra=extra)


def _rounded_too_often(mem: Memory, check: CheckInst, left: list[Piece]) -> Mismatch | None:
    """A float sum whose left side was rounded to f16/bf16 more often than `ensure`
    allows (`ir.rounding.allowed`), at its first such piece."""
    r = check.reduction
    if r is None or r.op is not ReduceOp.SUM or not r.dtype.is_float:
        return None
    if mem.rounds is None:
        mem.rounds = rounds_anywhere(mem.instance)
    if not mem.rounds:
        return None
    pos = 0
    for p in left:
        found = roundings(p)
        if not rounding.allowed(found.count, found.types, r.dtype):
            start = check.left.start + pos
            return Mismatch(check, start, start + p.length, p, p, rounded=found)
        pos += p.length
    return None


def contributions(got: Piece, want: Piece) -> tuple[tuple[tuple[Piece, int | float], ...],
                                                    tuple[tuple[Piece, int | float], ...]]:
    """(missing, extra) contributions of `got` against `want`, when either combines."""
    if got.combo is None and want.combo is None:
        return (), ()
    _, have, have_pieces = terms_of(got)
    _, need, need_pieces = terms_of(want)
    missing = tuple((need_pieces[k], w - have.get(k, 0)) for k, w in need.items()
                    if w > have.get(k, 0))
    extra = tuple((have_pieces[k], w - need.get(k, 0)) for k, w in have.items()
                  if w > need.get(k, 0))
    return missing, extra


def first_difference(left: list[Piece], right: list[Piece]) -> tuple[int, Piece, Piece] | None:
    """Offset and the two differing pieces (cut to the same length) of the first difference."""
    i = j = 0
    ioff = joff = pos = 0
    while i < len(left) and j < len(right):
        a, b = left[i], right[j]
        n = min(a.length - ioff, b.length - joff)
        pa, pb = a.cut(ioff, n), b.cut(joff, n)
        if pa is pb:
            pass  # (the same piece: the same bytes)
        elif (pa.combo is None and pb.combo is None and
                (pa.rank, pa.window, pa.offset) != (pb.rank, pb.window, pb.offset)) or \
                ((pa.combo is not None or pb.combo is not None) and normal(pa) != normal(pb)):
            return pos, pa, pb
        pos, ioff, joff = pos + n, ioff + n, joff + n
        if ioff == a.length:
            i, ioff = i + 1, 0
        if joff == b.length:
            j, joff = j + 1, 0
    return None


__all__ = [
    "Combo",
    "Memory",
    "Mismatch",
    "Piece",
    "Roundings",
    "combine",
    "contributions",
    "evaluate",
    "execute",
    "first_difference",
    "initial",
    "normal",
    "roundings",
    "shape",
    "terms_of",
]
