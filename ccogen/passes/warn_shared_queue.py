"""Several warps or blocks issuing concurrently on one queue (W102)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import Findings, ProgramOrder, cost_caps, first_spans, number_list
from ccogen.passes._transfers import PerfIssuer, perf_issuer
from ccogen.passes.base import Pass, PassContext
from ccogen.passes.check_sdma_queues import independent_conflicts, ring_units
from ccogen.targets.base import Capabilities

_MAX_PROBES = 32  # ops of one issuer probed for a concurrent neighbour (bounds the cost)


@dataclass(frozen=True)
class WarnSharedQueue(Pass):
    """Warps or blocks that post to one `(peer, queue)` at the same time.

    Requires: an instance (queues assigned).
    Guarantees: nothing; a check.
    Emits: W102 when, in one kernel on one rank, puts/gets of two or more perf issuers
    (hardware warps or block leaders) on one `(peer, queue)` are unordered by program
    order (`ProgramOrder.concurrent`), e.g. the warps of one `warps` block.  Only on
    targets with hardware queues and a measured slowdown (MORI SDMA).  Queues with
    aggregate ops or commits are left to E028: shared, they hang rather than slow down
    (and, on `mori-sdma`, queues of lanes in independent mode to E015).
    """

    name: ClassVar[str] = "warn-shared-queue"
    codes: ClassVar[tuple[str, ...]] = ("W102",)

    def run(self, ctx: PassContext) -> None:
        caps = cost_caps(ctx)
        if not caps.hardware_queues or caps.cost.shared_queue_slowdown is None:
            return
        findings = Findings(ctx)
        for ops in ctx.instance.ranks:
            order = ProgramOrder(ops)
            batched = {(op.kernel, op.peer, op.queue) for op in ops
                       if op.aggregate or op.kind is OpKind.COMMIT}
            if ring_units(ctx) is not None:  # queues that hang there: E015 says so
                batched |= {(x.kernel, x.peer, x.queue) for pair in independent_conflicts(ops)
                            for x in pair}
            for key, bucket in _buckets(ops).items():
                if key in batched:
                    continue  # batches on a shared queue hang: E028 (an error) says so
                sharing = _concurrent_issuers(bucket, order)
                if len(sharing) > 1:
                    _report(ctx, sharing, bucket, caps, findings)
        findings.flush()


def _buckets(ops: Sequence[OpInst]) -> dict[tuple[object, ...], dict[PerfIssuer, list[OpInst]]]:
    out: dict[tuple[object, ...], dict[PerfIssuer, list[OpInst]]] = defaultdict(
        lambda: defaultdict(list))
    for op in ops:
        if op.kind.traits.queued and op.queue is not None:
            out[(op.kernel, op.peer, op.queue)][perf_issuer(op.issuer)].append(op)
    return out


def _concurrent_issuers(bucket: dict[PerfIssuer, list[OpInst]], order: ProgramOrder
                        ) -> list[PerfIssuer]:
    issuers = sorted(bucket, key=lambda i: (i[0], -1 if i[1] is None else i[1]))
    found: set[PerfIssuer] = set()
    for i, x in enumerate(issuers):
        for y in issuers[i + 1:]:
            if (x not in found or y not in found) and _overlap(bucket[x], bucket[y], order):
                found.update((x, y))
    return [i for i in issuers if i in found]


def _overlap(xs: list[OpInst], ys: list[OpInst], order: ProgramOrder) -> bool:
    """Whether some op of `ys` is unordered with its nearest op of `xs` either side."""
    index = [op.index for op in xs]
    for y in ys[:_MAX_PROBES]:
        at = bisect.bisect_left(index, y.index)
        near = [index[k] for k in (at - 1, at) if 0 <= k < len(index)]
        if any(order.concurrent(x, y.index) for x in near):
            return True
    return False


def _report(ctx: PassContext, sharing: list[PerfIssuer], bucket: dict[PerfIssuer, list[OpInst]],
            caps: Capabilities, findings: Findings) -> None:
    ops = [op for issuer in sharing for op in bucket[issuer]]
    first = min(ops, key=lambda op: op.index)
    spans = first_spans(ops, 3)
    issuers, slowdown = caps.cost.shared_queue_slowdown or (0, 0.0)
    explicit = getattr(first.op, "queue", None) is not None
    findings.add(error(
        "W102", "several warps or blocks post to one peer on the same queue at once",
        first.span, f"{_who(sharing)} all post to rank {first.peer} on queue {first.queue}",
        secondary=[(s, "also posts on that queue") for s in spans if s != first.span],
        notes=(f"issuers sharing a queue serialise on its in-order commit chain: {issuers} "
               f"warps on one queue take ~{slowdown:g}x as long as {issuers} warps on "
               f"{issuers} queues ({caps.cost.source})",),
        help=_help(ctx, len(sharing), explicit, caps)), first.rank)


def _who(sharing: list[PerfIssuer]) -> str:
    blocks = {b for b, _ in sharing}
    warps = [w for _, w in sharing]
    if len(blocks) == 1 and None not in warps:
        return f"warps {number_list(w for w in warps if w is not None)} of block {blocks.pop()}"
    if all(w is None for w in warps):
        return f"blocks {number_list(blocks)}"
    return f"{len(sharing)} issuers"


def _help(ctx: PassContext, n: int, explicit: bool, caps: Capabilities) -> str:
    want = min(n, caps.queue_cap or n)
    if explicit:
        return (f"declare `queues auto` and drop `queue=` (each warp then gets its own queue), "
                f"or declare `queues {want}` and pass each warp's index as `queue=`")
    return f"declare `queues auto` (or `queues {want}`): each issuer then gets its own queue"


__all__ = ["WarnSharedQueue"]
