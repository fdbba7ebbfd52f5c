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
      `reset` just before.

Scales.  A slot counts signals; with per-CTA signals, S(slot) is the least common
multiple of the CTA counts of the groups that signal it per CTA (1 when none do), every
signal to the slot adds its value times S (split over the CTAs of a `csignal`), and
every wait on it compares with its expected count times S (`Step.scale`).  Counters are
never scaled: their values are byte counts the engines add themselves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ccogen.codegen.model import LOCAL, BlockProgram, Segment, Step

COPIES = frozenset({"copy", "putsig", "cputsig", "putcounted", "llput", "llwait", "reduce"})


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
    dirty: list[Step] = []  # copies since the last group barrier
    for n, (i, j) in enumerate(flat):
        if j is None:
            dirty = []  # the fork ended in a group join
            continue
        s = segments[i].steps[j]
        if s.kind in COPIES:
            dirty.append(s)
        elif s.kind == "barrier":
            dirty = []
        elif s.kind == "signal" and s.off not in counters:
            out[i][j] = replace(s, kind="csignal")
        elif s.kind == "wait":
            out[i][j] = replace(s, kind="cwait")
        elif s.kind == "sync":
            ahead, fork_ahead = _copies_ahead(segments, flat, n)
            keep = (bool(dirty) and (fork_ahead or _conflict(dirty, ahead))) \
                or _leader_next(segments, flat, n, counters) or _reset_before(segments, flat, n)
            if keep:
                dirty = []
            else:
                out[i][j] = replace(s, kind="ctasync")
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
            if st.kind == "sync":
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
        if s.kind in ("sync", "barrier"):
            return out, False
        if s.kind in COPIES:
            out.append(s)
    return out, False


def _ranges(s: Step) -> list[tuple[int, int, int, bool]]:
    """(rank relative to the executing one, first byte, end, written) of a copy."""
    if s.kind == "llwait":  # writes the payload where the put was going
        return [(LOCAL, s.dst_off, s.dst_off + s.nbytes, True)]
    if s.kind == "reduce":  # writes dst, reads every source (a buffer is a `peer` of its own)
        assert s.reduction is not None
        return [(s.dst_peer, s.dst_off, s.dst_off + s.nbytes, True),
                *((p, off, off + s.nbytes, False) for p, off in s.reduction.srcs)]
    if s.kind == "llput":  # reads the source, writes the entry on the peer
        return [(s.dst_peer, s.off, s.off + 16, True),
                (LOCAL, s.src_off, s.src_off + s.nbytes, False)]
    return [(s.dst_peer, s.dst_off, s.dst_off + s.nbytes, True),
            (s.src_peer if s.kind == "copy" else LOCAL, s.src_off, s.src_off + s.nbytes, False)]


def _conflict(before: Sequence[Step], after: Sequence[Step]) -> bool:
    for a in before:
        for b in after:
            for pa, lo_a, hi_a, wa in _ranges(a):
                for pb, lo_b, hi_b, wb in _ranges(b):
                    if pa == pb and (wa or wb) and lo_a < hi_b and lo_b < hi_a:
                        return True
    return False


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
        if s.kind != "comment":
            yield s
        k += step


def _leader_next(segments: Sequence[Segment], flat: list[Pos], n: int,
                 counters: frozenset[int]) -> bool:
    for s in _neighbours(segments, flat, n, 1):
        if s.kind == "reset" or (s.kind == "signal" and s.off in counters):
            return True
        if s.kind != "signal":
            return False
    return False


def _reset_before(segments: Sequence[Segment], flat: list[Pos], n: int) -> bool:
    return next(iter(_neighbours(segments, flat, n, -1)), Step("comment")).kind == "reset"


# ----------------------------------------------------------------------------- scales


def slot_scales(kernels: Iterable[tuple[int, Sequence[BlockProgram]]]) -> dict[int, int]:
    """S per slot offset: the lcm of the CTA counts of its per-CTA signallers."""
    scales: dict[int, int] = {}
    for ctas, programs in kernels:
        for s in _all_steps(programs):
            if s.kind in ("csignal", "cputsig"):
                scales[s.off] = math.lcm(scales.get(s.off, 1), ctas)
    return scales


def scale_programs(programs: Sequence[BlockProgram], ctas: int,
                   scales: dict[int, int]) -> tuple[BlockProgram, ...]:
    """Apply the slot scales to one kernel's signals and waits."""

    def fix(s: Step) -> Step:
        scale = scales.get(s.off, 1)
        if scale == 1:
            return s
        if s.kind in ("csignal", "cputsig"):
            return replace(s, value=s.value * scale // ctas)
        if s.kind in ("signal", "putsig"):
            return replace(s, value=s.value * scale)
        if s.kind in ("wait", "cwait"):
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
