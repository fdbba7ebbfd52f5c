"""Bytes an instance moves across links in one epoch, from its unrolled ops.

Every `put` and `get` whose source and destination lie on different ranks moves
`dst.size` bytes from `src.rank` to `dst.rank` (a get's data flows from the remote rank
to the issuer); local `copy`s and transfers within a rank cross no link.  Aggregated puts
count too (they move their bytes at the `commit`).  A `reduce` that loads a peer's
region (`x@p`) moves it from that peer to the issuer; a `signal` carries no data.

The benchmark's bandwidth is *per direction*: the bytes of the busiest directed link
(`Traffic.per_direction`) over the time of one epoch, the figure a one-way peer copy of
the same size is compared with.  The engine's collective of the same shape moves the same
bytes, so `per_peer` (each rank's received bytes / (nranks - 1)) sizes it: the block of an
all-to-all, the chunk of an all-gather.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance


@dataclass(frozen=True)
class Traffic:
    """Per-epoch bytes of each directed link `(src, dst)`, sorted; links with no bytes omitted."""

    nranks: int
    links: tuple[tuple[int, int, int], ...]  # (src, dst, bytes)

    @property
    def per_direction(self) -> int:
        """Bytes of the busiest directed link (0 when nothing crosses a link)."""
        return max((b for _, _, b in self.links), default=0)

    @property
    def total(self) -> int:
        return sum(b for _, _, b in self.links)

    @property
    def bidirectional(self) -> bool:
        """Some link carries bytes both ways (a bidirectional peer copy is its ceiling)."""
        moved = {(s, d) for s, d, _ in self.links}
        return any((d, s) in moved for s, d in moved)

    def received(self, rank: int) -> int:
        return sum(b for _, d, b in self.links if d == rank)

    def sent(self, rank: int) -> int:
        return sum(b for s, _, b in self.links if s == rank)

    @property
    def per_peer(self) -> int:
        """The most bytes any rank receives, per peer: the message size of the equivalent
        all-to-all (`block`) or all-gather (`chunk`)."""
        if self.nranks < 2:
            return 0
        return max(self.received(r) for r in range(self.nranks)) // (self.nranks - 1)


def traffic_of(instance: Instance) -> Traffic:
    """The link bytes of one epoch of `instance` (see the module docstring)."""
    moved: dict[tuple[int, int], int] = defaultdict(int)
    for ops in instance.ranks:
        for op in ops:
            if not op.kind.traits.queued or op.src is None or op.dst is None:
                continue
            if op.src.rank != op.dst.rank:
                moved[(op.src.rank, op.dst.rank)] += op.dst.size
        for op in ops:
            if op.kind.traits.reduces:
                for src in op.srcs:
                    if src.rank != op.rank:
                        moved[(src.rank, op.rank)] += src.size
    links = tuple((s, d, b) for (s, d), b in sorted(moved.items()) if b)
    return Traffic(instance.nranks, links)


__all__ = ["Traffic", "traffic_of"]
