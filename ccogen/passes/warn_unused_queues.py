"""More queues declared than the protocol can use (W107)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import Instance
from ccogen.passes._shared import Findings, cost_caps, expr_span, plural
from ccogen.passes._transfers import PerfIssuer, perf_issuer
from ccogen.passes.base import Pass, PassContext


@dataclass(frozen=True)
class WarnUnusedQueues(Pass):
    """A `queues N` larger than both the concurrent issuers and the queue ids in use.

    Requires: an instance.
    Guarantees: nothing; a check.
    Emits: W107 at an explicit `queues N` when N exceeds both the most perf issuers
    (warps or block leaders) that post to one peer in one kernel on one rank and one
    more than the highest queue id any op uses: some declared queues can never carry
    anything.  `queues auto` never warns.  Only on targets with hardware queues.
    """

    name: ClassVar[str] = "warn-unused-queues"
    codes: ClassVar[tuple[str, ...]] = ("W107",)

    def run(self, ctx: PassContext) -> None:
        caps = cost_caps(ctx)
        instance = ctx.instance
        if instance.protocol.queues is None or not caps.hardware_queues:
            return
        issuers, used = _issuers(instance), _used_queues(instance)
        needed = max(1, issuers, used)
        if instance.queues <= needed:
            return
        findings = Findings(ctx)
        protocol = instance.protocol
        reads = caps.cost.quiet_idle_queue_reads or 1
        findings.add(error(
            "W107", f"`queues {instance.queues}` declares more queues than the protocol uses",
            expr_span(protocol.queues, protocol.queues_span or protocol.span),
            f"{plural(instance.queues, 'queue')} per peer, but only "
            f"{plural(issuers, 'issuer posts', 'issuers post')} to a peer at a time, on "
            f"{plural(used, 'queue')}",
            notes=(f"queues only let concurrent issuers proceed in parallel; every `quiet(peer)` "
                   f"still polls each idle queue toward the peer ({plural(reads, 'uncached read')}"
                   " each), and the queues are a per-communicator resource capped at "
                   f"{caps.queue_cap}",),
            help=f"declare `queues {needed}`, or `queues auto`"))
        findings.flush()


def _issuers(instance: Instance) -> int:
    seen: dict[tuple[int, int, int | None], set[PerfIssuer]] = defaultdict(set)
    for ops in instance.ranks:
        for op in ops:
            if op.kind.traits.queued:
                seen[(op.rank, op.kernel, op.peer)].add(perf_issuer(op.issuer))
    return max((len(s) for s in seen.values()), default=0)


def _used_queues(instance: Instance) -> int:
    ids = [op.queue for ops in instance.ranks for op in ops if op.queue is not None]
    return max(ids, default=-1) + 1


__all__ = ["WarnUnusedQueues"]
