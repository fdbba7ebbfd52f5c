"""Ranks that reduce the same contributions in different orders (W108).

Requires an instance free of deadlocks and memory conflicts (the final state is then
the same in every schedule: `check_postcondition.decidable`); uses the symbolic
execution of `ccogen.analysis.symbolic`, which records what every `reduce` wrote as
a combination of contributions in the order it added them.

Guarantees, when it reports nothing and ran: whenever two ranks compute a float sum
of the same contributions, they add them in the same order and nesting, so they
hold the same bits (integer sums, `max` and `min` are exact in any order).

Emits W108 at the `reduce` of one rank, with a label at the other rank's, and the
two orders in a note.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis.symbolic import Memory, Piece, normal, shape
from ccogen.ir.instance import OpInst
from ccogen.ir.nodes import ReduceOp
from ccogen.passes._report import Findings
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.passes.check_postcondition import decidable, symbolic_memory
from ccogen.passes.check_postcondition import origin as piece_text


@dataclass(frozen=True)
class WarnSummationOrder(Pass):
    """Float sums of the same contributions in different orders on different ranks."""

    name: ClassVar[str] = "warn-summation-order"
    codes: ClassVar[tuple[str, ...]] = ("W108",)

    def run(self, ctx: PassContext) -> None:
        instance = ctx.instance
        if not any(op.kind.traits.reduces for ops in instance.ranks for op in ops):
            return
        a = analysis_of(ctx)
        if not decidable(a):
            return
        mem = symbolic_memory(ctx, a.graph)
        out = Findings(ctx)
        for first, second in _disagreements(mem):
            _report(first, second, out, ctx)
        out.flush()


def _disagreements(mem: Memory) -> list[tuple[tuple[OpInst, Piece], tuple[OpInst, Piece]]]:
    """Pairs (one per value) of reduces on different ranks: same value, other order."""
    seen: dict[Hashable, dict[Hashable, tuple[OpInst, Piece]]] = {}
    found: list[tuple[tuple[OpInst, Piece], tuple[OpInst, Piece]]] = []
    reported: set[Hashable] = set()
    for op, piece in mem.reduced:
        c = piece.combo
        if c is None or c.op is not ReduceOp.SUM or not c.dtype.is_float:
            continue
        value = normal(piece)
        shapes = seen.setdefault(value, {})
        order = shape(piece)
        if order in shapes or value in reported:
            continue
        other = next((x for x in shapes.values() if x[0].rank != op.rank), None)
        shapes[order] = (op, piece)
        if other is not None:
            reported.add(value)
            found.append((other, (op, piece)))
    return found


def _report(first: tuple[OpInst, Piece], second: tuple[OpInst, Piece], out: Findings,
            ctx: PassContext) -> None:
    (a, pa), (b, pb) = first, second
    out.error("W108", "ranks reduce the same contributions in different orders", b.span,
              f"rank {b.rank} adds them in another order than rank {a.rank}",
              secondary=[(a.span, f"rank {a.rank} adds them in this order")],
              notes=[f"rank {a.rank} computes {piece_text(pa, ctx.instance)}, rank {b.rank} "
                     f"{piece_text(pb, ctx.instance)}: float addition is not associative, so "
                     "the ranks may end with results that differ in the last bits",
                     "the results are still within the tolerance of a float sum"],
              help="list the sources in the same order on every rank, e.g. "
                   "`srcs=[x@p for p in ranks()]` rather than starting at `me`")


__all__ = ["WarnSummationOrder"]
