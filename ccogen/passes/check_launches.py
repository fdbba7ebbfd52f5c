"""Reads of a peer's window across two back-to-back launches (E031, E032).

Language v2, section 6: a rank may start launch N+1 while its peers are still in
launch N, and between its own two launches each rank's caller writes its inputs
(the windows whose initial contents `ensure` names with `init(...)`).  A `reduce`
that loads a peer's bytes (`x@p`) must therefore be ordered

* after every write of those bytes that may come before it: the peer's caller
  writing this launch's input, and the ops of the previous launch (E032); and
* before every write that may come after it: the peer's caller writing the next
  launch's input, and the ops of the next launch (E031).

The happens-before graph describes one launch; two launches are ordered through the
ranks' programs: an event A of launch N precedes an event B of launch N+1 when, for
some rank q, A precedes the end of q's program in launch N and B follows the start
of q's program (or is q's own) in launch N+1.  The caller of rank p works between
the end of p's launch N and the start of its launch N+1.

Requires an instance.  Guarantees, when it reports nothing: every load of a peer's
window by a `reduce` sees this launch's bytes and is done before they change, in
every interleaving of two consecutive launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import analysis_of
from ccogen.analysis.hb_graph import HBGraph
from ccogen.analysis.races import Access, accesses, check_regions
from ccogen.ir.instance import Instance, OpInst, RegionInst
from ccogen.passes._report import Findings, name, region
from ccogen.passes.base import Pass, PassContext


@dataclass(frozen=True)
class CheckLaunches(Pass):
    """Loads of a peer's bytes stay between that data's writes across launches."""

    name: ClassVar[str] = "check-launches"
    codes: ClassVar[tuple[str, ...]] = ("E031", "E032")

    def run(self, ctx: PassContext) -> None:
        instance = ctx.instance
        loads = [(op, s) for ops in instance.ranks for op in ops if op.kind.traits.reduces
                 for s in op.srcs if s.rank != op.rank]
        if not loads:
            return
        g = analysis_of(ctx).graph
        order = _Launches(g)
        inputs = caller_inputs(instance)
        _, writes = accesses(g)
        out = Findings(ctx)
        for op, src in loads:
            read = g.issue(op.rank, op.index)
            if not g.executes(read):
                continue
            if any(i.overlaps(src) for i in inputs):
                _caller(order, op, src, read, out)
            for w in writes:
                if w.op is not None and w.op is not op and w.region.overlaps(src):
                    _writer(order, op, src, read, w, out)
        out.flush()


def caller_inputs(instance: Instance) -> list[RegionInst]:
    """What the callers write before each launch: every region `ensure` reads as `init`."""
    return [r for c in instance.checks for r, init in check_regions(c) if init]


class _Launches:
    """Order between an event of launch N and one of launch N+1 (module docstring)."""

    def __init__(self, g: HBGraph) -> None:
        self.g = g
        self.starts: list[list[int]] = [
            [g.issue(op.rank, op.index) for op in ops if not op.preds]
            for ops in g.instance.ranks]

    def after_start(self, rank: int, e: int) -> bool:
        """`e` (of launch N+1) follows the start of `rank`'s program in that launch."""
        op = self.g.op(e)
        if op is not None and op.rank == rank:
            return True
        return any(self.g.hb(s, e) for s in self.starts[rank])

    def before_end(self, e: int, rank: int) -> bool:
        """`e` (of launch N) precedes the end of `rank`'s program in that launch."""
        return self.g.hb(e, self.g.end(rank))

    def precedes(self, a: int, b: int) -> bool:
        """Event `a` of launch N happens before event `b` of launch N+1."""
        return any(self.before_end(a, q) and self.after_start(q, b)
                   for q in range(self.g.instance.nranks))


def _caller(order: _Launches, op: OpInst, src: RegionInst, read: int, out: Findings) -> None:
    peer = src.rank
    if not order.after_start(peer, read):
        out.error("E032", "a `reduce` may read a peer's input before the peer's caller has "
                  "written it", op.span, f"reads {region(src)} of rank {peer}", rank=op.rank,
                  notes=[f"launches run back to back: rank {op.rank} may start launch N+1 and "
                         f"read while rank {peer} is still in launch N, before rank {peer}'s "
                         "caller writes the input of launch N+1"],
                  help="start the kernel with `barrier()` (every caller is done with its "
                       "inputs by then), or wait for a signal the peer sends when it starts")
    if not order.before_end(read, peer):
        out.error("E031", "a peer's caller may overwrite its input while a `reduce` still "
                  "reads it", op.span, f"reads {region(src)} of rank {peer}", rank=op.rank,
                  notes=[f"launches run back to back: rank {peer} may finish launch N and its "
                         f"caller write the input of launch N+1 while rank {op.rank}'s "
                         "`reduce` of launch N is still reading it"],
                  help="end with `barrier()` after the `reduce`, or send the peer a credit "
                       "(`signal`) after the `reduce` and have it wait for the credit before "
                       "its launch ends")


def _writer(order: _Launches, op: OpInst, src: RegionInst, read: int, w: Access,
            out: Findings) -> None:
    writer = w.op
    assert writer is not None
    peer = src.rank
    if not order.precedes(w.event, read):
        out.error("E032", "a `reduce` of the next launch may read a peer's bytes before "
                  "this launch's write of them", op.span, f"reads {region(src)} of rank {peer}",
                  rank=op.rank, secondary=[(writer.span, f"{name(writer)} of rank "
                                            f"{writer.rank} writes them in launch N")],
                  notes=["launches run back to back: nothing orders this write in launch N "
                         "before the read in launch N+1"],
                  help="order the write before the read with a signal and a wait, or a "
                       "`barrier()`")
    if not order.precedes(read, w.event):
        out.error("E031", "a peer may overwrite bytes in the next launch while a `reduce` "
                  "still reads them", writer.span, f"{name(writer)} writes "
                  f"{region(w.region)} of rank {peer}", rank=writer.rank,
                  secondary=[(op.span, f"rank {op.rank} reads them here in launch N")],
                  notes=[f"launches run back to back: rank {writer.rank} may reach this write "
                         f"of launch N+1 while rank {op.rank}'s `reduce` of launch N still "
                         "reads"],
                  help="make the writer wait for a credit (`signal`) that the reader sends "
                       "after its `reduce`, or end the launch with `barrier()`")


__all__ = ["CheckLaunches", "caller_inputs"]
