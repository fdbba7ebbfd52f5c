"""Lower one instance to per-rank, per-block step programs (target-independent).

The generated kernels are specialised for the instance: rank r's code is a function
per logical block, selected by `switch (rank)`.  Who executes what:

- Ops of a block leader run on the whole *CTA group* of the logical block (the
  backend picks how many CTAs cooperate, so large copies saturate NVLink): copies are
  split over every thread of the group, then a group sync, then the leader thread
  signals.  Blocking ops (waits) spin in the leader, then a group sync.
- A `lanes` block whose lanes run the same kinds of op in the same order is executed
  in *phases*: phase k does every lane's k-th op, copies cooperatively by the group,
  then one signal per posting subgroup — the lanes of one warp and one call site that
  target the same `(peer, queue)` signal once (MORI's grouping; `signal_per_copy`:
  once per lane).  Running every lane's k-th op before any lane's (k+1)-th is one of
  the schedules the checker proved correct, and a blocking op of a phase never waits
  for a later phase of its own rank.
- `warps` blocks, and `lanes` blocks whose lanes differ in shape, *fork*: each warp
  (or thread) runs its own sequence at warp (thread) scope, then the group joins.
- Aggregate puts move nothing until the `commit` of their `(peer, queue)`: their
  copies and signals are emitted at the commit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.ll import NONE, LLEntry, LLPlan
from ccogen.codegen.model import LOCAL, Branch, Segment, Step
from ccogen.codegen.reduce import VECTOR, reduction
from ccogen.errors import InternalError
from ccogen.ir.instance import Instance, IssuerLevel, OpInst
from ccogen.ir.opkind import OpKind
from ccogen.source import Span

Expected = Callable[[OpInst], tuple[int, int]]  # (value in epoch 0, added per epoch)

class Unsupported(Exception):
    """The instance needs something this lowering cannot express (a clear message)."""

    def __init__(self, message: str, span: Span | None) -> None:
        super().__init__(message)
        self.span = span


def op_comment(op: OpInst, source: str) -> Step:
    line = op.span.line if op.span is not None else 0
    return Step("comment", text=f"// {source}:{line}: {op.kind}", line=line)


@dataclass
class _Builder:
    """Accumulates the steps of one scope, numbering group syncs."""

    scope: str
    layout: HeapLayout
    expected: Expected
    source: str
    steps: list[Step] = field(default_factory=list)
    pending: dict[tuple[int, int], list[OpInst]] = field(default_factory=lambda: defaultdict(list))
    sync_count: list[int] = field(default_factory=lambda: [0])
    ll: LLPlan = NONE

    def sync(self) -> None:
        if self.steps and self.steps[-1].kind == "sync":
            return
        self.sync_count[0] += 1
        self.steps.append(Step("sync", seq=self.sync_count[0]))

    # ------------------------------------------------------------------ one phase
    def phase(self, ops: Sequence[OpInst]) -> None:
        """Ops that may run together: all of one kind class, one per lane (or one)."""
        for op in ops:
            self.steps.append(op_comment(op, self.source))
        kind = ops[0].kind
        if kind.traits.transfer:
            self.transfers([o for o in ops if not o.aggregate])
            for o in ops:
                if o.aggregate:
                    assert o.peer is not None and o.queue is not None
                    self.pending[(o.peer, o.queue)].append(o)
        elif kind is OpKind.COMMIT:
            batch = [p for o in ops for p in self.pending.pop((o.peer, o.queue), [])]  # type: ignore[arg-type]
            self.transfers(batch)
        elif kind is OpKind.SIGNAL:
            self.credits(ops)
        elif kind.traits.reduces:
            for o in ops:
                self.steps.append(self.reduce(o))
            self.sync()
        elif kind is OpKind.QUIET:
            self.steps.append(Step("quiet"))
        elif kind.traits.waits:
            for o in ops:
                entries = self.ll.wait(o)
                if entries is None:
                    self.steps.append(self.wait(o))
                else:
                    self.steps.extend(self.llwait(o, e) for e in entries)
            self.sync()
        elif kind is OpKind.BARRIER:
            self.steps.append(Step("barrier"))
        elif kind is OpKind.FENCE:
            self.steps.append(Step("fence"))
        elif kind is OpKind.RESET_COUNT:
            self.sync()
            for o in ops:
                assert o.counter is not None
                self.steps.append(Step("reset", off=self.layout.counter(o.counter).offset))
            self.sync()
        else:
            raise InternalError(f"unknown op kind {kind!r}")

    def transfers(self, ops: Sequence[OpInst]) -> None:
        regular = []
        for o in ops:
            ll = self.ll.put(o)
            if ll is None:
                regular.append(o)
                continue
            assert o.src is not None and o.dst is not None and o.peer is not None
            self.steps.append(Step(
                "llput", dst_peer=o.peer, off=ll.entry, value=ll.k, per_epoch=ll.per_epoch,
                src_off=self.layout.window(o.src.window).offset + o.src.start,
                nbytes=o.dst.size))
        ops = regular
        if not ops:
            return
        for o in ops:
            self.steps.append(self.copy(o))
        self.sync()
        self.steps.extend(self.signals(ops))

    def credits(self, ops: Sequence[OpInst]) -> None:
        """`signal(peer, queue=)`: it rings its `(peer, queue)` (aggregate puts posted
        there move first), then adds 1 on the peer's slot once the group's earlier stores
        are done — the slot and semantics of a put's remote signal on that queue."""
        batch = [p for o in ops for p in self.pending.pop((o.peer, o.queue), [])]  # type: ignore[arg-type]
        self.transfers(batch)
        self.sync()
        self.steps.extend(self.signals(ops))

    def reduce(self, o: OpInst) -> Step:
        (dst_peer, dst), spec = reduction(o, self.layout)
        return Step("reduce", dst_peer=dst_peer, dst_off=dst, nbytes=o.dst.size if o.dst else 0,
                    vec=spec.vector == VECTOR, reduction=spec,
                    line=o.span.line if o.span is not None else 0)

    def copy(self, o: OpInst) -> Step:
        assert o.dst is not None and o.src is not None
        dst_peer, dst = self.layout.address(o.dst, o.rank)
        src_peer, src = self.layout.address(o.src, o.rank)
        vec = dst % 16 == 0 and src % 16 == 0 and o.dst.size % 16 == 0
        return Step("copy", dst_peer=dst_peer, dst_off=dst, src_peer=src_peer, src_off=src,
                    nbytes=o.dst.size, vec=vec, peer=o.peer if o.peer is not None else LOCAL)

    def signals(self, ops: Sequence[OpInst]) -> list[Step]:
        out: list[Step] = []
        seen: set[tuple[object, ...]] = set()
        for o in ops:
            if o.kind is OpKind.COPY:
                continue
            assert o.peer is not None and o.queue is not None
            key = (o.group, o.peer, o.queue) if not o.signal_per_copy else (o.index,)
            if o.signal.remote and ("r", *key) not in seen:
                seen.add(("r", *key))
                out.append(Step("signal", peer=o.peer, off=self.layout.slot(o.rank, o.queue),
                                value=1))
            if o.signal.local and ("l", *key) not in seen:
                seen.add(("l", *key))
                out.append(Step("signal", peer=LOCAL, off=self.layout.slot(o.rank, o.queue),
                                value=1))
            if o.counter is not None and o.kind is OpKind.PUT:
                out.append(Step("signal", peer=o.peer, off=self.layout.counter(o.counter).offset,
                                value=o.dst.size if o.dst is not None else 0))
        return out

    def llwait(self, o: OpInst, e: LLEntry) -> Step:
        assert o.peer is not None and o.queue is not None
        return Step("llwait", off=e.entry, value=e.k, per_epoch=e.per_epoch, dst_off=e.dst_off,
                    nbytes=e.nbytes, line=o.span.line if o.span is not None else 0,
                    src=o.peer, queue=o.queue, wait_kind=1)

    def wait(self, o: OpInst) -> Step:
        value, per_epoch = self.expected(o)
        line = o.span.line if o.span is not None else 0
        if o.kind is OpKind.WAIT_SIGNAL:
            assert o.peer is not None and o.queue is not None
            return Step("wait", off=self.layout.slot(o.peer, o.queue), value=value,
                        per_epoch=per_epoch, line=line, src=o.peer, queue=o.queue, wait_kind=1)
        assert o.counter is not None
        return Step("wait", off=self.layout.counter(o.counter).offset, value=value,
                    per_epoch=per_epoch, line=line, wait_kind=2)


# ----------------------------------------------------------------------------- segments


def segments_of(ops: Sequence[OpInst]) -> list[list[OpInst]]:
    """Split one block's ops into sequential segments: block-level ops one by one, and
    each issuer-block execution (recognised by its fork: every issuer starts from the
    same predecessors) as one segment."""
    out: list[list[OpInst]] = []
    entry: tuple[int, ...] | None = None
    last: dict[object, int] = {}
    for op in ops:
        if op.issuer.level is IssuerLevel.BLOCK:
            out.append([op])
            entry = None
            continue
        who = op.issuer
        continues = entry is not None and (
            (who in last and op.preds == (last[who],)) or (who not in last and op.preds == entry))
        if not continues:
            out.append([])
            entry, last = op.preds, {}
        out[-1].append(op)
        last[who] = op.index
    return out


def _by_issuer(ops: Iterable[OpInst]) -> dict[object, list[OpInst]]:
    lanes: dict[object, list[OpInst]] = defaultdict(list)
    for op in ops:
        lanes[op.issuer].append(op)
    return lanes


def _kind_class(kind: OpKind) -> str:
    return "transfer" if kind.traits.transfer else kind


def phased(seg: Sequence[OpInst]) -> list[list[OpInst]] | None:
    """Phases of a lanes segment whose lanes run the same op classes in order, and only
    blocking ops after their first blocking op.  Then every lane's transfers are issued
    before any lane blocks, so running the lanes in phases cannot wait for a later phase
    of the same rank; any other lanes segment forks into per-thread code."""
    if any(o.issuer.level is not IssuerLevel.LANE or o.issuer.warp is not None for o in seg):
        return None
    lanes = list(_by_issuer(seg).values())
    shape = [_kind_class(o.kind) for o in lanes[0]]
    if any([_kind_class(o.kind) for o in lane] != shape for lane in lanes):
        return None
    blocked = [o.kind.traits.blocking for o in lanes[0]]
    if any(blocked[i] and not blocked[i + 1] for i in range(len(blocked) - 1)):
        return None
    return [[lane[k] for lane in lanes] for k in range(len(shape))]


def lower_block(ops: Sequence[OpInst], layout: HeapLayout, expected: Expected,
                source: str, ll: LLPlan = NONE) -> tuple[list[Segment], int]:
    """Segments of one logical block of one rank, and its number of group syncs."""
    count = [0]
    pending: dict[tuple[int, int], list[OpInst]] = defaultdict(list)
    segments: list[Segment] = []
    for seg in segments_of(ops):
        phases = [seg] if seg[0].issuer.level is IssuerLevel.BLOCK else phased(seg)
        if phases is not None:
            b = _Builder("group", layout, expected, source, pending=pending, sync_count=count,
                         ll=ll)
            for ph in phases:
                b.phase(ph)
            segments.append(Segment(steps=tuple(b.steps)))
            continue
        segments.append(_fork(seg, layout, expected, source, count, ll))
    if any(pending.values()):
        first = next(o for v in pending.values() for o in v)
        raise Unsupported("an aggregate put is never committed", first.span)
    return segments, count[0]


def _fork(seg: Sequence[OpInst], layout: HeapLayout, expected: Expected, source: str,
          count: list[int], ll: LLPlan = NONE) -> Segment:
    branches = []
    subgroup: dict[tuple[object, ...], int] = defaultdict(int)
    for op in seg:
        subgroup[(op.group, op.peer, op.queue)] += 1
    for ops in _by_issuer(seg).values():
        level = ops[0].issuer.level
        scope = "warp" if level is IssuerLevel.WARP else "thread"
        index = ops[0].issuer.warp if scope == "warp" else ops[0].issuer.lane
        b = _Builder(scope, layout, expected, source, ll=ll)
        for op in ops:
            if scope == "thread" and op.signal.remote and not op.signal_per_copy \
                    and subgroup[(op.group, op.peer, op.queue)] > 1:
                raise Unsupported("lanes that differ in shape and signal as one group are not "
                                  "supported by this backend yet", op.span)
            b.phase([op])
        assert index is not None
        branches.append(Branch(scope, index, tuple(b.steps)))
    count[0] += 1
    return Segment(branches=tuple(branches), join=Step("sync", seq=count[0]))


def block_ops(instance: Instance, kernel: int, rank: int) -> dict[int, list[OpInst]]:
    out: dict[int, list[OpInst]] = defaultdict(list)
    for op in instance.ranks[rank]:
        if op.kernel == kernel:
            out[op.issuer.block].append(op)
    return out
