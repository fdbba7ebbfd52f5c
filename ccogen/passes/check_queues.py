"""Queue ids, queue counts and thread modes (E012, E013, E014)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import IssuerLevel, OpInst
from ccogen.ir.nodes import Mode
from ccogen.passes._shared import (
    Findings,
    expr_span,
    issuer_kind,
    keyword_span,
    number_list,
    plural,
    target_caps,
)
from ccogen.passes.base import Pass, PassContext
from ccogen.source import Span


@dataclass
class _BadQueue:
    """Every out-of-range id one `queue=` expression takes in the instance."""

    op: OpInst
    values: set[int] = field(default_factory=set)
    ranks: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class CheckQueues(Pass):
    """Queue ids against the declared count and the target's cap; thread-mode promises.

    Requires: an instance (auto queues assigned, posting groups numbered).
    Guarantees: nothing; a check.
    Emits: E012 for an explicit `queue=` id outside 0..Q-1 (Q the declared or `auto`
    count), once per `queue=` expression with every bad value it takes, and for a
    queue count over the target's `queue_cap`; E013 for `mode="same_queue"` on a
    posting group whose lanes differ in peer or queue; E014 for a `mode=` other
    than `"auto"` on a warp or block issuer.
    """

    name: ClassVar[str] = "check-queues"
    codes: ClassVar[tuple[str, ...]] = ("E012", "E013", "E014")

    def run(self, ctx: PassContext) -> None:
        findings = Findings(ctx)
        _queue_count(ctx, findings)
        bad: dict[Span | None, _BadQueue] = {}
        groups: dict[tuple[int, int], list[OpInst]] = defaultdict(list)
        for ops in ctx.instance.ranks:
            for op in ops:
                _collect_bad_queue(ctx, op, bad)
                _mode_on_group_issuer(op, findings)
                if _promises_same_queue(op):
                    groups[(op.rank, op.group)].append(op)
        for item in bad.values():
            _report_bad_queue(ctx, item, findings)
        for members in groups.values():
            _same_queue_promise(members, findings)
        findings.flush()


# ----------------------------------------------------------------------------- E012


def _declared(ctx: PassContext) -> tuple[Span | None, str]:
    """The `queues` declaration's span and how to name it."""
    protocol = ctx.instance.protocol
    span = expr_span(protocol.queues, protocol.queues_span or protocol.span)
    if protocol.queues is None:
        return span, f"`queues auto` chose {ctx.instance.queues} here"
    return span, f"{plural(ctx.instance.queues, 'queue')} per peer declared here"


def _queue_count(ctx: PassContext, findings: Findings) -> None:
    caps = target_caps(ctx)
    count = ctx.instance.queues
    if caps is None or caps.queue_cap is None or count <= caps.queue_cap:
        return
    span, _ = _declared(ctx)
    cap = caps.queue_cap
    findings.add(error(
        "E012", f"{count} queues per peer is over the cap of {cap} on `{caps.name}`", span,
        f"{count} queues", notes=(
            f"`{caps.name}` has at most {cap} hardware queues per peer; the runtime clamps the "
            f"count to {cap}, and ops on queues {cap} and above are silent no-ops",),
        help=f"declare at most `queues {cap}`; issuers beyond {cap} can share queues"))


def _collect_bad_queue(ctx: PassContext, op: OpInst, bad: dict[Span | None, _BadQueue]) -> None:
    expr = getattr(op.op, "queue", None)
    if expr is None or op.queue is None or 0 <= op.queue < ctx.instance.queues:
        return  # no `queue=`, or an auto queue (always in range), or in range
    item = bad.setdefault(expr_span(expr, op.span), _BadQueue(op))
    item.values.add(op.queue)
    if op.rank not in item.ranks:
        item.ranks.append(op.rank)


def _report_bad_queue(ctx: PassContext, item: _BadQueue, findings: Findings) -> None:
    count = ctx.instance.queues
    values = number_list(item.values)
    ids = "queue id" if len(item.values) == 1 else "queue ids"
    decl_span, decl_label = _declared(ctx)
    highest = max(item.values)
    fix = f"declare `queues {highest + 1}`" if highest >= count else "name an existing queue"
    first = item.op
    diagnostic = error(
        "E012", f"{ids} {values} out of range: the protocol has {plural(count, 'queue')}",
        expr_span(getattr(first.op, "queue", None), first.span),
        f"{'is' if len(item.values) == 1 else 'takes'} {values} here",
        secondary=[(decl_span, decl_label)],
        notes=(f"queue ids run from 0 to {count - 1}; on MORI SDMA an op on a queue that does "
               "not exist is a silent no-op, so its data never moves and its waits hang",),
        help=f"use a queue id from 0 to {count - 1}, or {fix}")
    for rank in item.ranks:
        findings.add(diagnostic, rank)


# ----------------------------------------------------------------------------- E013


def _promises_same_queue(op: OpInst) -> bool:
    return op.kind.traits.queued and op.mode is Mode.SAME_QUEUE and op.issuer.lane is not None


def _same_queue_promise(members: list[OpInst], findings: Findings) -> None:
    targets = {(op.peer, op.queue) for op in members}
    if len(targets) < 2:
        return
    first = members[0]
    other = next(op for op in members if (op.peer, op.queue) != (first.peer, first.queue))
    peers_differ = len({op.peer for op in members}) > 1
    what = "peers" if peers_differ else "queues"
    arg = getattr(first.op, "peer" if peers_differ else "queue", None)
    secondary = [(expr_span(arg, None), "differs between the lanes")]
    findings.add(error(
        "E013", f'`mode="same_queue"` is promised, but lanes of one warp post to different {what}',
        keyword_span(first.span, "mode"), "every lane must target one (peer, queue) for this",
        secondary=secondary,
        notes=(f"on rank {first.rank}, {_lane(first)} posts to {_target(first)} but "
               f"{_lane(other)} to {_target(other)}",
               "same-queue mode reserves slots for the whole warp on one queue: lanes that "
               "target another queue write into slots reserved there, silent data corruption "
               "in release builds"),
        help='use `mode="independent"`, or drop `mode=` and let the compiler choose'),
        first.rank)


def _lane(op: OpInst) -> str:
    block = f" of block {op.issuer.block}" if op.issuer.block else ""
    return f"lane {op.issuer.lane}{block}"


def _target(op: OpInst) -> str:
    return f"peer {op.peer} on queue {op.queue}"


# ----------------------------------------------------------------------------- E014


def _mode_on_group_issuer(op: OpInst, findings: Findings) -> None:
    if not op.kind.traits.queued or op.mode is Mode.AUTO:
        return
    if op.issuer.level is IssuerLevel.LANE:
        return
    who = issuer_kind(op.issuer)
    scope = "`warps`" if op.issuer.level is IssuerLevel.WARP else "the block"
    findings.add(error(
        "E014", f"`mode=` only applies to lanes, but this `{op.kind}` is issued by {who}",
        keyword_span(op.span, "mode"), f"thread mode on {who}-issued `{op.kind}`",
        notes=(f"ops issued by {scope} are leader-only: one lane posts a single copy for the "
               "group, so there is nothing to group; MORI rejects the combination with a "
               "`static_assert`",),
        help=f'remove `mode="{op.mode.value}"`, or issue the op from `lanes`'), op.rank)


__all__ = ["CheckQueues"]
