"""Fold runs of steps that repeat with affinely changing numbers into device loops.

Instances are unrolled: a MoE dispatch's `for t in range(tokens)` inside `warps p` is
`tokens` puts per warp, each with its own offsets and its own run-time length.  Printed
one by one they make a kernel of tens of thousands of lines that nvcc takes minutes to
build.  This pass finds, in a step sequence, the longest runs of `count >= MIN_COUNT`
repetitions of a period of `1..MAX_PERIOD` steps whose printed text is the same except
for integer literals that grow by the same amount from one repetition to the next, and
replaces each run by one `loop` step: `for (int64_t t = 0; t < count; ++t)` around the
period, every changing literal `v` printed as `v0 + d * t`.

What may change between repetitions: the offsets, lengths, values and sequence numbers a
step prints through its `c_*` fields (`steps.Step`), the literals of its run-time C
expressions (`let`), and for a `reduce` its sources' offsets (`c_srcs`) and the literals
of its weights (a run-time weight reads the token's own elements).  Everything else
printed (peers, words, comments, a reduce's types, vector width and source count) must
be equal.
Only the printed text is compared, so a loop prints exactly the calls the unrolled steps
did, in the same order (the device executes the same sequence).

In a program folded over the ranks (`peers=True`, codegen.ranks) a literal may also
alternate: a ring's steps land in two slots in turn, so the slot offset is `v0 + e * (t %
2)` over the repetitions, and a literal of period 2 in general is `v0 + d * t + e * (t %
2)` (affine within each parity).  Such a run needs `MIN_PERIODIC` repetitions (three
values fit any such form), and the period (steps per repetition) may be up to
`MAX_PEER_PERIOD`: one iteration of a ring is about sixteen steps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ccogen.codegen.model import Branch, Segment
from ccogen.codegen.spell.affine import terms as spell_terms
from ccogen.codegen.steps import Affine, Step, StepKind

MIN_COUNT = 3
MAX_PERIOD = 8
MAX_PEER_PERIOD = 32  # `peers=True`: a ring iteration's steps
MIN_PERIODIC = 4  # repetitions of a run where some literal alternates (`t % 2`)
REROLLED = frozenset({StepKind.COMMENT, StepKind.COPY, StepKind.PUTSIG, StepKind.CPUTSIG,
                      StepKind.SIGNAL, StepKind.CSIGNAL, StepKind.SYNC, StepKind.CTASYNC,
                      StepKind.REDUCE})
_SLOTS = ("dst_off", "src_off", "nbytes", "value", "vec", "seq")
_PEERS = ("dst_peer", "src_peer")  # `rt` entries that stay as they are (their `let` moves)
_NUMBER = re.compile(r"(?<![\w.])(-?\d+)(ULL|LL)?(?![\w.])")

Shape = tuple[object, ...]


# `peers=True` (a program folded over the ranks, codegen.ranks): the peers, words and
# per-epoch totals may change too (a run over peers), and every kind without nested steps
# folds
_PEER_SLOTS = (*_SLOTS, "dst_peer", "src_peer", "peer", "off", "per_epoch", "src", "queue", "line")
_UNFOLDED = frozenset({StepKind.LOOP, StepKind.SPREAD})


def _slots(peers: bool) -> tuple[str, ...]:
    return _PEER_SLOTS if peers else _SLOTS


def _texts(s: Step, peers: bool = False) -> list[str]:
    """Every printed text whose numbers may change, in one fixed order (`_body`'s)."""
    out = [getattr(s, f"c_{slot}") for slot in _slots(peers)] + [v for _, v in s.let]
    if s.reduction is not None:
        if peers:
            out += [peer for peer, _ in s.c_srcs]
        out += [off for _, off in s.c_srcs] + list(s.reduction.weights)
    return out


def _key(s: Step) -> tuple[Step, tuple[str, ...]] | None:
    """What must be equal between repetitions: the step without its slots, and the
    skeletons of the slot texts (numbers taken out)."""
    found = _key_numbers(s)
    return None if found is None else found[0]


def _key_numbers(s: Step, peers: bool = False
                 ) -> tuple[tuple[Step, tuple[str, ...]], list[int]] | None:
    """(`_key`, `_numbers`) of a step that may fold, from one scan of its texts."""
    if (s.kind in _UNFOLDED if peers else s.kind not in REROLLED) or s.body:
        return None
    skeletons: list[str] = []
    numbers: list[int] = []
    for text in _texts(s, peers):
        parts = _NUMBER.split(text)  # text, number, suffix, text, number, suffix, ..., text
        numbers += [int(n) for n in parts[1::3]]
        skeletons.append("#".join(parts[0::3]))
    return (_fixed(s, peers), tuple(skeletons)), numbers


def _fixed(s: Step, peers: bool = False) -> Step:
    """The step with what may change between repetitions taken out."""
    red = s.reduction
    if red is not None:  # peers, types and width stay; offsets and weights are texts
        red = replace(red, srcs=tuple((0 if peers else peer, 0) for peer, _ in red.srcs),
                      weights=())
    s = replace(s, dst_off=0, src_off=0, nbytes=0, value=0, vec=False, seq=0, rt=(), affine=(),
                let=tuple((name, "") for name, _ in s.let), reduction=red)
    return (replace(s, dst_peer=0, src_peer=0, peer=0, off=0, per_epoch=0, src=0, queue=0, line=0)
            if peers else s)


def _numbers(s: Step, peers: bool = False) -> list[int]:
    return [int(m[1]) for t in _texts(s, peers) for m in _NUMBER.finditer(t)]


class _Facts:
    """Each step's `_key` (as a small integer: equal keys, equal ids) and `_numbers`,
    computed once: a MoE kernel's steps print kilobytes of run-time C each, and every
    start position tries every period."""

    def __init__(self, steps: Sequence[Step], peers: bool = False) -> None:
        ids: dict[object, int] = {}
        self.keys: list[int | None] = []
        self.nums: list[list[int]] = []
        for s in steps:
            found = _key_numbers(s, peers)
            self.keys.append(None if found is None else ids.setdefault(found[0], len(ids)))
            self.nums.append([] if found is None else found[1])

    def numbers(self, i: int) -> list[int]:
        return self.nums[i]


def _run(facts: _Facts, i: int, period: int, periodic: bool = False) -> int:
    """How many repetitions of steps[i : i + period] start at i (affine numbers; with
    `periodic`, also numbers of period 2, then at least `MIN_PERIODIC` of them).

    A literal is v0, v1, v2, ... over the repetitions.  The third value decides its form:
    affine where v2 - v1 == v1 - v0, else (`periodic` only, v2 - v0 even) `v0 + d * t +
    e * (t % 2)` with d = (v2 - v0) // 2, e = v1 - v0 - d; an affine literal has that form
    too (e = 0), so from the fourth repetition on every literal must equal it."""
    keys_all, nums = facts.keys, facts.nums
    total = len(keys_all)
    keys = keys_all[i:i + period]
    if len(keys) < period or None in keys:
        return 1

    def same(k: int) -> bool:
        start = i + k * period
        return start + period <= total and keys_all[start:start + period] == keys

    if not same(1):
        return 1
    if not same(2):
        return 2
    # per step of the period: each literal's base for even and odd t, and its slope d
    even: list[list[int]] = []
    odd: list[list[int]] = []
    slopes: list[list[int]] = []
    affine = True
    for j in range(i, i + period):
        e0: list[int] = []
        e1: list[int] = []
        ds: list[int] = []
        for a, b, c in zip(nums[j], nums[j + period], nums[j + 2 * period], strict=True):
            if c - b != b - a:
                if not periodic or (c - a) % 2:
                    return 2
                affine = False
            d = (c - a) // 2
            e0.append(a)
            e1.append(b - d)  # a + e, e = b - a - d
            ds.append(d)
        even.append(e0)
        odd.append(e1)
        slopes.append(ds)
    count = 3
    while same(count):
        start = i + count * period
        bases = odd if count % 2 else even
        if any(nums[start + j] != [v + d * count
                                   for v, d in zip(bases[j], slopes[j], strict=True)]
               for j in range(period)):
            break
        count += 1
    return count if affine or count >= MIN_PERIODIC else 1


def _moving(v: int, w: int, x: int | None) -> Affine:
    """A literal whose first repetitions are v, w (and x) as `v + d * t`, or `v + d * t +
    e * (t % 2)` where it alternates (module doc)."""
    if x is None or x - w == w - v:
        return Affine(v, w - v)
    d = (x - v) // 2
    return Affine(v, d, w - v - d)


def _static(s: Step, slot: str) -> bool:
    """Whether `s` prints `slot` as its static literal (one number: no `rt` text, no
    `Affine` of an enclosing loop)."""
    return slot != "vec" and all(key != slot for key, _ in (*s.rt, *s.affine))


def _body(first: Sequence[Step], second: Sequence[Step],
          peers: bool = False, third: Sequence[Step] | None = None) -> tuple[Step, ...]:
    """The period with every literal that changes moved by the trip `t` (`_moved`;
    `third`, the third repetition, where a literal may alternate)."""
    thirds: Sequence[Step | None] = third if third is not None else [None] * len(first)
    return tuple(_moved(a, b, c, peers) for a, b, c in zip(first, second, thirds, strict=True))


def _moved(a: Step, b: Step, c: Step | None, peers: bool) -> Step:
    """Step `a` of the first repetition, `b` (and `c`) the same step of the next ones,
    with every literal that changes moved by the trip: a static slot's as a typed `Affine`
    (`Step.affine`), a literal inside a run-time C text printed `v + d * t` (or `v + d * t
    + e * (t % 2)`)."""
    xs: list[int | None] = (list(_numbers(c, peers)) if c is not None
                            else [None] * len(_numbers(a, peers)))
    pairs = iter(zip(_numbers(a, peers), _numbers(b, peers), xs, strict=True))
    moved: list[tuple[str, Affine]] = []

    def sub(m: re.Match[str]) -> str:
        v, w, x = next(pairs)
        if v == w and (x is None or x == v):
            return m[0]
        moving = _moving(v, w, x)
        terms = spell_terms(moving.coef, moving.alt)
        if m[2] == "ULL":
            return f"static_cast<uint64_t>({v}LL{terms})"
        return f"({v}{m[2] or ''}{terms})"

    def slot_text(slot: str, text: str) -> str:
        """`text` moved by the trip; a static slot's literal moves as an `Affine`."""
        if not _static(a, slot):
            return _NUMBER.sub(sub, text)
        v, w, x = next(pairs)
        if v != w or (x is not None and x != v):
            moved.append((slot, _moving(v, w, x)))
        return text

    # the order of `_texts`: slots, let, then a reduce's sources and weights
    names = _slots(peers)
    slots = [(slot, slot_text(slot, getattr(a, f"c_{slot}"))) for slot in names]
    let = tuple((name, _NUMBER.sub(sub, v)) for name, v in a.let)
    static = [(slot, getattr(a, f"c_{slot}")) for slot in names]
    red = a.reduction
    if red is not None:
        if peers:
            slots += [(f"srcpeer{i}", slot_text(f"srcpeer{i}", peer))
                      for i, (peer, _) in enumerate(a.c_srcs)]
            static += [(f"srcpeer{i}", peer) for i, (peer, _) in enumerate(a.c_srcs)]
        slots += [(f"src{i}", slot_text(f"src{i}", off)) for i, (_, off) in enumerate(a.c_srcs)]
        static += [(f"src{i}", f"{off}ULL") for i, (_, off) in enumerate(red.srcs)]
        red = replace(red, weights=tuple(_NUMBER.sub(sub, w) for w in red.weights))
    rt = tuple((slot, text) for (slot, text), (_, before) in zip(slots, static, strict=True)
               if text != before or slot in dict(a.rt))
    if not peers:  # a run-time peer: codegen.rtpeer
        rt += tuple(kv for kv in a.rt if kv[0] in _PEERS)
    texts = {slot for slot, _ in rt}
    affine = tuple(kv for kv in a.affine if kv[0] not in texts) + tuple(moved)
    return replace(a, rt=rt, let=let, reduction=red, affine=affine)


# the literals `_body` prints, for `at_trip`
_TRIP = re.compile(r"(?P<cast>static_cast<uint64_t>)?\((?P<v>-?\d+)(?P<ll>LL)?"
                   r"(?: \+ (?P<d>-?\d+)LL \* t)?(?: \+ (?P<e>-?\d+)LL \* \(t % 2\))?\)")


def at_trip(s: Step, t: int) -> Step:
    """A loop body's step with its literals (`v + d * t`, `v + d * t + e * (t % 2)`)
    evaluated for trip `t`: the step the unrolled run printed there (the oracle of
    tests/codegen/test_ranks.py and test_reroll.py)."""

    def value(m: re.Match[str]) -> str:
        if m["d"] is None and m["e"] is None:
            return m[0]
        v = int(m["v"]) + int(m["d"] or 0) * t + int(m["e"] or 0) * (t % 2)
        return f"{v}ULL" if m["cast"] else f"{v}{m['ll'] or ''}"

    s = evaluated(s, t)
    red = s.reduction
    if red is not None:
        red = replace(red, weights=tuple(_TRIP.sub(value, w) for w in red.weights))
    return replace(s, rt=tuple((k, _TRIP.sub(value, v)) for k, v in s.rt),
                   let=tuple((k, _TRIP.sub(value, v)) for k, v in s.let), reduction=red)


def evaluated(s: Step, t: int) -> Step:
    """`s` with its `affine` slots (`Step.affine`) set to their values at trip `t`."""
    if not s.affine:
        return s
    at = {slot: a.at(t) for slot, a in s.affine}
    red = s.reduction
    if red is not None:
        red = replace(red, srcs=tuple((at.get(f"srcpeer{i}", peer), at.get(f"src{i}", off))
                                      for i, (peer, off) in enumerate(red.srcs)))
    fields: dict[str, Any] = {slot: v for slot, v in at.items() if slot in _PEER_SLOTS}
    return replace(s, **fields, reduction=red, affine=())


def texts(s: Step) -> list[str]:
    """Every printed text of `s` whose numbers may change between repetitions."""
    return _texts(s)


def fold_key(s: Step) -> tuple[Step, tuple[str, ...]] | None:
    """What must be equal between two repetitions of `s` for a run to fold (None: `s`
    never folds); codegen.loops asks it of a sampled loop's neighbours."""
    return _key(s)


def loop_body(first: Sequence[Step], second: Sequence[Step]) -> tuple[Step, ...]:
    """The body of a `loop` whose first two repetitions are `first` and `second`."""
    return _body(first, second)


def reroll(steps: Sequence[Step], peers: bool = False) -> tuple[Step, ...]:
    """`steps` with repeated runs folded into `loop` steps (module doc; `peers`: the
    peers and words may change too, in a program folded over the ranks, codegen.ranks)."""
    out: list[Step] = []
    facts = _Facts(steps, peers)
    i = 0
    while i < len(steps):
        best = (1, 1)  # (count, period)
        for period in range(1, (MAX_PEER_PERIOD if peers else MAX_PERIOD) + 1):
            count = _run(facts, i, period, periodic=peers)
            if count >= MIN_COUNT and count * period > best[0] * best[1]:
                best = (count, period)
        count, period = best
        if count < MIN_COUNT or all(s.kind is StepKind.COMMENT for s in steps[i:i + period]):
            out.append(steps[i])
            i += 1
            continue
        body = _body(steps[i:i + period], steps[i + period:i + 2 * period], peers,
                     steps[i + 2 * period:i + 3 * period] if peers else None)
        out.append(Step(StepKind.LOOP, value=count, body=body))
        i += count * period
    return tuple(out)


def map_sequences(segments: Sequence[Segment],
                  f: Callable[[tuple[Step, ...]], tuple[Step, ...]]) -> list[Segment]:
    """`f` applied to every step sequence of `segments`; consecutive segments of group
    steps (one per block-level op) are one sequence first, so that a block-level loop is
    seen whole."""
    merged: list[Segment] = []
    for seg in segments:
        if merged and not seg.branches and not merged[-1].branches:
            merged[-1] = replace(merged[-1], steps=merged[-1].steps + seg.steps)
        else:
            merged.append(seg)
    return [replace(seg, steps=f(seg.steps),
                    branches=tuple(Branch(b.scope, b.index, f(b.steps)) for b in seg.branches))
            for seg in merged]


def reroll_segments(segments: Sequence[Segment], peers: bool = False) -> list[Segment]:
    """Every segment rerolled (`map_sequences`: a block-level loop folds too)."""
    return map_sequences(segments, lambda steps: reroll(steps, peers))


__all__ = ["MAX_PEER_PERIOD", "MAX_PERIOD", "MIN_COUNT", "MIN_PERIODIC", "at_trip", "evaluated",
           "fold_key", "loop_body", "reroll", "reroll_segments", "texts"]
