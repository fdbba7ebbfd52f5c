"""Many small copies to one peer (W100)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import Findings, cost_caps, first_spans, fmt_bytes, plural
from ccogen.passes._transfers import Pipelines, batches, nbytes, runs
from ccogen.passes.base import Pass, PassContext
from ccogen.targets.base import CostModel

MIN_SMALL_COPIES = 8  # below this, packing saves less than one dispatch (docs/checker.md)


@dataclass(frozen=True)
class WarnSmallCopies(Pass):
    """Many small puts from one issuer to one peer that could be packed and sent once.

    Requires: an instance.
    Guarantees: nothing; a check.
    Emits: W100 when one batch of puts (one warp or block to one peer, between its
    waits) holds at least `MIN_SMALL_COPIES` pieces under the target's
    `small_op_bytes` (256 KiB on MORI SDMA), counted after merging adjacent pieces
    (those are W101), unless the receiver consumes them one by one.  Silent where
    the target has no per-packet engine cost (`cost.per_packet_us` unknown).
    """

    name: ClassVar[str] = "warn-small-copies"
    codes: ClassVar[tuple[str, ...]] = ("W100",)

    def run(self, ctx: PassContext) -> None:
        cost = cost_caps(ctx).cost
        if cost.per_packet_us is None or cost.small_op_bytes is None:
            return
        findings = Findings(ctx)
        pipelines = Pipelines(ctx.instance)
        for ops in ctx.instance.ranks:
            for batch in batches(ops, (OpKind.PUT,)).values():
                small = [run for run in runs(batch)
                         if sum(map(nbytes, run)) < cost.small_op_bytes]
                if len(small) >= MIN_SMALL_COPIES and not pipelines.consumed_one_by_one(batch):
                    _report([run[0] for run in small], cost, findings)
        findings.flush()


def _report(pieces: list[OpInst], cost: CostModel, findings: Findings) -> None:
    assert cost.per_packet_us is not None and cost.small_op_bytes is not None
    n = len(pieces)
    sizes = {nbytes(op) for op in pieces}
    total = sum(map(nbytes, pieces))
    each = fmt_bytes(sizes.pop()) + " each" if len(sizes) == 1 else "under " + fmt_bytes(
        cost.small_op_bytes)
    spans = first_spans(pieces, 3)
    first = pieces[0]
    one = cost.op_time_us(total)
    findings.add(error(
        "W100", "many small puts to one peer: pack them locally and send once", spans[0],
        f"{plural(n, 'put')} of {each} to rank {first.peer} ({fmt_bytes(total)} in all)",
        secondary=[(s, "also part of the batch") for s in spans[1:]],
        notes=(f"the copy engine costs about {cost.per_packet_us:g} µs per packet whatever its "
               f"size: these {n} puts take ~{n * cost.per_packet_us:.0f} µs of engine time, "
               f"one put of {fmt_bytes(total)} ~{one:.0f} µs, and packing it first ~"
               f"{_pack_us(total, cost):.2g} µs more ({cost.source}: 64 x 4 KB measured "
               "138 µs against 11 µs for one 256 KB copy)",),
        help="`copy` the pieces into a staging window, then `put` it once "
             "(protocols/pack_then_send.cco); scatter directly only for pieces of ~1 MiB or "
             "more"), first.rank)


def _pack_us(total: int, cost: CostModel) -> float:
    """A local gather of `total` bytes on the compute units."""
    return total / ((cost.local_gather_gbps or 1.0) * 1e3)


__all__ = ["MIN_SMALL_COPIES", "WarnSmallCopies"]
