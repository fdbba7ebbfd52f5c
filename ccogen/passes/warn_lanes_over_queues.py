"""Lanes of one warp spread over several queues (W103)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.nodes import Mode
from ccogen.passes._shared import Findings, cost_caps, expr_span, number_list
from ccogen.passes.base import Pass, PassContext
from ccogen.targets.base import CostModel


@dataclass(frozen=True)
class WarnLanesOverQueues(Pass):
    """A posting group of lanes that sends to one peer over several queue ids.

    Requires: an instance (posting groups numbered).
    Guarantees: nothing; a check.
    Emits: W103 once per call site when the lanes of one posting group that target
    one peer use two or more queue ids.  Lanes to different peers are different
    queues by definition and fine (alltoall).  `mode="same_queue"` groups are E013's.
    Only on targets with thread modes and trigger-cycle figures (MORI SDMA).
    """

    name: ClassVar[str] = "warn-lanes-over-queues"
    codes: ClassVar[tuple[str, ...]] = ("W103",)

    def run(self, ctx: PassContext) -> None:
        caps = cost_caps(ctx)
        cost = caps.cost
        if not caps.thread_modes or not cost.trigger_cycles_spread:
            return
        findings = Findings(ctx)
        for ops in ctx.instance.ranks:
            groups: dict[tuple[int, int | None], list[OpInst]] = defaultdict(list)
            for op in ops:
                if (op.kind.traits.queued and op.issuer.lane is not None
                        and op.lanes_in_group > 1 and op.mode is not Mode.SAME_QUEUE):
                    groups[(op.group, op.peer)].append(op)
            for members in groups.values():
                queues = {op.queue for op in members if op.queue is not None}
                if len(queues) > 1:
                    _report(members, queues, cost, findings)
        findings.flush()


def _report(members: list[OpInst], queues: set[int], cost: CostModel,
            findings: Findings) -> None:
    first = members[0]
    lanes = min(len(members), max(n for n, _ in cost.trigger_cycles_spread))
    row = max(n for n, _ in cost.trigger_cycles_spread if n <= lanes)
    spread = dict(cost.trigger_cycles_spread)[row]
    same = dict(cost.trigger_cycles_same_queue).get(row)
    findings.add(error(
        "W103", "lanes of one warp post to one peer over several queues",
        expr_span(getattr(first.op, "queue", None), first.span),
        f"{len(members)} lanes of one warp use queues {number_list(queues)} for rank {first.peer}",
        notes=(f"queues buy parallelism between warps, not between lanes: each lane on its own "
               f"queue issues its own reservation and doorbell; {row} lanes cost {spread} "
               f"trigger cycles spread over {row} queues, {same} on one queue in same-queue "
               f"mode ({cost.source})",),
        help='give the lanes one queue (the same `queue=` for every lane) with '
             '`mode="same_queue"`, and use more queues only for more warps'), first.rank)


__all__ = ["WarnLanesOverQueues"]
