"""World ranks where LSA ranks are required (E011)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.nodes import TeamKind
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import Findings, expr_span, first_spans, target_caps
from ccogen.passes.base import Pass, PassContext
from ccogen.targets.base import Feature


@dataclass(frozen=True)
class CheckRanks(Pass):
    """In a `team world` protocol, a wait on one's own local-completion slot.

    Requires: an instance.
    Guarantees: nothing; a check.
    Emits: E011 at each `wait_signal` whose source is the waiting rank itself
    (`wait_signal(me, ...)`, the seed's `comm.rank` for `comm.lsaRank` bug) when the
    team is `world`.  Own-slot signals are the node-local completion mechanism of the
    copy engine (MORI `signalBuf[lsaRank * n + q]`), meaningful only where `me` is an
    LSA rank; in a world team, completion of one's own sends is `quiet`.  A world
    rank given to an op of an intra-node-only target is not repeated here: the target
    cannot lower `team world` at all, which is E042 at the team declaration.
    """

    name: ClassVar[str] = "check-ranks"
    codes: ClassVar[tuple[str, ...]] = ("E011",)

    def run(self, ctx: PassContext) -> None:
        protocol = ctx.instance.protocol
        if protocol.team.kind is not TeamKind.WORLD:
            return
        caps = target_caps(ctx)
        if caps is not None and not caps.supports(Feature.TEAM_WORLD).available:
            return  # E042 reports the team itself
        findings = Findings(ctx)
        for ops in ctx.instance.ranks:
            for op in ops:
                if op.kind is OpKind.WAIT_SIGNAL and op.peer == op.rank:
                    _own_slot_wait(ctx, op, ops, findings)
        findings.flush()


def _own_slot_wait(ctx: PassContext, wait: OpInst, ops: tuple[OpInst, ...],
                   findings: Findings) -> None:
    team = ctx.instance.protocol.team
    feeders = [op for op in ops if op.kind.traits.signals and op.signal.local
               and op.queue == wait.queue]
    secondary = [(team.span, "`me` and every peer are world ranks in this team")]
    secondary += [(span, "signals completion into this rank's own slot")
                  for span in first_spans(feeders, 2)]
    findings.add(error(
        "E011", "`wait_signal` on one's own slot names a world rank",
        expr_span(getattr(wait.op, "src", None), wait.span),
        "names the waiting rank itself, by its world rank", secondary=secondary,
        notes=("local-completion slots are node-local and indexed by the LSA rank (MORI "
               "`signalBuf[lsaRank * n + q]`); world and LSA ranks coincide only on one node, "
               "so on several nodes this wait never returns",),
        help="if every rank is on one node, write `team lsa`; otherwise wait for your own "
             "sends with `quiet(peer)` instead of a local signal"), wait.rank)


__all__ = ["CheckRanks"]
