"""Spread the rows of a run-time `warps`/`lanes` block over every warp of the group.

`warps p in ranks(): for t in range(tokens): put(p, <row t, length 0 or hidden>)`
lowers (codegen.plan) to a fork in which warp p of the group's first CTA runs its
`tokens` rows one after the other, each followed by a warp sync, then its signal: one
warp moves everything that goes to p.  This pass lowers such a fork the way DeepEP-class
kernels are written instead: a *persistent* loop in which every warp of every CTA of the
group takes items by grid stride, an item being (branch b, iteration t, chunk k): the
k-th `CHUNK_BYTES` of the t-th row of branch b (the fork's warp or lane b).  A row whose
run-time length is 0 (a token not routed there) costs the loads of its length and no
sync; rows are stored with 16-byte vectors when both ends and the length are multiples
of 16 (`ccogen_copy_chunk_warp`, templates/common/_spread.j2).

Ordering.  The fork's trailing signals (`signal(p, queue=)` after the rows to p, or a
put's `signal="remote"`) become per-CTA signals (`csignal`): every CTA, once its threads
met (`ctasync`: its warps' stores are done), adds its share on the slot, and
codegen.ctasplit's scales make the receiver wait for the count times the CTA count
(times the epoch: the slot is monotonic, never reset, so back-to-back launches and CUDA
graph replay need nothing from the host).  A CTA's signal is a release at system scope,
cumulative over its `__syncthreads`, so p sees the slot complete only once every CTA's
rows to p are visible; NVSHMEM rows to a peer without a pointer are completed by the
warp's `nvshmem_quiet` (`ccogen_copy_warp`) before the CTA meets.  The fork's join stays
a group barrier: the ops after it see every row, as after the fork.

When (conservative; otherwise the fork is printed as before):
- every branch is a run of items `comment*, copy, sync` followed by a tail of comments,
  syncs and signals to slots (no counter: counted bytes are added once by the leader),
  no wait, reduce, LL put or other op;
- at least one copy has run-time bounds (the rows of a run-time loop);
- every branch has the same number of items, and its items fold into one device loop
  (codegen.reroll) or there is one item;
- the items are independent: the footprints (the static bounds: what a row may touch)
  of every item's destination are pairwise disjoint, and no source overlaps a
  destination, so any order of the items, on any warps, writes what the fork did.

Before the fork every CTA of the group must be ordered after the previous ops as CTA 0
was: codegen.ctasplit keeps a group barrier before a fork when copies are pending,
waits are spun by every CTA (`cwait`), and the leader-only ones (`rtwait`, `reset`)
keep their barrier (docs/codegen.md, "Spread rows").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ccogen.codegen.loops import fold
from ccogen.codegen.model import Segment
from ccogen.codegen.reroll import reroll
from ccogen.codegen.steps import BUFFER0, LOCAL, RT_PEER, Spread, Step, StepKind

CHUNK_BYTES = 8 << 10  # an item's bytes: two rounds of a warp's 8 x 16-byte loads per lane
TAIL = frozenset({StepKind.COMMENT, StepKind.SYNC, StepKind.SIGNAL})


@dataclass(frozen=True)
class SpreadPlan:
    """How one fork is spread: the step that replaces it and its item count."""

    step: Step
    tail: tuple[Step, ...]  # comments and per-CTA signals, after the CTA meets

    @property
    def items(self) -> int:
        assert self.step.spread is not None
        return self.step.spread.items


def _is_item(s: Step, after: Step) -> bool:
    """A row of a branch: a copy step, then its sync."""
    return s.kind is StepKind.COPY and after.kind is StepKind.SYNC


def _items(steps: Sequence[Step], counters: frozenset[int]) -> tuple[list[list[Step]],
                                                                        list[Step]] | None:
    """(items, tail) of a branch: items `comment*, copy, sync`, then the tail."""
    items: list[list[Step]] = []
    i = 0
    while True:
        j = i
        while j < len(steps) and steps[j].kind is StepKind.COMMENT:
            j += 1
        if j + 1 < len(steps) and _is_item(steps[j], steps[j + 1]):
            items.append(list(steps[i:j + 1]))
            i = j + 2
            continue
        break
    tail = list(steps[i:])
    if any(s.kind not in TAIL or (s.kind is StepKind.SIGNAL and s.off in counters) for s in tail):
        return None
    return items, tail


def _disjoint(copies: Sequence[Step]) -> bool:
    """No two destinations overlap, and no source overlaps a destination (footprints;
    a run-time peer, `RT_PEER`, may be any rank: then every rank is compared as one)."""
    blind = any(RT_PEER in (s.dst_peer, s.src_peer) for s in copies)
    if blind:
        copies = [replace(s, dst_peer=0 if s.dst_peer >= LOCAL else s.dst_peer,
                          src_peer=0 if s.src_peer >= LOCAL else s.src_peer) for s in copies]
    dsts = sorted((s.dst_peer, s.dst_off, s.dst_off + s.nbytes) for s in copies if s.nbytes)
    for (pa, _, hi), (pb, lo, _) in itertools.pairwise(dsts):
        if pa == pb and lo < hi:
            return False
    by_peer: dict[int, list[tuple[int, int]]] = {}
    for peer, lo, hi in dsts:
        by_peer.setdefault(peer, []).append((lo, hi))
    for s in copies:
        for lo, hi in by_peer.get(s.src_peer, ()):
            if s.nbytes and s.src_off < hi and lo < s.src_off + s.nbytes:
                return False
    return True


def plan_fork(seg: Segment, counters: frozenset[int]) -> SpreadPlan | None:
    """The spread of fork `seg`, or None where it must stay a fork (module doc)."""
    if not seg.branches:
        return None
    cases: list[tuple[Step, ...]] = []
    tail: list[Step] = []
    copies: list[Step] = []
    count: int | None = None
    for br in seg.branches:
        parsed = _items(br.steps, counters)
        if parsed is None:
            return None
        items, rest = parsed
        # a loop the checker sampled: its three iterations stand for all (codegen.loops)
        rows = sum(item[-1].trip[2] - 2 if item[-1].trip is not None and item[-1].trip[1] == 1
                   else 1 for item in items)
        if count is None:
            count = rows
        if rows != count or not items:
            return None
        copies += [s for item in items for s in item if s.kind is StepKind.COPY]
        if rows == 1:
            body: tuple[Step, ...] = tuple(items[0])
        else:
            rolled = reroll(fold([s for item in items for s in item], roll=True))
            if len(rolled) != 1 or rolled[0].kind is not StepKind.LOOP or rolled[0].value != count:
                return None
            body = rolled[0].body
        cases.append(tuple(replace(s, kind=StepKind.CHUNK, value=CHUNK_BYTES)
                           if s.kind is StepKind.COPY else s for s in body))
        tail += [replace(s, kind=StepKind.CSIGNAL) if s.kind is StepKind.SIGNAL else s
                 for s in rest if s.kind is not StepKind.SYNC]
    assert count is not None
    if not any(s.rt for s in copies) or not _disjoint(copies):
        return None
    largest = max(s.nbytes for s in copies)
    chunks = max(1, -(-largest // CHUNK_BYTES))
    first = next((s for case in cases for s in case if s.kind is StepKind.COMMENT), None)
    text = first.text.split(": ", 1)[0] if first is not None else "//"
    spread = Spread(branches=len(cases), iterations=count, chunks=chunks,
                    chunk_bytes=CHUNK_BYTES, cases=tuple(cases))
    step = Step(StepKind.SPREAD, line=first.line if first is not None else 0, spread=spread,
                text=f"{text}: {len(cases)} {seg.branches[0].scope}s x {count} rows x "
                     f"{chunks} chunk(s) of {CHUNK_BYTES} B, spread over every warp of the "
                     "group (codegen/spread.py)")
    return SpreadPlan(step, tuple(tail))


AFTER_LAST = frozenset({StepKind.COMMENT, StepKind.CTASYNC, StepKind.QUIET})


def _reduce_row(loop: Step) -> tuple[Step, ...] | None:
    """The body of a group `loop` of one `reduce` a row, without its CTA meet, or None:
    comments and one `reduce` into a buffer of this rank (`dst_peer` a buffer) at
    `a + b * t` (its typed `Affine`, codegen.reroll) with b at least the row's footprint
    (rows pairwise disjoint), reading no source in that buffer (no row reads what another
    writes; a source whose peer is a run-time rank is none)."""
    if (loop.kind is not StepKind.LOOP or loop.var != "t" or loop.value < 2
            or any(key == "trips" for key, _ in loop.rt)):
        return None
    body = list(loop.body)
    if body and body[-1].kind is StepKind.CTASYNC:
        body.pop()
    reduces = [b for b in body if b.kind is StepKind.REDUCE]
    if len(reduces) != 1 or any(b.kind not in (StepKind.COMMENT, StepKind.REDUCE) for b in body):
        return None
    (red,) = reduces
    assert red.reduction is not None
    row = red.moving("dst_off")
    if (red.dst_peer >= BUFFER0 or row is None or row.alt or row.coef <= 0
            or row.coef < red.nbytes or any(peer == red.dst_peer for peer in _static_peers(red))):
        return None
    return tuple(body)


def _static_peers(s: Step) -> list[int]:
    """The peers of a `reduce`'s sources that are known here (no `rt` text or `Affine`
    replaces them: those are ranks, never a buffer)."""
    assert s.reduction is not None
    moved = {key for key, _ in (*s.rt, *s.affine)}
    return [peer for i, (peer, _) in enumerate(s.reduction.srcs) if f"srcpeer{i}" not in moved]


def _after_group_sync(steps: Sequence[Step], j: int) -> bool:
    """Whether a group sync comes right before `steps[j]` (comments aside).  The split
    loop read each source row's CTA slice, which that CTA wrote (a `__syncthreads` was
    enough); a warp reducing a whole row reads the other CTAs' slices too, so every write
    of a source must be ordered before it by a barrier of the group."""
    for s in reversed(steps[:j]):
        if s.kind is not StepKind.COMMENT:
            return s.kind is StepKind.SYNC
    return False


def spread_reduce_rows(segments: Sequence[Segment]) -> list[Segment]:
    """The last `for t in range(...): reduce(row t)` loop of a group program spread over
    every warp of the group, one row a warp by grid stride (as the forks above), instead
    of every CTA taking its 1/ctas slice of each row in turn with a `__syncthreads`
    between rows: at 4096 rows x 32 CTAs, 4096 dependent steps per CTA became 8 rows per
    warp (docs/performance.md, "moe_combine's kernel speed").

    When (conservative; otherwise the loop is printed as before): the rows are
    independent (`_reduce_row`: disjoint destinations in a buffer no row reads), a group
    sync comes right before the loop (`_after_group_sync`), the
    body has no sync, wait or signal, and only comments, CTA meets and `quiet` follow the
    loop to the end of the program: the kernel's end orders its stores for the next
    launch and the host, as it did the loop's last row (`quiet` completes puts, never a
    store to a buffer)."""
    out = list(segments)
    for i in range(len(out) - 1, -1, -1):
        seg = out[i]
        if seg.branches:
            return out
        steps = list(seg.steps)
        for j in range(len(steps) - 1, -1, -1):
            s = steps[j]
            body = _reduce_row(s)
            if body is not None and not _after_group_sync(steps, j):
                return out  # its sources may be slices other CTAs wrote: keep the split
            if body is not None:
                first = next((b for b in body if b.kind is StepKind.COMMENT), None)
                text = first.text.split(": ", 1)[0] if first is not None else "//"
                spread = Spread(branches=1, iterations=s.value, chunks=1,
                                chunk_bytes=s.body[0].nbytes, cases=(body,))
                steps[j] = Step(StepKind.SPREAD, line=s.line, spread=spread,
                                text=f"{text}: 1 reduce x {s.value} rows, one row a warp, "
                                     "spread over every warp of the group "
                                     "(codegen/spread.py)")
                out[i] = Segment(steps=tuple(steps))
                return out
            if s.kind not in AFTER_LAST:
                return out
    return out


def spread_ctas(items: int, warps_per_cta: int, cap: int) -> int:
    """CTAs for `items` items: one item per warp at most, within `cap` (the budget)."""
    return max(1, min(cap, -(-items // max(1, warps_per_cta))))


def apply(segments: Sequence[Segment], plans: dict[int, SpreadPlan]) -> list[Segment]:
    """`segments` with fork i replaced by plans[i]: the spread loop, the CTA meets, each
    CTA signals, then the fork's join (a group barrier)."""
    out = []
    for i, seg in enumerate(segments):
        plan = plans.get(i)
        if plan is None:
            out.append(seg)
            continue
        assert seg.branches and seg.join is not None
        steps: list[Step] = [plan.step]
        if any(s.kind is StepKind.CSIGNAL for s in plan.tail):
            steps.append(Step(StepKind.CTASYNC))
            steps += plan.tail
        steps.append(seg.join)
        out.append(Segment(steps=tuple(steps)))
    return out


__all__ = ["CHUNK_BYTES", "SpreadPlan", "apply", "plan_fork", "spread_ctas",
           "spread_reduce_rows"]
