"""Split a logical block's group-scope steps over its CTAs (CUDA SM targets).

A logical block that runs on a group of C > 1 CTAs used to meet across CTAs (a
device-memory barrier) before every signal and after every wait: the leader signalled
once for the whole group and spun alone.  Each such barrier costs a round trip through
L2 per CTA.  This pass removes the ones the protocol does not need:

- a **signal** to a slot becomes `csignal`: thread 0 of *every* CTA adds `v * S / C`
  after its own CTA's stores (a `__syncthreads` orders them), where S is the slot's
  scale (below).  The receiver's wait sees the slot reach `count * S` only once every
  CTA of every signalling group has added, i.e. after all of their stores — the same
  release/acquire argument as before, CTA by CTA;
- a **wait** becomes `cwait`: thread 0 of every CTA spins on the word itself, then its
  CTA meets (`__syncthreads`); no CTA needs another to tell it;
- a group **sync** becomes `ctasync` (its CTA only) unless something still needs the
  whole group to have arrived:
    * a copy of the group since the last group barrier that conflicts with a copy
      between this sync and the next one (the same bytes of the same rank, one of them
      written): one CTA may read or overwrite bytes another CTA has not finished with,
      since copies of different shapes split differently over the CTAs.  Conflicts
      with later copies are judged at the later syncs, against every copy since the
      last barrier that was kept; a fork next counts as a conflict;
    * a leader-only step next: a signal to a counter (counted writes add the group's
      byte count once) or a `reset` (no CTA may still be waiting on the word), or a
      `reset` or a run-time counted wait (`rtwait`, the leader's alone) just before.

Scales.  A slot counts signals; with per-CTA signals, S(slot) is the least common
multiple of the CTA counts of the groups that signal it per CTA (1 when none do), every
signal to the slot adds its value times S (split over the CTAs of a `csignal`), and
every wait on it compares with its expected count times S (`Step.scale`).  Counters are
never scaled: their values are byte counts the engines add themselves.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ccogen.codegen.model import BlockProgram, Segment
from ccogen.codegen.steps import (
    GROUP_SIGNALS,
    LOCAL,
    MOVES_DATA,
    PER_CTA_SIGNALS,
    RT_PEER,
    RUNTIME_WAITS,
    SPIN_WAITS,
    Step,
    StepKind,
)

# the leader alone acts on these words: the group must have arrived (module doc)
LEADER_ONLY = RUNTIME_WAITS | {StepKind.RESET}


Pos = tuple[int, int | None]  # (segment, step); step None: a fork (it ends in a group join)


def split_segments(segments: Sequence[Segment],
                   counters: frozenset[int]) -> tuple[list[Segment], int]:
    """The block's segments with group signals, waits and syncs split per CTA (the
    unscaled values: `scale_programs` applies S once every kernel is split), and the
    number of group syncs left (renumbered 1.., joins included: the barrier counter
    counts only those)."""
    flat: list[Pos] = [(i, j) for i, seg in enumerate(segments)
                       for j in ([None] if seg.branches else range(len(seg.steps)))]
    out = [list(seg.steps) for seg in segments]
    dirty = Footprint()  # copies since the last group barrier
    for n, (i, j) in enumerate(flat):
        if j is None:
            dirty = Footprint()  # the fork ended in a group join
            continue
        s = segments[i].steps[j]
        if s.kind in MOVES_DATA:
            dirty.add(s)
        elif s.kind is StepKind.BARRIER:
            dirty = Footprint()
        elif s.kind is StepKind.SIGNAL and s.off not in counters:
            out[i][j] = replace(s, kind=StepKind.CSIGNAL)
        elif s.kind is StepKind.WAIT:
            out[i][j] = replace(s, kind=StepKind.CWAIT)
        elif s.kind is StepKind.SYNC:
            ahead, fork_ahead = _copies_ahead(segments, flat, n)
            keep = (bool(dirty) and (fork_ahead or dirty.conflicts(ahead))) \
                or _leader_next(segments, flat, n, counters) or _reset_before(segments, flat, n)
            if keep:
                dirty = Footprint()
            else:
                out[i][j] = replace(s, kind=StepKind.CTASYNC)
    result = []
    seq = 0
    for seg, steps in zip(segments, out, strict=True):
        if seg.branches:  # forks run on CTA 0 and end in a group join: only renumbered
            assert seg.join is not None
            seq += 1
            result.append(replace(seg, join=replace(seg.join, seq=seq)))
            continue
        renumbered = []
        for st in steps:
            if st.kind is StepKind.SYNC:
                seq += 1
                st = replace(st, seq=seq)
            renumbered.append(st)
        result.append(replace(seg, steps=tuple(renumbered)))
    return result, seq


def _copies_ahead(segments: Sequence[Segment], flat: list[Pos],
                  n: int) -> tuple[list[Step], bool]:
    """The copies between flat position n (a sync) and the next sync or team barrier,
    and whether a fork comes first."""
    out: list[Step] = []
    for i, j in flat[n + 1:]:
        if j is None:
            return out, True
        s = segments[i].steps[j]
        if s.kind in (StepKind.SYNC, StepKind.BARRIER):
            return out, False
        if s.kind in MOVES_DATA:
            out.append(s)
    return out, False


def _ranges(s: Step) -> list[tuple[int, int, int, bool]]:
    """(rank relative to the executing one, first byte, end, written) of a copy."""
    if s.kind is StepKind.LLWAIT:  # writes the payload where the put was going
        return [(LOCAL, s.dst_off, s.dst_off + s.nbytes, True)]
    if s.kind is StepKind.REDUCE:  # writes dst, reads every source (a buffer: a `peer` of its own)
        assert s.reduction is not None
        red = s.reduction
        return [(s.dst_peer, s.dst_off, s.dst_off + s.nbytes, True),
                *((p, off, off + red.source_bytes(k, s.nbytes), False)
                  for k, (p, off) in enumerate(red.srcs))]
    if s.kind is StepKind.LLPUT:  # reads the source, writes the entry on the peer
        return [(s.dst_peer, s.off, s.off + 16, True),
                (LOCAL, s.src_off, s.src_off + s.nbytes, False)]
    return [(s.dst_peer, s.dst_off, s.dst_off + s.nbytes, True),
            (s.src_peer if s.kind is StepKind.COPY else LOCAL, s.src_off, s.src_off + s.nbytes,
             False)]


def _conflict(before: Sequence[Step], after: Sequence[Step]) -> bool:
    """Whether a copy of `before` and one of `after` touch the same bytes of one rank,
    one of them writing (ranges `lo_a < hi_b and lo_b < hi_a`, so an empty range
    conflicts with a range that holds its point strictly inside)."""
    index = Footprint()
    for a in before:
        index.add(a)
    return index.conflicts(after)


class Footprint:
    """The byte ranges of a growing set of copies, per (rank, written): an interval
    index that answers "does this range meet one of them" in O(log n).

    Non-empty ranges are kept as sorted disjoint intervals, merged only when they
    overlap (touching ones stay apart: a point strictly inside the union is then
    strictly inside a member); empty ranges (`lo == hi`) as sorted points.  Adding is a
    bisection and a splice, a query two bisections, so a block's pass over its copies
    is O(n log n) instead of the pairwise O(n^2) scan it replaces."""

    def __init__(self) -> None:
        # (rank, written) -> (starts, ends) of disjoint intervals; points
        self._spans: dict[tuple[int, bool], tuple[list[int], list[int]]] = {}
        self._points: dict[tuple[int, bool], list[int]] = {}
        self._raw: list[tuple[int, int, int, bool]] = []  # every range, as added
        self._reversed = False  # a range with lo > hi (the planner makes none): pairwise
        self._size = 0

    def __bool__(self) -> bool:
        return self._size > 0

    def add(self, s: Step) -> None:
        self._size += 1
        for p, lo, hi, w in _ranges(s):
            self._raw.append((p, lo, hi, w))
            if lo > hi:
                self._reversed = True
                continue
            if lo == hi:
                pts = self._points.setdefault((p, w), [])
                pts.insert(bisect_left(pts, lo), lo)
                continue
            starts, ends = self._spans.setdefault((p, w), ([], []))
            # members with end > lo and start < hi overlap [lo, hi): a contiguous run
            first = bisect_right(ends, lo)
            last = bisect_left(starts, hi)
            if first < last:
                lo = min(lo, starts[first])
                hi = max(hi, ends[last - 1])
            starts[first:last] = [lo]
            ends[first:last] = [hi]

    def _meets(self, p: int, lo: int, hi: int, w: bool) -> bool:
        """Whether [lo, hi) of rank `p` meets a member; a run-time peer (`RT_PEER`,
        codegen.rtpeer) may be any rank: it meets the members of every rank."""
        if lo > hi or self._reversed:
            return any((q == p or RT_PEER in (p, q)) and (wq or w) and a < hi and lo < b
                       for q, a, b, wq in self._raw)
        ranks = {q for q, _ in (*self._spans, *self._points)} if p == RT_PEER else {p, RT_PEER}
        return any(self._meets_at(q, lo, hi, w) for q in ranks)

    def _meets_at(self, p: int, lo: int, hi: int, w: bool) -> bool:
        for written in ((True, False) if w else (True,)):
            key = (p, written)
            if lo < hi:
                spans = self._spans.get(key)
                if spans is not None:  # some member with start < hi and end > lo
                    first = bisect_right(spans[1], lo)
                    if first < len(spans[0]) and spans[0][first] < hi:
                        return True
                pts = self._points.get(key)
                if pts is not None:  # a point strictly inside (lo, hi)
                    k = bisect_right(pts, lo)
                    if k < len(pts) and pts[k] < hi:
                        return True
            elif lo == hi:
                spans = self._spans.get(key)
                if spans is not None:  # a member with start < lo < end
                    k = bisect_right(spans[1], lo)
                    if k < len(spans[0]) and spans[0][k] < lo:
                        return True
        return False

    def conflicts(self, after: Iterable[Step]) -> bool:
        return any(self._meets(p, lo, hi, w) for b in after for p, lo, hi, w in _ranges(b))


def _neighbours(segments: Sequence[Segment], flat: list[Pos], n: int,
                step: int) -> Iterable[Step]:
    """The steps after (step=1) or before (step=-1) flat position n, comments skipped,
    up to the nearest fork."""
    k = n + step
    while 0 <= k < len(flat):
        i, j = flat[k]
        if j is None:
            return
        s = segments[i].steps[j]
        if s.kind is not StepKind.COMMENT:
            yield s
        k += step


def _leader_next(segments: Sequence[Segment], flat: list[Pos], n: int,
                 counters: frozenset[int]) -> bool:
    for s in _neighbours(segments, flat, n, 1):
        if s.kind is StepKind.RESET or (s.kind is StepKind.SIGNAL and s.off in counters):
            return True
        if s.kind is not StepKind.SIGNAL:
            return False
    return False


def _reset_before(segments: Sequence[Segment], flat: list[Pos], n: int) -> bool:
    # a `reset`, or a run-time counted wait (`rtwait`: the leader waits and consumes)
    return next(iter(_neighbours(segments, flat, n, -1)), Step(StepKind.COMMENT)).kind \
        in LEADER_ONLY


# ----------------------------------------------------------------------------- scales


def slot_scales(kernels: Iterable[tuple[int, Sequence[BlockProgram]]]) -> dict[int, int]:
    """S per slot offset: the lcm of the CTA counts of its per-CTA signallers."""
    scales: dict[int, int] = {}
    for ctas, programs in kernels:
        for s in _all_steps(programs):
            if s.kind in PER_CTA_SIGNALS:
                scales[s.off] = math.lcm(scales.get(s.off, 1), ctas)
    return scales


def scale_programs(programs: Sequence[BlockProgram], ctas: int,
                   scales: dict[int, int]) -> tuple[BlockProgram, ...]:
    """Apply the slot scales to one kernel's signals and waits."""

    def fix(s: Step) -> Step:
        scale = scales.get(s.off, 1)
        if scale == 1:
            return s
        if s.kind in PER_CTA_SIGNALS:
            return replace(s, value=s.value * scale // ctas)
        if s.kind in GROUP_SIGNALS:
            return replace(s, value=s.value * scale)
        if s.kind in SPIN_WAITS:
            return replace(s, scale=scale)
        return s

    def fix_seg(seg: Segment) -> Segment:
        return replace(seg, steps=tuple(fix(s) for s in seg.steps),
                       branches=tuple(replace(b, steps=tuple(fix(s) for s in b.steps))
                                      for b in seg.branches))

    return tuple(replace(p, segments=tuple(fix_seg(g) for g in p.segments)) for p in programs)


def _all_steps(programs: Sequence[BlockProgram]) -> Iterable[Step]:
    for p in programs:
        for seg in p.segments:
            yield from seg.steps
            for br in seg.branches:
                yield from br.steps


__all__ = ["scale_programs", "slot_scales", "split_segments"]
