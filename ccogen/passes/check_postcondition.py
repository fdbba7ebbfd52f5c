"""Postconditions: the symbolic result of the protocol satisfies every `ensure` statement.

Requires an instance; uses the happens-before graph and `ccogen.analysis.symbolic`
(symbolic execution with provenance, MSCCLang style).  Runs only when the order of
every conflicting access is fixed: an instance with a deadlock, an unsatisfiable
wait or a memory conflict (E020-E025, E030-E032) has no single result, and those
findings come first.  Guarantees, when it reports nothing and ran: every
postcondition holds byte for byte on every rank, whatever the schedule.

Emits E033, at the failing statement, with the first differing byte range, where its
bytes came from and a label at the op that wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis, analysis_of, gc_paused
from ccogen.analysis.symbolic import Mismatch, Piece, evaluate, execute
from ccogen.passes._report import Findings, name, ranks_note
from ccogen.passes.base import Pass, PassContext
from ccogen.source import Span


@dataclass(frozen=True)
class CheckPostcondition(Pass):
    """Every `ensure` statement holds (E033); see the module docstring."""

    name: ClassVar[str] = "check-postcondition"
    codes: ClassVar[tuple[str, ...]] = ("E033",)

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        if not a.instance.checks or not decidable(a):
            return
        failed: dict[Span | None, list[Mismatch]] = {}
        with gc_paused():
            mem = execute(a.graph)
            for check in a.instance.checks:
                for launch in range(a.launches.launches):
                    m = evaluate(mem, check, launch)
                    if m is not None:
                        failed.setdefault(check.span, []).append(m)
                        break
        out = Findings(ctx)
        for ms in failed.values():
            _report(ms, out, a.instance.nranks)
        out.flush()
        ctx.cache["postconditions-checked"] = len(a.instance.checks)


def decidable(a: Analysis) -> bool:
    """The final state is the same in every schedule (no deadlock, no conflict)."""
    return not a.graph.stuck and not a.conflicts


def origin(p: Piece) -> str:
    """`` `init(send@2)[0:64]` `` — the initial bytes a piece holds."""
    return f"`init({p.window}@{p.rank})[{p.offset}:{p.offset + p.length}]`"


def _got(m: Mismatch) -> str:
    left = m.check.left
    g = m.got
    if g.writer is None and (g.rank, g.window, g.offset) == (left.rank, left.window, m.start):
        return "still hold their initial bytes"
    return f"hold {origin(g)}"


def _report(ms: list[Mismatch], out: Findings, nranks: int) -> None:
    m = ms[0]
    left = m.check.left
    where = f"bytes {m.start}..{m.stop} of `{left.window}` on rank {left.rank}"
    if m.equal:
        label = f"both sides hold {origin(m.got)}"
    else:
        label = f"{where} {_got(m)}, expected {origin(m.want)}"
    writer = m.got.writer
    secondary = [] if writer is None or m.equal else [
        (writer.span, f"this {name(writer)} of rank {writer.rank} put them there")]
    notes = ["checked symbolically: the origin of every byte is followed through copies and "
             "transfers in happens-before order"]
    ranks = sorted({x.check.rank for x in ms})
    out.error("E033", "postcondition does not hold", m.check.span, label,
              secondary=secondary, notes=[*notes, f"fails {ranks_note(ranks, nranks)}"],
              help="check the regions of the transfer that writes these bytes, or the "
                   "`ensure` statement")


__all__ = ["CheckPostcondition", "decidable"]
