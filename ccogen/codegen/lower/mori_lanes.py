"""mori-sdma lowering, the lanes of one wave in phases: call sites with lane tables.

Part of the pass `codegen.lower.mori`.  A phase holds every lane's k-th op; each posting
group of a phase is ONE thread-scope call site reached by exactly the group's lanes, with
per-lane arguments from a `switch (threadIdx.x)` table (`StmtKind.LANES`), so MORI groups
the lanes as the analysis counted them.  Non-blocking call sites come before blocking ones
(lanes of a wave have no independent progress).  `phases` is None where a posting group
spans two phases (the pass then runs the lanes one by one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ccogen.codegen.lower.mori_ops import OpLowering, Row, by_issuer, hw_thread, line_of
from ccogen.codegen.spell import hip
from ccogen.codegen.spell.hip import ALL_QUEUES, CTX, THREAD, field
from ccogen.codegen.steps import Stmt, StmtKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind


@dataclass(frozen=True, slots=True)
class LaneLowering(OpLowering):
    """`OpLowering`, and the phases of a wave's lanes (`phase`)."""

    def phase(self, ops: Sequence[OpInst]) -> list[Stmt]:
        """One phase of a wave's lanes: call sites, non-blocking before blocking."""
        texts = [self.comment(op).text for op in ops]
        out = [Stmt(StmtKind.COMMENT,
                    text=t if texts.count(t) == 1 else f"{t} ({texts.count(t)} lanes)")
               for t in dict.fromkeys(texts)]
        sites: dict[tuple[object, ...], list[OpInst]] = defaultdict(list)
        for op in ops:
            sites[_site_key(op)].append(op)
        ordered = sorted(sites.values(), key=lambda ms: (ms[0].kind.traits.blocking, ms[0].index))
        for members in ordered:
            out.extend(self.site(members))
        return out

    def site(self, ops: list[OpInst]) -> list[Stmt]:
        kind = ops[0].kind
        if kind.traits.queued:
            runtime = any(self.rt_transfer(o, field("n")) is not None for o in ops)
            fields = ("peer", "queue", "dst", "src", "bytes")
            return [self.lanes(ops, hip.sdma(kind), self.targs(ops[0], "thread"),
                               ("n", *fields) if runtime else fields,
                               self.transfer_row(runtime),
                               hip.transfer_args(field("peer"), field("dst"), field("src"),
                                                 field("bytes"), field("queue")))]
        if kind is OpKind.COMMIT:
            firsts = {(o.peer, o.queue): o for o in reversed(ops)}  # one lane per queue
            return [self.lanes(sorted(firsts.values(), key=lambda o: o.index), hip.sdma("commit"),
                               (THREAD,), ("peer", "queue"),
                               lambda o: (str(o.peer), str(o.queue)),
                               (field("peer"), field("queue")))]
        if kind is OpKind.QUIET:
            return self.lane_quiet(ops)
        if kind is OpKind.WAIT_SIGNAL:
            return [self.lane_wait(ops)]
        if kind is OpKind.WAIT_COUNT:
            raise Unsupported("`wait_count` inside `lanes` is not supported by `mori-sdma` (it "
                              "waits on several signal slots): wait from a warp or the block",
                              ops[0].span)
        if kind is OpKind.COPY:
            return [self.lanes(ops, hip.helper("copy", "thread"), (),
                               ("dst", "src", "bytes", "vec"), self.lane_copy_row,
                               (CTX, field("dst"), field("src"), field("bytes"),
                                field("vec")))]
        if kind is OpKind.FENCE:
            return [self.lanes(ops, hip.helper("fence", "system"), (), (), lambda o: (), ())]
        raise Unsupported(f"`{kind}` inside `lanes` is not supported by `mori-sdma`", ops[0].span)

    def transfer_row(self, runtime: bool) -> Row:
        """A lane's put/get arguments; with `runtime`, its length `a.n` first (every lane
        of the call site sets it, a static one to its size)."""
        def row(o: OpInst) -> tuple[str, ...]:
            assert o.dst is not None and o.src is not None
            rt = self.rt_transfer(o, field("n"))
            if rt is not None:
                return (self.rt_length(o), str(o.peer), str(o.queue), *rt)
            static = (str(o.peer), str(o.queue), hip.u64(self.off(o.dst)),
                      hip.u64(self.off(o.src)), hip.u64(o.dst.size))
            return (hip.i64(o.dst.size), *static) if runtime else static
        return row

    def lane_copy_row(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return self.copy_args(op)
        return (self.rt_start(op, op.dst), self.rt_start(op, op.src), self.rt_length(op),
                hip.aligned16(field("dst"), field("src"), field("bytes")))

    def lanes(self, ops: Sequence[OpInst], func: str, targs: tuple[str, ...],
              fields: tuple[str, ...], values: Row, args: tuple[str, ...],
              acquire: bool = False) -> Stmt:
        rows = tuple((hw_thread(o), tuple(zip(fields, values(o), strict=True))) for o in ops)
        return Stmt(StmtKind.LANES, func=func, targs=targs, args=args, rows=rows, acquire=acquire)

    def lane_quiet(self, ops: list[OpInst]) -> list[Stmt]:
        op = ops[0]
        if self.f.debug:  # see `quiet`
            line = str(line_of(op))
            bounded = hip.helper("quiet_bounded")
            if op.peer is None:
                return [self.lanes(ops, bounded, (THREAD,), (), lambda o: (),
                                   (CTX, str(p), ALL_QUEUES, line))
                        for p in self.peers(op.rank)]
            return [self.lanes(ops, bounded, (THREAD,), ("peer", "queue"),
                               lambda o: (str(o.peer),
                                          ALL_QUEUES if o.queue is None else str(o.queue)),
                               (CTX, field("peer"), field("queue"), line))]
        if op.peer is None:
            return [self.lanes(ops, hip.sdma("quiet"), (THREAD,), (), lambda o: (), (str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [self.lanes(ops, hip.sdma("quiet"), (THREAD,), ("peer",),
                               lambda o: (str(o.peer),), (field("peer"),))]
        return [self.lanes(ops, hip.sdma("quietQueue"), (THREAD,), ("peer", "queue"),
                           lambda o: (str(o.peer), str(o.queue)),
                           (field("peer"), field("queue")))]

    def lane_wait(self, ops: list[OpInst]) -> Stmt:
        def row(o: OpInst) -> tuple[str, ...]:
            base, total = self.expected(o)
            return str(o.peer), str(o.queue), hip.u64(base), hip.u64(total), str(line_of(o))

        func, args = self.wait_call(field("sender"), field("queue"),
                                    hip.expected(field("value"), field("per_epoch")),
                                    field("line"))
        return self.lanes(ops, func, (), ("sender", "queue", "value", "per_epoch", "line"), row,
                          args, acquire=True)


def _site_key(op: OpInst) -> tuple[object, ...]:
    if op.kind.traits.queued:
        return (op.kind, op.group)
    if op.kind is OpKind.QUIET:
        return (op.kind, op.peer is None, op.queue is None)
    return (op.kind,)


def phases(ops: Sequence[OpInst]) -> list[list[OpInst]] | None:
    """k-th op of every lane per phase, when every posting group lies in one phase."""
    lanes = list(by_issuer(ops).values())
    depth = max(len(lane) for lane in lanes)
    phases = [[lane[k] for lane in lanes if len(lane) > k] for k in range(depth)]
    where: dict[int, int] = {}
    for k, ph in enumerate(phases):
        for op in ph:
            if op.kind.traits.queued and where.setdefault(op.group, k) != k:
                return None
    return phases


__all__ = ["LaneLowering", "phases"]
