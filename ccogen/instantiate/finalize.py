"""Finishing a rank: queues `auto` resolved, bad waits dropped (their successors
re-linked), posting groups numbered, `OpInst`s built."""

from __future__ import annotations

from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.instantiate.findings import Findings
from ccogen.instantiate.limits import MAX_AUTO_QUEUES
from ccogen.instantiate.unroll import Pending
from ccogen.ir import nodes as ir
from ccogen.ir.instance import OpInst


def auto_queue_count(ops: list[list[Pending]]) -> int:
    issuers: dict[tuple[int, int, int | None], set[tuple[int, int | None]]] = {}
    for rank, pending in enumerate(ops):
        for p in pending:
            if p.slot is not None and p.kind.traits.queued:
                key = (rank, p.kernel, p.peer)
                issuers.setdefault(key, set()).add((p.issuer.block, p.issuer.warp_of))
    most = max((len(s) for s in issuers.values()), default=1)
    return max(1, min(MAX_AUTO_QUEUES, most))


def finalize(rank: int, pending: list[Pending], queues: int, auto: bool,
              findings: Findings) -> tuple[OpInst, ...]:
    kept: list[tuple[Pending, tuple[int, ...], int | None]] = []
    remap: list[tuple[int, ...]] = []
    dropped = False
    for p in pending:
        preds = _remap(p.preds, remap) if dropped else p.preds
        if p.wait_default and queues != 1:
            findings.add(_wait_queue_error(p.op, queues, auto), rank)
            remap.append(preds)
            dropped = True
            continue
        queue = p.slot % queues if p.slot is not None else 0 if p.wait_default else p.queue
        remap.append((len(kept),))
        kept.append((p, preds, queue))
    group_of, sizes = _groups([p for p, _, _ in kept])
    statics: dict[int, tuple[Any, ...]] = {}
    return tuple(_op_inst(i, rank, p, preds, queue, group_of[i], sizes, statics)
                 for i, (p, preds, queue) in enumerate(kept))


def _remap(preds: tuple[int, ...], remap: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(j for i in preds for j in remap[i]))


def _wait_queue_error(op: ir.Op, queues: int, auto: bool) -> Diagnostic:
    notes = (f"`queues auto` chose {queues} queues",) if auto else ()
    return error("E002", f"`wait_signal` needs `queue=` when the protocol has {queues} queues",
                 op.span, f"the signal may come on any of {queues} queues", notes=notes,
                 help="add `queue=...`")


def _groups(pending: list[Pending]) -> tuple[list[int], list[int]]:
    ids: dict[object, int] = {}
    group_of: list[int] = []
    sizes: list[int] = []
    for p in pending:
        gid = None if p.group is None else ids.get(p.group)
        if gid is None:
            gid = len(sizes)
            sizes.append(0)
            if p.group is not None:
                ids[p.group] = gid
        sizes[gid] += 1
        group_of.append(gid)
    return group_of, sizes


def _static_fields(op: ir.Op) -> tuple[Any, ...]:
    signal = ir.SignalKind.REMOTE if isinstance(op, ir.Signal) else \
        getattr(op, "signal", ir.SignalKind.NONE)
    return (signal, getattr(op, "aggregate", False),
            getattr(op, "signal_per_copy", False), getattr(op, "mode", ir.Mode.AUTO),
            getattr(op, "count", None) or getattr(op, "counter", None))


def _op_inst(index: int, rank: int, p: Pending, preds: tuple[int, ...], queue: int | None,
             group: int, sizes: list[int], statics: dict[int, tuple[Any, ...]]) -> OpInst:
    op = p.op
    static = statics.get(id(op))
    if static is None:
        static = statics[id(op)] = _static_fields(op)
    signal, aggregate, per_copy, mode, counter = static
    return OpInst(index=index, rank=rank, kernel=p.kernel, kind=p.kind, issuer=p.issuer,
                  preds=preds, op=op, span=op.span, group=group, peer=p.peer, queue=queue,
                  dst=p.dst, src=p.src, signal=signal, aggregate=aggregate,
                  signal_per_copy=per_copy, mode=mode, counter=counter, expected=p.expected,
                  lanes_in_group=sizes[group], srcs=p.srcs, reduce_op=p.reduce_op,
                  weights=p.weights, dtype=p.dtype, expected_rt=p.expected_rt,
                  weights_rt=p.weights_rt, loads=p.loads, rt_peer=p.rt_peer,
                  **({} if p.where is None else _repeats(p)))


def _repeats(p: Pending) -> dict[str, Any]:
    """A sampled loop's second iteration stands for every iteration but the first and
    the last (`OpInst.repeat`), each one stride further (`sampling.Sampler.strides`)."""
    w = p.where
    assert w is not None
    trip = ((w.loop, w.site[1], w.site[4]), w.v, w.trips)  # loop, kernel, enclosing iterations
    if w.v != 1 or w.trips <= 3:
        return {"trip": trip}
    return {"repeat": w.trips - 2, "stride": w.strides, "trip": trip}
