"""Aggregate batches outside 8-16 ops per commit (W105)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import Findings, cost_caps, first_spans, keyword_span, plural
from ccogen.passes.base import Pass, PassContext
from ccogen.passes.check_sdma_queues import batch_units, ring_units
from ccogen.targets.base import Support


@dataclass(frozen=True)
class WarnAggregateBatch(Pass):
    """A `commit` that rings fewer or more aggregate ops than the doorbell sweet spot.

    Requires: an instance (queues assigned).
    Guarantees: nothing; a check.
    Emits: W105 at a `commit(peer, queue=q)` whose batch, the `aggregate=True`
    puts/gets to that `(peer, q)` posted on the rank since the previous commit there,
    holds outside `cost.doorbell_batch` ops (8-16 on MORI SDMA); an empty batch is
    not counted.  Only where aggregation is a native doorbell with a known sweet spot.
    """

    name: ClassVar[str] = "warn-aggregate-batch"
    codes: ClassVar[tuple[str, ...]] = ("W105",)

    def run(self, ctx: PassContext) -> None:
        caps = cost_caps(ctx)
        sweet = caps.cost.doorbell_batch
        if caps.aggregate is not Support.NATIVE or sweet is None:
            return
        findings = Findings(ctx)
        ring = ring_units(ctx)
        for ops in ctx.instance.ranks:
            for commit, batch in _batches(ops):
                if ring is not None and batch_units(batch) > ring:
                    continue  # it overflows the SDMA ring: E029, an error, says so
                if batch and not sweet[0] <= len(batch) <= sweet[1]:
                    _report(commit, batch, sweet, findings)
        findings.flush()


def _batches(ops: Sequence[OpInst]) -> list[tuple[OpInst, list[OpInst]]]:
    pending: dict[tuple[int | None, int | None], list[OpInst]] = defaultdict(list)
    out: list[tuple[OpInst, list[OpInst]]] = []
    for op in ops:
        key = (op.peer, op.queue)
        if op.kind.traits.queued and op.aggregate:
            pending[key].append(op)
        elif op.kind is OpKind.COMMIT:
            out.append((op, pending.pop(key, [])))
    return out


def _report(commit: OpInst, batch: list[OpInst], sweet: tuple[int, int],
            findings: Findings) -> None:
    n = len(batch)
    low, high = sweet
    few = n < low
    notes = [f"aggregation amortises one doorbell over the batch; the MORI SDMA measurements "
             f"put the sweet spot at {low}-{high} ops per commit"]
    if n == 1:
        notes.append("with one op per commit `aggregate=True` saves nothing; doorbells are "
                     "per (peer, queue), so one `commit` cannot ring ops to several peers")
    elif not few:
        notes.append("the engine starts nothing of the batch until its `commit`")
    help = (f"post {low}-{high} aggregate ops to the same (peer, queue) before each `commit`, "
            "or drop `aggregate=True` and the `commit`" if few else
            f"`commit` every {high} ops inside the loop (e.g. `if i % {high} == {high - 1}:`)")
    findings.add(error(
        "W105", f"`commit` rings {'fewer than' if few else 'more than'} "
        f"{low if few else high} aggregate ops",
        commit.span, f"rings {plural(n, 'aggregate op')} on queue {commit.queue} of rank "
        f"{commit.peer}",
        secondary=[(keyword_span(s, "aggregate"), "posted without a doorbell")
                   for s in first_spans(batch, 2)],
        notes=tuple(notes), help=help), commit.rank)


__all__ = ["WarnAggregateBatch"]
