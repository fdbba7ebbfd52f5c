"""Completion: aggregate ops are rung, sources are not reused before their op completed.

Requires an instance; uses the happens-before graph (`ccogen.analysis`).
Guarantees, when it reports nothing: every aggregate put/get is rung by a `commit`
in its kernel, before any `quiet` that drains its queue and before any wait that
needs it; no plain put/get is posted on a queue behind an aggregate op that no
commit has rung yet (it would spin forever: MORI's in-order commit chain); on a
queue that holds aggregate ops or commits, the ops of different issuers are ordered
(a commit rings everything reserved on the queue, another issuer's unwritten slot
included); no source region of a put/get is written (by a copy, a get or an incoming
put) after the op was issued and before it surely read it (a `quiet` covering it,
or a wait on its local signal).

Emits E020 (aggregate op not committed in time, or a plain op behind it), E025
(source reused before its op completed) and E028 (aggregate ops or commits on a
queue that another issuer posts to concurrently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis, ConflictKind
from ccogen.analysis.events import EventKind
from ccogen.analysis.hb_graph import Edge
from ccogen.analysis.races import Conflict
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._report import (
    Findings,
    access_span,
    caller_text,
    launches_note,
    name,
    queue_arg,
    region,
)
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.source import Span


@dataclass(frozen=True)
class CheckCompletion(Pass):
    """Aggregate ops are committed in time (E020); sources are not reused early (E025)."""

    name: ClassVar[str] = "check-completion"
    codes: ClassVar[tuple[str, ...]] = ("E020", "E025", "E028")

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        out = Findings(ctx)
        late: dict[Span | None, bool] = {}  # aggregate ops E020 reports (never rung?)
        for ops in a.launches.ranks:
            quiets = [q for q in ops if q.kind is OpKind.QUIET]
            for op in ops:
                if op.aggregate and a.graph.executes(a.graph.issue(op.rank, op.index)):
                    never = _aggregate(a, op, quiets, out)
                    if never is not None:
                        late[op.span] = late.get(op.span, False) or never
        for rank, plain, agg in a.graph.behind_batch:
            _behind_batch(a, rank, plain, agg, out)
        for cycle in a.graph.cycles():
            _ring_cycle(a, cycle, out)
        _shared_doorbell(a, out)
        for c in a.conflicts_of(ConflictKind.SOURCE_REUSE):
            if c.first.op is not None and (late.get(c.first.op.span) or (
                    c.second.op is None and c.first.op.span in late)):
                continue  # a batch never rung, or refilled by the caller: E020 is the cause
            _source_reuse(c, out)
        out.flush()


# ============================================================================= E020


def _commit_hint(op: OpInst) -> str:
    return f"commit({op.peer}{queue_arg(op)})"


def _aggregate(a: Analysis, op: OpInst, quiets: list[OpInst], out: Findings) -> bool | None:
    """E020 for an aggregate op not committed in time: None when it is, else whether it
    is never committed (it then reads nothing)."""
    g = a.graph
    ringers = [a.launches.ranks[op.rank][c] for c in g.sure_ringers(op.rank, op.index)]
    ringers = [c for c in ringers if c.kernel == op.kernel and c.epoch == op.epoch]
    early = _early_quiets(a, op, quiets, ringers)
    if not ringers:
        out.error("E020", f"aggregate {name(op)} is never committed", op.span,
                  "posted without ringing the doorbell", rank=op.rank,
                  secondary=[(q.span, "returns without waiting for it") for q in early],
                  notes=["an aggregate op starts only when a `commit(peer, queue)` rings the "
                         "doorbell of its queue (a later plain op does not ring it: it waits "
                         "behind it)"],
                  help=f"add `{_commit_hint(op)}` after the last aggregate op of the batch")
        return True
    if early:
        out.error("E020", f"aggregate {name(op)} is committed only after a `quiet` that drains "
                  "its queue", op.span, "not committed before the `quiet`", rank=op.rank,
                  secondary=[(early[0].span, "drains only to the last rung packet"),
                             (ringers[0].span, "rings the doorbell only here")],
                  notes=["`quiet` returns with the aggregate op not even started: its source "
                         "is not free and its data has not left"],
                  help=f"move `{_commit_hint(op)}` before the `quiet`")
        return False
    return None


def _covers(q: OpInst, op: OpInst) -> bool:
    return (q.kind is OpKind.QUIET and (q.peer is None or q.peer == op.peer)
            and (q.queue is None or q.queue == op.queue))


def _early_quiets(a: Analysis, op: OpInst, quiets: list[OpInst],
                  ringers: list[OpInst]) -> list[OpInst]:
    """Quiets after `op` on its queue that no ringer of `op` precedes."""
    g = a.graph
    issue = g.issue(op.rank, op.index)
    found = []
    for q in quiets:
        if not _covers(q, op) or not g.hb(issue, g.issue(q.rank, q.index)):
            continue
        qi = g.issue(q.rank, q.index)
        if not any(g.hb(g.issue(c.rank, c.index), qi) for c in ringers):
            found.append(q)
    return found


def _ring_cycle(a: Analysis, cycle: list[Edge], out: Findings) -> None:
    """A wait that needs an aggregate op whose commit comes only after the wait."""
    g = a.graph
    ring = g.late_ring(cycle)
    if ring is None:
        return
    commit, op = g.op(ring.src), g.op(ring.dst)
    waits = [g.op(e.dst) for e in cycle if g.kind(e.dst) is EventKind.DONE]
    assert commit is not None and op is not None
    wait = next((w for w in waits if w is not None), None)
    out.error("E020", f"a wait needs aggregate {name(op)}, which is committed only after the "
              "wait", op.span, "committed too late", rank=op.rank,
              secondary=[(wait.span if wait else None, "waits for it first"),
                         (commit.span, "rings the doorbell only here")],
              notes=["the aggregate op does not start before the doorbell, and the doorbell "
                     "comes after the wait: the wait never returns"],
              help=f"ring the doorbell before waiting: move `{_commit_hint(op)}` up")


def _behind_batch(a: Analysis, rank: int, plain: int, agg: int, out: Findings) -> None:
    p, g = a.launches.ranks[rank][plain], a.launches.ranks[rank][agg]
    out.error("E020", f"plain {name(p)} posted behind uncommitted aggregate ops on its queue "
              "never returns", p.span, "spins until the batch ahead of it is committed",
              rank=rank,
              secondary=[(g.span, f"aggregate {name(g)} reserved first, not yet committed")],
              notes=["a plain op waits for the queue's committed pointer to reach its own slot "
                     "before ringing, and only `commit` moves that pointer past reserved "
                     "aggregate ops: the plain op does not ring the batch, it waits behind it "
                     "(and a `commit` after it moves the pointer past its slot: it still "
                     "waits)"],
              help=f"`{_commit_hint(g)}` before the plain op, or make it aggregate too")


# ============================================================================= E028


def _shared_doorbell(a: Analysis, out: Findings) -> None:
    """Aggregate ops and commits of one issuer unordered with another issuer's ops on the
    same queue (E028)."""
    g = a.graph
    seen: set[tuple[object, ...]] = set()
    for ops in a.launches.ranks:
        for op in ops:
            if op.peer is None or op.queue is None or not op.kind.traits.rings:
                continue
            if not (op.aggregate or op.kind is OpKind.COMMIT):
                continue
            qo = g.queue_ops(op.rank, op.peer, op.queue)
            if qo is None or not g.executes(g.issue(op.rank, op.index)):
                continue
            other = _unordered_other(a, op, qo)
            key = (op.rank, op.peer, op.queue, frozenset((op.issuer, other.issuer))
                   if other is not None else None)
            if other is not None and key not in seen:
                seen.add(key)  # one finding per pair of issuers on a queue
                _report_shared(op, other, out)


def _unordered_other(a: Analysis, op: OpInst, qo: object) -> OpInst | None:
    """An op of another issuer on `op`'s queue, neither before nor after it."""
    from ccogen.analysis._hb_derive import prefix_len

    g = a.graph
    x = g.issue(op.rank, op.index)
    seqs = [*qo.transfers.items(), *qo.ringers.items()]  # type: ignore[attr-defined]
    for who, seq in seqs:
        if who == op.issuer:
            continue
        live = [i for i in seq if g.executes(g.issue(op.rank, i))]
        k = prefix_len(live, lambda i: g.hb(g.issue(op.rank, i), x))
        if k < len(live) and not g.hb(x, g.issue(op.rank, live[k])):
            return a.launches.ranks[op.rank][live[k]]
    return None


def _report_shared(op: OpInst, other: OpInst, out: Findings) -> None:
    what = "`commit`" if op.kind is OpKind.COMMIT else f"aggregate {name(op)}"
    other_what = ("`commit`" if other.kind is OpKind.COMMIT else
                  f"aggregate {name(other)}" if other.aggregate else name(other))
    out.error("E028", f"{what} shares its queue with another issuer's ops in no fixed order",
              op.span, f"{op.issuer} on queue {op.queue} toward rank {op.peer}", rank=op.rank,
              secondary=[(other.span, f"{other.issuer} posts {other_what} on the same "
                                      "queue meanwhile")],
              notes=["a `commit` rings everything reserved on the queue, including another "
                     "issuer's slot that is reserved but not yet written, and moves the "
                     "committed pointer past it: that issuer's op then waits forever (or the "
                     "engine runs a half-written packet); a plain op reserved behind an "
                     "uncommitted batch waits forever too"],
              help="give each issuer its own queue (`queue=` per warp, or `queues auto`), or "
                   "order the issuers (a barrier or a wait) before the batch")


# ============================================================================= E025


def _source_reuse(c: Conflict, out: Findings) -> None:
    reader, writer = c.first.op, c.second.op
    assert reader is not None
    if writer is None:
        _caller_reuse(c, reader, out)
        return
    incoming = writer.rank != c.overlap.rank
    what = f"an incoming {name(writer)}" if incoming else name(writer)
    label = f"writes {region(c.overlap)}" + (f" from rank {writer.rank}" if incoming else "")
    out.error("E025", f"{what} overwrites the source of a {name(reader)} that may still be "
              "reading it", writer.span, label, rank=c.overlap.rank,
              secondary=[(reader.span, f"reads {region(c.overlap)}, not yet complete")],
              notes=[f"a {name(reader)} is complete only after a `quiet` that covers it or a "
                     "wait on its local signal; until then the engine may read the new bytes",
                     *launches_note(c.first, c.second)],
              help=f"complete the {name(reader)} first: `quiet({reader.peer}"
                   f"{queue_arg(reader)})` before the bytes are written again")


def _caller_reuse(c: Conflict, reader: OpInst, out: Findings) -> None:
    """The caller writes an input between launches while a transfer may still read it."""
    rank = c.overlap.rank
    out.error("E025", f"rank {rank}'s caller overwrites the source of a {name(reader)} that may "
              "still be reading it", reader.span,
              f"reads {region(c.overlap)}, not yet complete when the launch ends", rank=rank,
              secondary=[(access_span(c.second), caller_text(c.second))],
              notes=["transfers outlive the kernel that posted them: a launch ends without "
                     "waiting for its transfers to read their sources",
                     *launches_note(c.first, c.second)],
              help=f"complete the {name(reader)} before the launch ends: `quiet({reader.peer}"
                   f"{queue_arg(reader)})`, or a wait on its local signal")


__all__ = ["CheckCompletion"]
