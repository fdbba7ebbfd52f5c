"""Transfer shapes the performance warnings share: batches, contiguous runs, pipelines.

Not a pass.  Definitions (docs/checker.md, "performance warnings"):

- The *perf issuer* of an op is the hardware warp that posts it, `(block, warp_of)`;
  a block leader is `(block, None)`.  Lanes of one warp post together, so they are
  one perf issuer.
- A *batch* is what one perf issuer posts to one peer between two of its waits: a
  `wait_signal`, `wait_count` or `barrier` by an issuer starts that issuer's next
  round, and lanes' k-th rounds are batched together.  Ops across a wait cannot be
  merged or packed: the later ones may depend on what the wait observed.
- A *run* is a set of ops of one batch whose `src` ranges tile one contiguous range
  and whose `dst` ranges tile one contiguous range in the same layout (the same
  `dst.start - src.start`): together they are one transfer.
- A set of puts is *consumed one by one* when each is signalled to the receiver
  (`signal="remote"`/`"both"` or `count=`) and the receiver reads one of them (as the
  `src` of a `copy` or `put`) between its first and last wait for them: a pipeline,
  which merging or packing would serialise.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence

from ccogen.ir.instance import Instance, Issuer, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import fmt_bytes

PerfIssuer = tuple[int, int | None]
BatchKey = tuple[int, int, PerfIssuer, int | None, OpKind, int]


def perf_issuer(issuer: Issuer) -> PerfIssuer:
    return (issuer.block, issuer.warp_of)


def batches(ops: Sequence[OpInst], kinds: Collection[OpKind]) -> dict[BatchKey, list[OpInst]]:
    """The ops of `kinds` on one rank, grouped by (rank, kernel, perf issuer, peer, kind, round).

    A round ends at each op that waits for other ranks (`synchronises`)."""
    rounds: dict[tuple[int, int], int] = defaultdict(int)  # (kernel, issuer number)
    out: dict[BatchKey, list[OpInst]] = defaultdict(list)
    numbers: dict[Issuer, int] = {}
    by_id: dict[int, tuple[int, PerfIssuer]] = {}  # the same issuer object: no hashing
    for op in ops:
        found = by_id.get(id(op.issuer))
        if found is None:
            n = numbers.setdefault(op.issuer, len(numbers))
            found = by_id[id(op.issuer)] = (n, perf_issuer(op.issuer))
        key = (op.kernel, found[0])
        if op.kind.traits.synchronises:
            rounds[key] += 1
        elif op.kind in kinds and op.dst is not None and op.src is not None \
                and op.dst.runtime is None and op.src.runtime is None:  # run-time: no sizes
            out[(op.rank, op.kernel, found[1], op.peer, op.kind, rounds[key])].extend(
                op.expanded())  # a sampled loop's ops: all of them
    return out


def runs(pieces: Iterable[OpInst]) -> list[list[OpInst]]:
    """Maximal contiguous runs (singletons included), each sorted by source offset."""
    layouts: dict[tuple[object, ...], list[OpInst]] = defaultdict(list)
    for op in pieces:
        assert op.src is not None and op.dst is not None
        layouts[(op.src.window, op.src.rank, op.dst.window, op.dst.rank,
                 op.dst.start - op.src.start)].append(op)
    out: list[list[OpInst]] = []
    for group in layouts.values():
        group.sort(key=lambda op: op.src.start)  # type: ignore[union-attr]
        current = [group[0]]
        for op in group[1:]:
            if op.src.start == current[-1].src.stop:  # type: ignore[union-attr]
                current.append(op)
            else:
                out.append(current)
                current = [op]
        out.append(current)
    return out


def nbytes(op: OpInst) -> int:
    """The byte count of a put/get/copy."""
    assert op.dst is not None
    return op.dst.size


def span_of(run: Sequence[OpInst]) -> tuple[RegionInst, RegionInst]:
    """The merged (dst, src) regions of a run."""
    first, last = run[0], run[-1]
    assert first.dst and first.src and last.dst and last.src
    dst = RegionInst(first.dst.window, first.dst.start, last.dst.stop, first.dst.rank)
    src = RegionInst(first.src.window, first.src.start, last.src.stop, first.src.rank)
    return dst, src


class Pipelines:
    """Answers "are these puts consumed one by one" for one instance, indexing each
    receiving rank once: its waits per (source, queue) and per counter, and its reads."""

    def __init__(self, instance: Instance) -> None:
        self._instance = instance
        self._index: dict[int, _Receiver] = {}

    def consumed_one_by_one(self, pieces: Sequence[OpInst]) -> bool:
        """Whether the receiver waits for these puts one at a time and reads between the waits."""
        if any(op.kind is not OpKind.PUT or not (op.signal.remote or op.counter) for op in pieces):
            return False
        receiver = pieces[0].peer
        if receiver is None:
            return False
        index = self._index.get(receiver)
        if index is None:
            index = self._index[receiver] = _Receiver(self._instance.ranks[receiver])
        return index.reads_between_waits(pieces)


class _Receiver:
    def __init__(self, ops: Sequence[OpInst]) -> None:
        self.waits: dict[object, list[int]] = defaultdict(list)
        self.reads: list[OpInst] = []
        for op in ops:
            if op.kind is OpKind.WAIT_SIGNAL:
                self.waits[("signal", op.peer, op.queue)].append(op.index)
            elif op.kind is OpKind.WAIT_COUNT:
                self.waits[("count", op.counter)].append(op.index)
            elif op.kind.traits.transfer and not op.kind.traits.reads_remote and op.src is not None:
                self.reads.append(op)
        self._at = [op.index for op in self.reads]

    def reads_between_waits(self, pieces: Sequence[OpInst]) -> bool:
        keys: set[tuple[object, ...]] = {
            ("signal", op.rank, op.queue) for op in pieces if op.signal.remote}
        keys |= {("count", op.counter) for op in pieces if op.counter}
        lists = [self.waits[k] for k in keys if self.waits.get(k)]
        if sum(len(w) for w in lists) < 2:
            return False
        first, last = min(w[0] for w in lists), max(w[-1] for w in lists)
        landed = [op.dst for op in pieces if op.dst is not None]
        lo, hi = bisect.bisect_right(self._at, first), bisect.bisect_left(self._at, last)
        return any(_reads(op, landed) for op in self.reads[lo:hi])


def _reads(op: OpInst, regions: list[RegionInst]) -> bool:
    return op.src is not None and any(op.src.overlaps(r) for r in regions)


def region_dsl(region: RegionInst) -> str:
    """`recv[0 : 8 MiB]`: a region as it could be written in `.cco`."""
    def bound(n: int) -> str:
        text = fmt_bytes(n)
        return str(n) if n == 0 or text.endswith(" B") else text
    return f"{region.window}[{bound(region.start)} : {bound(region.stop)}]"


__all__ = ["BatchKey", "PerfIssuer", "Pipelines", "batches", "nbytes", "perf_issuer",
           "region_dsl", "runs", "span_of"]
