"""Postconditions: the symbolic result of the protocol satisfies every `ensure` statement.

Requires an instance; uses the happens-before graph and `ccogen.analysis.symbolic`
(symbolic execution with provenance, MSCCLang style).  Runs only when the order of
every conflicting access is fixed: an instance with a deadlock, an unsatisfiable
wait or a memory conflict (E020-E025, E030-E032) has no single result, and those
findings come first.  Guarantees, when it reports nothing and ran: every
postcondition holds byte for byte on every rank, whatever the schedule.

A line with run-time bounds, weights or ranks (`CheckInst.runtime`) is not proved:
its reads are ordered like every other (E031/E032), but the values are the
simulator's to compare on drawn contents.  Each such line is N001 (a note; a warning
under `ccogen lint --strict`), with the reason, so that none passes unsaid.

Emits E033, at the failing statement, with the first differing byte range, where its
bytes came from and a label at the op that wrote them.  Where a `reduce` or a
`sum`/`max`/`min` is involved, the bytes are compared as combinations (whatever the
order of the terms): the finding names the element range and each contribution that
is missing or counted too often (a doubled one, or one from a landing slot's old
contents: data of the previous launch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis, gc_paused
from ccogen.analysis.hb_graph import HBGraph
from ccogen.analysis.symbolic import Memory, Mismatch, Piece, evaluate, execute
from ccogen.ir import rounding
from ccogen.ir.instance import Instance
from ccogen.passes._report import Findings, name, ranks_note
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.source import Span


@dataclass(frozen=True)
class CheckPostcondition(Pass):
    """Every `ensure` statement holds (E033); see the module docstring."""

    name: ClassVar[str] = "check-postcondition"
    codes: ClassVar[tuple[str, ...]] = ("E033", "N001")

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        if not decidable(a) or not (a.instance.checks or a.instance.unproved):
            return
        _unproved(ctx)
        if not a.instance.checks:
            return
        failed: dict[Span | None, list[Mismatch]] = {}
        with gc_paused():
            mem = symbolic_memory(ctx, a.graph)
            for i, check in enumerate(a.instance.checks):
                if check.runtime:  # run-time values: compared by the simulator on drawn contents
                    continue
                for launch in range(a.launches.launches):
                    m = evaluate(mem, a.instance.checks_at(launch)[i], launch)
                    if m is not None:
                        failed.setdefault(check.span, []).append(m)
                        break
        out = Findings(ctx)
        for ms in failed.values():
            _report(ms, out, a.instance)
        out.flush()
        ctx.cache["postconditions-checked"] = sum(not c.runtime for c in a.instance.checks)


def _unproved(ctx: PassContext) -> None:
    """N001 at every `ensure` line left to the simulator, with the reason."""
    out = Findings(ctx)
    for span, why in ctx.instance.unproved:
        out.error("N001", "the checker does not prove this `ensure` line", span, why,
                  notes=["`ccogen simulate` compares it on drawn contents: every `require` "
                         "bound at its low and high ends, mixed and interior values"],
                  help="run `ccogen simulate` on the protocol (it judges this line), or state "
                       "what the checker can prove: static bounds and weights")
    out.flush()


def symbolic_memory(ctx: PassContext, graph: HBGraph) -> Memory:
    """The symbolic final state of the context's instance (computed once per context)."""
    found = ctx.cache.get("symbolic-memory")
    if found is None:
        with gc_paused():
            found = ctx.cache["symbolic-memory"] = execute(graph)
    return found  # type: ignore[no-any-return]


def decidable(a: Analysis) -> bool:
    """The final state is the same in every schedule (no deadlock, no conflict)."""
    return not a.graph.stuck and not a.conflicts


def origin(p: Piece, instance: Instance | None = None) -> str:
    """`` `init(send@2)[0:64]` `` — the initial bytes a piece holds (elements of a typed
    window), or `` `sum(...)` `` of what a `reduce` combined."""
    return f"`{_text(p, instance)}`"


def _text(p: Piece, instance: Instance | None, depth: int = 0) -> str:
    if p.combo is None:
        width = instance.dtype(p.window).size if instance is not None else 1
        return f"init({p.window}@{p.rank})[{p.offset // width}:{(p.offset + p.length) // width}]"
    if depth >= 2:
        return f"{p.combo.op.value}(...)"
    terms = [("" if w == 1 else f"{w} * ") + _text(t, instance, depth + 1)
             for w, t in p.combo.terms[:4]]
    more = ", ..." if len(p.combo.terms) > 4 else ""
    return f"{p.combo.op.value}({', '.join(terms)}{more})"


def _got(m: Mismatch) -> str:
    left = m.check.left
    g = m.got
    if g.writer is None and (g.rank, g.window, g.offset) == (left.rank, left.window, m.start):
        return "still hold their initial bytes"
    return f"hold {origin(g)}"


def _contribution(p: Piece, weight: int | float, instance: Instance) -> str:
    times = "" if weight == 1 else f" ({weight} times)"
    return f"{origin(p, instance)}{times}"


def _report(ms: list[Mismatch], out: Findings, instance: Instance) -> None:
    nranks = instance.nranks
    m = ms[0]
    left = m.check.left
    if m.rounded is not None:
        _report_rounded(ms, out, instance)
        return
    if m.missing or m.extra:
        _report_combination(ms, out, instance)
        return
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


def _report_combination(ms: list[Mismatch], out: Findings, instance: Instance) -> None:
    m = ms[0]
    left = m.check.left
    width = instance.dtype(left.window).size
    first, last = m.start // width, (m.stop - 1) // width
    where = f"elements {first}..{last} of `{left.window}` on rank {left.rank}"
    parts = []
    if m.missing:
        parts.append("miss " + ", ".join(_contribution(p, w, instance) for p, w in m.missing))
    if m.extra:
        parts.append("hold too often " + ", ".join(_contribution(p, w, instance)
                                                  for p, w in m.extra))
    label = f"{where} " + " and ".join(parts)
    notes = ["checked symbolically: every element's contributions are followed through "
             "copies, transfers and reduces in happens-before order"]
    inputs = {(t.rank, t.window) for c in instance.checks if c.reduction is not None
              for t, init in zip(c.reduction.terms, c.reduction.init, strict=True) if init}
    inputs |= {(c.left.rank, c.left.window) for c in instance.checks if c.left_init}
    inputs |= {(c.right.rank, c.right.window) for c in instance.checks
               if c.right is not None and c.right_init}
    for p, _ in m.extra:
        if p.combo is None and (p.rank, p.window) not in inputs:
            notes.append(f"{origin(p, instance)} is what `{p.window}` held when the launch "
                         "began: data of the previous launch, read before this launch's data "
                         "arrived")
            break
    writer = m.got.writer
    secondary = [] if writer is None else [
        (writer.span, f"this {name(writer)} of rank {writer.rank} wrote them")]
    ranks = sorted({x.check.rank for x in ms})
    out.error("E033", "postcondition does not hold", m.check.span, label,
              secondary=secondary, notes=[*notes, f"fails {ranks_note(ranks, instance.nranks)}"],
              help="every element must receive each contribution exactly once: check the "
                   "`srcs` of the `reduce` that wrote them and what it waits for")


def _report_rounded(ms: list[Mismatch], out: Findings, instance: Instance) -> None:
    """A float sum whose contributions are right but that was rounded to f16/bf16 more
    often than `ensure` allows (`ccogen.ir.rounding`)."""
    m = ms[0]
    r = m.rounded
    assert r is not None and m.check.reduction is not None
    dtype = m.check.reduction.dtype
    left = m.check.left
    width = instance.dtype(left.window).size
    first, last = m.start // width, (m.stop - 1) // width
    to = " and ".join(rounding.type_names(r.types))
    times = "once" if r.count == 1 else f"{r.count} times"
    allows = f"one rounding to {dtype}" if rounding.type_bit(dtype) else \
        "no rounding to f16 or bf16"
    label = (f"elements {first}..{last} of `{left.window}` on rank {left.rank} are rounded "
             f"to {to} {times}")
    by_line: dict[Span | None, list[int]] = {}  # the reduces that rounded, per line
    for op in r.chain:
        by_line.setdefault(op.span, []).append(op.rank)
    secondary = [(span, f"this `reduce` stores a sum in {r.chain[0].dtype}: "
                        f"{len(ranks)} of the {r.count} roundings ("
                        f"{ranks_note(sorted(set(ranks)), instance.nranks)})")
                 for span, ranks in list(by_line.items())[:3]]
    notes = [f"every `reduce` into an f16/bf16 region rounds, and a partial sum stored "
             "there and summed again (a ring or a tree, one `reduce` per hop) is rounded "
             f"again: `ensure` allows {allows} of the result (the sum accumulated in f32, "
             "rounded once when stored), and the error of each further rounding grows with "
             "the partial sum, beyond what the comparison tolerates",
             "counted symbolically along the chain of reduces, copies and transfers that "
             "computed the elements; `ccogen simulate` counts the same roundings",
             f"fails {ranks_note(sorted({x.check.rank for x in ms}), instance.nranks)}"]
    out.error("E033", "postcondition does not hold: the sum is rounded "
              f"{times}", m.check.span, label, secondary=secondary, notes=notes,
              help="keep the running sums in f32: `reduce` into an f32 window or buffer (its "
                   f"sources may be {dtype}: widened exactly), send the f32 partial sums, "
                   f"and round once at the end with `reduce(dst=<{dtype} region>, "
                   "srcs=[<f32 region>])`")


__all__ = ["CheckPostcondition", "decidable", "origin", "symbolic_memory"]
