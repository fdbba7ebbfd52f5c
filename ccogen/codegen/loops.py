"""Loops the checker sampled, folded into device loops (or expanded) after lowering.

A `for` loop uniform in its variable is instantiated on iterations 0, 1 and N-1 only
(`ccogen.instantiate.sampling`; docs/checker.md, "Loops checked on three iterations"),
and code generation lowers that *sampled* instance: every step lowered from an op of
such a loop carries its iteration (`Step.trip`).  Lowered, each execution of the loop
is three blocks of steps, B0, B1 and BL, one per sampled iteration.  This module turns
them back into the N iterations the unrolled instance would have lowered to, in one of
two ways:

* **fold** (run-time protocols, whose unrolled steps `codegen.reroll` would fold): one
  `loop` step of N trips whose body is `reroll`'s own body of B0 and B1 (every literal
  that changes printed `v0 + d * t`), the text reroll prints for the unrolled run;
* **expand**: B0, then iterations 1..N-2 computed from B0 and B1 (every number moved by
  `k * d`), then BL -- the steps the unrolled instance lowers to, for the instances
  that are printed unrolled, and where folding could print other text than reroll
  would (below).

Either way the iterations are *verified*, not assumed: B0, B1 and BL have the same
steps, and iteration N-1 computed from B0 and B1 must equal BL field for field (so every
number the steps print is affine in the iteration); the decisions the lowering takes
modulo 16 (16-byte vectors of a copy or a `reduce`), which affinity at three points
does not carry over, are checked for every residue.  What the passes decide from a
step's neighbours is the same at every middle iteration as at iteration 1: the sampler
proved that no two iterations of a loop, and no op outside it, touch the same bytes
(one of them writing), so codegen.ctasplit finds no conflict inside a loop, and the
only neighbours that differ are the loop's own iterations.  A step sequence that does
not have the three blocks in order, or iterations that fail a check, is `Unfoldable`:
the compiler then generates from the unrolled instance instead (ccogen.compiler).

Folding prints what `reroll` prints for the unrolled steps: `_run` works out the run
reroll's greedy scan makes of them -- it may begin up to a period before the loop, where
the steps there continue the loop's pattern backwards, and end inside the last block,
where the last iteration keeps a group sync -- and proves the scan reaches its start and
that no other period wins there (the argument is `_run`'s docstring).  Where it cannot,
the loop is expanded and reroll sees the unrolled steps.

Sync numbers.  Group syncs are numbered in program order (codegen.plan, then
codegen.ctasplit renumbers the ones it keeps); a sampled loop numbers three iterations'
syncs where the unrolled one numbers N.  `shift_syncs` moves every number after a
loop's B1 block by (N-3) x the syncs of one iteration, right after each numbering, so
that B0, B1 and BL hold iterations 0, 1 and N-1's numbers and the steps after the loop
theirs, and adds the same to the block's sync count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ccogen.codegen.model import BlockProgram, Branch, Segment
from ccogen.codegen.reduce import VECTOR
from ccogen.codegen.reroll import MAX_PERIOD, fold_key, loop_body, map_sequences, texts
from ccogen.codegen.steps import Step, StepKind
from ccogen.codegen.unsupported import Unsupported

_NUMBER = re.compile(r"(?<![\w.])(-?\d+)(ULL|LL)?(?![\w.])")
_INTS = ("dst_off", "src_off", "nbytes", "value", "seq", "off", "per_epoch")
_RESIDUES = 16  # 16-byte vectors: alignment repeats every 16 iterations


class Unfoldable(Unsupported):
    """A sampled loop whose lowered iterations cannot be folded or expanded soundly: the
    compiler lowers the unrolled instance instead (the message says which loop, why)."""


@dataclass(frozen=True)
class _Loop:
    """One execution of a sampled loop in a step sequence: B0 = steps[start:mid],
    B1 = steps[mid:last], BL = steps[last:end], of `trips` iterations."""

    start: int
    mid: int
    last: int
    end: int
    trips: int


def expanded_count(steps: Sequence[Step]) -> int:
    """How many steps `steps` stands for: a step of iteration 1 of a sampled loop stands
    for iterations 1..N-2."""
    return sum(s.trip[2] - 2 if s.trip is not None and s.trip[1] == 1 else 1 for s in steps)


def step_count(program: BlockProgram) -> int:
    """`BlockProgram.step_count` of the unrolled instance's program."""
    return sum(expanded_count(seg.steps) + sum(expanded_count(br.steps) for br in seg.branches)
               + (seg.join is not None) for seg in program.segments)


# ----------------------------------------------------------------------------- sync numbers


def _shifted(steps: Sequence[Step]) -> tuple[list[Step], int]:
    """One numbering scope's steps with the numbers of its `sync` steps after each
    loop's B1 block moved (module doc), and how many numbers were added."""
    syncs: dict[object, int] = {}
    ends: dict[object, tuple[int, int]] = {}  # loop execution -> (last index of B1, trips)
    for i, s in enumerate(steps):
        if s.trip is not None and s.trip[1] == 1:
            key = s.trip[0]
            syncs[key] = syncs.get(key, 0) + (s.kind is StepKind.SYNC)
            ends[key] = (i, s.trip[2])
    moves = sorted((i, (n - 3) * syncs[key]) for key, (i, n) in ends.items() if syncs[key])
    if not moves:
        return list(steps), 0
    out: list[Step] = []
    shift = 0
    k = 0
    for i, s in enumerate(steps):
        if s.kind is StepKind.SYNC and shift:
            s = replace(s, seq=s.seq + shift)
        out.append(s)
        while k < len(moves) and moves[k][0] == i:
            shift += moves[k][1]
            k += 1
    return out, shift


def shift_syncs(segments: Sequence[Segment], syncs: int,
                branches: bool = True) -> tuple[list[Segment], int]:
    """The block's segments with their sync numbers moved (module doc): the group's syncs
    and fork joins are one numbering, each branch its own (`branches`: codegen.ctasplit
    renumbers the group's alone); and the new group count."""
    flat: list[Step] = []
    for seg in segments:
        flat += [seg.join] if seg.branches and seg.join is not None else list(seg.steps)
    moved, added = _shifted(flat)
    out: list[Segment] = []
    pos = 0
    for seg in segments:
        if seg.branches and seg.join is not None:
            forks = tuple(Branch(b.scope, b.index, tuple(_shifted(b.steps)[0]))
                          for b in seg.branches) if branches else seg.branches
            out.append(replace(seg, branches=forks, join=moved[pos]))
            pos += 1
        else:
            out.append(replace(seg, steps=tuple(moved[pos:pos + len(seg.steps)])))
            pos += len(seg.steps)
    return out, syncs + added


# ----------------------------------------------------------------------------- iterations


def _loops(steps: Sequence[Step]) -> list[_Loop]:
    """The executions of sampled loops in `steps`, in order; `Unfoldable` where one is
    not three contiguous blocks of iterations 0, 1 and N-1."""
    runs: list[tuple[int, int, object, int, int]] = []  # (start, end, key, v, trips)
    for i, s in enumerate(steps):
        if s.trip is None:
            continue
        key, v, n = s.trip
        if runs and runs[-1][1] == i and runs[-1][2:4] == (key, v):
            runs[-1] = (runs[-1][0], i + 1, key, v, n)
        else:
            runs.append((i, i + 1, key, v, n))
    out: list[_Loop] = []
    j = 0
    while j < len(runs):
        three = runs[j:j + 3]
        first, n = three[0][2], three[0][4]
        if len(three) < 3 or [r[2] for r in three] != [first] * 3 or \
                [r[3] for r in three] != [0, 1, n - 1] or \
                three[0][1] != three[1][0] or three[1][1] != three[2][0]:
            raise _unfoldable(steps[three[0][0]], "its iterations' steps are not three "
                              "blocks in order")
        out.append(_Loop(three[0][0], three[1][0], three[2][0], three[2][1], n))
        j += 3
    return out


def _unfoldable(s: Step, why: str) -> Unfoldable:
    line = f" (line {s.line})" if s.line else ""
    return Unfoldable(f"the loop{line} checked on three iterations cannot be generated as a "
                      f"loop: {why}", None)


def _moved(text: str, other: str, k: int) -> str:
    """`text` with every number moved by k x its change to `other` (same skeleton)."""
    them = iter(int(m[1]) for m in _NUMBER.finditer(other))

    def sub(m: re.Match[str]) -> str:
        v = int(m[1])
        w = next(them, v)
        return m[0] if v == w else f"{v + k * (w - v)}{m[2] or ''}"

    return _NUMBER.sub(sub, text)


def _at(a: Step, b: Step, k: int) -> Step:
    """Step `a` (of iteration 0) at iteration k, `b` being it at iteration 1."""
    ints = {f: getattr(a, f) + k * (getattr(b, f) - getattr(a, f)) for f in _INTS
            if getattr(a, f) != getattr(b, f)}
    rt = tuple((name, _moved(text, other, k)) for (name, text), (_, other)
               in zip(a.rt, b.rt, strict=True))
    let = tuple((name, _moved(text, other, k)) for (name, text), (_, other)
                in zip(a.let, b.let, strict=True))
    red = a.reduction
    if red is not None and b.reduction is not None:
        red = replace(red, srcs=tuple((p, off + k * (o2 - off)) for (p, off), (_, o2)
                                      in zip(red.srcs, b.reduction.srcs, strict=True)),
                      weights=tuple(_moved(w, w2, k) for w, w2
                                    in zip(red.weights, b.reduction.weights, strict=True)))
    assert a.trip is not None
    return replace(a, **ints, rt=rt, let=let, reduction=red, trip=(a.trip[0], k, a.trip[2]))


def _same_shape(a: Step, b: Step) -> bool:
    return (a.kind, len(a.rt), len(a.let), [n for n, _ in a.rt], [n for n, _ in a.let]) == \
        (b.kind, len(b.rt), len(b.let), [n for n, _ in b.rt], [n for n, _ in b.let]) and \
        (a.reduction is None) == (b.reduction is None) and not a.body and not b.body and \
        a.spread is None and b.spread is None


def _vectors_uniform(a: Step, b: Step, n: int) -> bool:
    """The 16-byte-vector decisions (taken modulo 16) of `a` the same at every iteration."""
    if a.kind is StepKind.REDUCE and a.reduction is not None and b.reduction is not None:
        heap = [(off, o2) for (p, off), (_, o2) in zip(a.reduction.srcs, b.reduction.srcs,
                                                       strict=True) if p >= -1]
        heap.append((a.dst_off, b.dst_off))
        return all((o2 - off) % VECTOR == 0 for off, o2 in heap)
    if a.kind is StepKind.COPY and not any(name == "vec" for name, _ in a.rt):
        dd, ds, dn = b.dst_off - a.dst_off, b.src_off - a.src_off, b.nbytes - a.nbytes
        return all(((a.dst_off + k * dd) % 16 == 0 and (a.src_off + k * ds) % 16 == 0
                    and (a.nbytes + k * dn) % 16 == 0) == a.vec
                   for k in range(min(n, _RESIDUES)))
    return True


def _kept(a: Step, z: Step) -> bool:
    """Whether `z`, of the last iteration, is `a`'s CTA meet kept as a group sync: what
    follows the loop decides it (codegen.ctasplit), so the last iteration may differ."""
    return a.kind is StepKind.CTASYNC and z.kind is StepKind.SYNC


def _verify(steps: Sequence[Step], lp: _Loop) -> bool:
    """Check the iterations (module doc); True where the last one keeps a group sync that
    the others meet per CTA (it is then printed after a loop of N-1 iterations)."""
    b0, b1, bl = (steps[lp.start:lp.mid], steps[lp.mid:lp.last], steps[lp.last:lp.end])
    if not len(b0) == len(b1) == len(bl):
        raise _unfoldable(b0[0], "its iterations lower to different numbers of steps")
    peeled = False
    for a, b, z in zip(b0, b1, bl, strict=True):
        key = fold_key(a)
        if _kept(a, z):
            peeled = True
            z = replace(z, kind=a.kind, seq=a.seq + (lp.trips - 1) * (b.seq - a.seq))
        if key is None or not (_same_shape(a, b) and _same_shape(a, z)) or \
                fold_key(b) != key or fold_key(z) != key:
            raise _unfoldable(a, "its iterations lower to different steps")
        if _at(a, b, lp.trips - 1) != z:
            raise _unfoldable(a, "a number its steps print is not affine in the iteration")
        if not _vectors_uniform(a, b, lp.trips):
            raise _unfoldable(a, "its 16-byte vectors differ between iterations")
    return peeled


def _numbers(s: Step) -> list[int]:
    return [int(m[1]) for text in texts(s) for m in _NUMBER.finditer(text)]


def _continues(first: Sequence[Step], second: Sequence[Step], at: Sequence[Step],
               k: int) -> bool:
    """Whether `at` is repetition k of the run whose repetitions 0 and 1 are `first` and
    `second`, as reroll judges it: the same keys, every number `v0 + k * (v1 - v0)`."""
    if len(at) != len(first):
        return False
    for a, b, z in zip(first, second, at, strict=True):
        if fold_key(z) is None or fold_key(z) != fold_key(a):
            return False
        na, nb, nz = _numbers(a), _numbers(b), _numbers(z)
        if len(nz) != len(na) or any(w != u + k * (v - u) for u, v, w
                                     in zip(na, nb, nz, strict=True)):
            return False
    return True


@dataclass(frozen=True)
class _Run:
    """How reroll folds one sampled loop of the unrolled steps: a run from `begin` (the
    loop's first step, or up to a period before it: the steps there continue the loop's
    pattern backwards) of `count` repetitions `first`, `second`, ...; the unrolled steps
    after it start at `rest` (inside the loop's last block, or at its end)."""

    begin: int
    count: int
    first: tuple[Step, ...]
    second: tuple[Step, ...]
    rest: int


def _periodic(keys: Sequence[object], p: int) -> bool:
    return all(keys[x] == keys[x + p] for x in range(len(keys) - p))


def _run(steps: Sequence[Step], lp: _Loop, peeled: bool, ground: int | None,
         others: Sequence[_Loop]) -> _Run | None:
    """The run reroll's greedy scan makes of the unrolled loop `lp`, where it is sure to
    (None: expand the loop, and let reroll scan the unrolled steps).

    `ground` is a position reroll's scan is known to reach (the sequence's start, or the
    end of the run of the loop before), None when unknown.  The run begins `r` steps
    before the loop (r < the period P: the longest stretch before it, not before
    `ground`, that continues the loop's pattern backwards, as reroll judges patterns),
    and the scan reaches its beginning: any run that crossed into it would have three
    repetitions of some period p <= MAX_PERIOD around it whose keys repeat, and none
    has.  From there the run of period P stops where the unrolled steps stop repeating
    the pattern (the last iteration's kept group sync, or the step after the loop),
    which a run of a multiple of P cannot pass either, and no run of another period can
    cover the loop: over >= p + q steps periods p and q imply their gcd (Fine and Wilf),
    and the body has no shorter period."""
    b0 = tuple(steps[lp.start:lp.mid])
    b1 = tuple(steps[lp.mid:lp.last])
    period = len(b1)
    keys = [fold_key(s) for s in b1]
    if period > MAX_PERIOD or period * lp.trips < 4 * MAX_PERIOD or \
            any(k is None for k in keys) or all(s.kind is StepKind.COMMENT for s in b1):
        return None
    if any(period % p == 0 and _periodic(keys, p) for p in range(1, period)):
        return None
    floor = ground if ground is not None else 0
    taken = [x for o in others if o is not lp for x in range(o.start, o.last)]
    near = set(taken)
    if ground is None and any(x in near for x in range(lp.start - 3 * MAX_PERIOD, lp.start)):
        return None  # the unrolled steps before the loop are not these
    r = 0
    while r < period and lp.start - r - 1 >= floor and lp.start - r - 1 not in near:
        at = lp.start - r - 1
        j = period - r - 1
        if not _continues((b1[j],), (b0[j],), (steps[at],), 2):  # b0 - (b1 - b0)
            break
        r += 1
    if r == period:
        return None  # a whole iteration before the loop: reroll's run starts there
    begin = lp.start - r
    pre = tuple(steps[begin:lp.start])
    first = pre + b0[:period - r]
    second = b0[period - r:] + b1[:period - r]
    rotated = keys[period - r:] + keys[:period - r]
    # no run of the steps before crosses into `begin`
    before = [fold_key(s) for s in steps[max(floor, begin - 3 * MAX_PERIOD):begin]]
    inside = rotated * (3 * MAX_PERIOD // period + 1)
    for p in range(1, MAX_PERIOD + 1):
        for i in range(max(0, len(before) - 3 * p + 1), len(before)):
            window = before[i:] + inside[:3 * p - (len(before) - i)]
            if _periodic(window, p):
                return None
    last = tuple(steps[lp.last:lp.end])
    kept = [j for j, (a, z) in enumerate(zip(b0, last, strict=True)) if _kept(a, z)]
    if peeled and kept[0] < period - r:  # the kept sync ends the run before the last block
        if r:
            return None  # (its unrolled steps would be iteration N-2's: expand)
        return _Run(begin, lp.trips - 1, first, second, lp.last)
    following = last[period - r:] + tuple(steps[lp.end:lp.end + (period - r)])
    if _continues(first, second, following, lp.trips):
        return None  # the run would go on past the loop
    return _Run(begin, lp.trips, first, second, lp.last + (period - r))


def fold(steps: Sequence[Step], roll: bool) -> tuple[Step, ...]:
    """`steps` with each sampled loop folded into a `loop` step (`roll`, where reroll
    would fold the unrolled steps the same way: `_run`) or expanded (module doc)."""
    loops = _loops(steps)
    if not loops:
        return tuple(steps)
    out: list[Step] = []
    pos = 0
    ground: int | None = 0  # where reroll's greedy scan is known to be
    for lp in loops:
        peeled = _verify(steps, lp)
        b0, b1 = steps[lp.start:lp.mid], steps[lp.mid:lp.last]
        run = _run(steps, lp, peeled, ground, loops) if roll else None
        if run is not None and run.begin >= pos:
            out += steps[pos:run.begin]
            out.append(Step(StepKind.LOOP, value=run.count,
                            body=loop_body(run.first, run.second)))
            pos = ground = run.rest
            continue
        out += steps[pos:lp.start]
        out += b0
        out += [_at(a, b, k) for k in range(1, lp.trips - 1)
                for a, b in zip(b0, b1, strict=True)]
        out += steps[lp.last:lp.end]
        pos, ground = lp.end, None
    out += steps[pos:]
    return tuple(out)


def fold_segments(segments: Sequence[Segment], roll: bool) -> list[Segment]:
    """A block's segments with every sampled loop folded or expanded; consecutive group
    segments are one sequence first (a block-level loop's ops are segments of their own),
    as `reroll.reroll_segments` sees them (`reroll.map_sequences`)."""
    return map_sequences(segments, lambda steps: fold(steps, roll))


def sampled(segments: Sequence[Segment]) -> bool:
    """Whether a step of `segments` comes from a sampled loop."""
    return any(s.trip is not None for seg in segments
               for s in (*seg.steps, *(t for b in seg.branches for t in b.steps)))


__all__ = ["Unfoldable", "expanded_count", "fold", "fold_segments", "sampled", "shift_syncs",
           "step_count"]
