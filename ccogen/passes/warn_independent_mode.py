"""`mode="independent"` where same-queue is provable (W106)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.nodes import Mode
from ccogen.passes._shared import Findings, cost_caps, keyword_span
from ccogen.passes.base import Pass, PassContext
from ccogen.targets.base import CostModel


@dataclass(frozen=True)
class WarnIndependentMode(Pass):
    """Lanes told to post independently although they all share one `(peer, queue)`.

    Requires: an instance (posting groups numbered).
    Guarantees: nothing; a check.
    Emits: W106 at `mode="independent"` on a posting group of two or more lanes that
    all target one `(peer, queue)`.  The driver's instance note says in which
    instances that holds.  Only on targets with thread modes and SGPR figures.
    """

    name: ClassVar[str] = "warn-independent-mode"
    codes: ClassVar[tuple[str, ...]] = ("W106",)

    def run(self, ctx: PassContext) -> None:
        caps = cost_caps(ctx)
        if not caps.thread_modes or caps.cost.sgpr_independent is None:
            return
        findings = Findings(ctx)
        for ops in ctx.instance.ranks:
            groups: dict[int, list[OpInst]] = defaultdict(list)
            for op in ops:
                if (op.kind.traits.queued and op.mode is Mode.INDEPENDENT
                        and op.issuer.lane is not None and op.lanes_in_group > 1):
                    groups[op.group].append(op)
            for members in groups.values():
                if len({(op.peer, op.queue) for op in members}) == 1:
                    _report(members, caps.cost, findings)
        findings.flush()


def _report(members: list[OpInst], cost: CostModel, findings: Findings) -> None:
    first = members[0]
    cycles = dict(cost.trigger_cycles_same_queue)
    most = max(cycles)
    findings.add(error(
        "W106", '`mode="independent"` where every lane targets the same queue',
        keyword_span(first.span, "mode"),
        f"all {len(members)} lanes post to rank {first.peer} on queue {first.queue}",
        notes=(f"independent mode detects the lanes' shape at run time (+{cost.sgpr_independent} "
               f"SGPR against +{cost.sgpr_same_queue}); same-queue lanes post as one group with "
               f"one reservation and one doorbell: {most} lanes cost {cycles[most]} trigger "
               f"cycles against {cycles[1]} for one ({cost.source})",),
        help='drop `mode="independent"` (the compiler proves same-queue and uses it) or write '
             '`mode="same_queue"`'), first.rank)


__all__ = ["WarnIndependentMode"]
