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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from ccogen.codegen.model import Branch, Segment
from ccogen.codegen.steps import Step, StepKind

MIN_COUNT = 3
MAX_PERIOD = 8
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
    s = replace(s, dst_off=0, src_off=0, nbytes=0, value=0, vec=False, seq=0, rt=(),
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


def _run(facts: _Facts, i: int, period: int) -> int:
    """How many repetitions of steps[i : i + period] start at i (affine numbers)."""
    total = len(facts.keys)
    keys = facts.keys[i:i + period]
    if len(keys) < period or any(k is None for k in keys):
        return 1
    base = [facts.numbers(j) for j in range(i, i + period)]
    delta: list[list[int]] | None = None
    count = 1
    while i + (count + 1) * period <= total:
        start = i + count * period
        if facts.keys[start:start + period] != keys:
            break
        nums = [facts.numbers(j) for j in range(start, start + period)]
        if delta is None:
            delta = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(base, nums,
                                                                                strict=True)]
        elif any(n != a + count * d for x, y, dd in zip(base, nums, delta, strict=True)
                 for a, n, d in zip(x, y, dd, strict=True)):
            break
        count += 1
    return count


def _body(first: Sequence[Step], second: Sequence[Step],
          peers: bool = False) -> tuple[Step, ...]:
    """The period with every literal that changes printed as `v + d * t`."""
    out = []
    names = _slots(peers)
    for a, b in zip(first, second, strict=True):
        pairs = iter(zip(_numbers(a, peers), _numbers(b, peers), strict=True))

        def sub(m: re.Match[str], pairs: object = pairs) -> str:
            v, w = next(pairs)  # type: ignore[call-overload]
            if v == w:
                return m[0]
            if m[2] == "ULL":
                return f"static_cast<uint64_t>({v}LL + {w - v}LL * t)"
            return f"({v}{m[2] or ''} + {w - v}LL * t)"

        # the order of `_texts`: slots, let, then a reduce's sources and weights
        slots = [(slot, _NUMBER.sub(sub, getattr(a, f"c_{slot}"))) for slot in names]
        let = tuple((name, _NUMBER.sub(sub, v)) for name, v in a.let)
        static = [(slot, getattr(a, f"c_{slot}")) for slot in names]
        red = a.reduction
        if red is not None:
            if peers:
                slots += [(f"srcpeer{i}", _NUMBER.sub(sub, peer))
                          for i, (peer, _) in enumerate(a.c_srcs)]
                static += [(f"srcpeer{i}", peer) for i, (peer, _) in enumerate(a.c_srcs)]
            slots += [(f"src{i}", _NUMBER.sub(sub, off)) for i, (_, off) in enumerate(a.c_srcs)]
            static += [(f"src{i}", f"{off}ULL") for i, (_, off) in enumerate(red.srcs)]
            red = replace(red, weights=tuple(_NUMBER.sub(sub, w) for w in red.weights))
        rt = tuple((slot, text) for (slot, text), (_, before) in zip(slots, static, strict=True)
                   if text != before or slot in dict(a.rt))
        if not peers:  # a run-time peer: codegen.rtpeer
            rt += tuple(kv for kv in a.rt if kv[0] in _PEERS)
        out.append(replace(a, rt=rt, let=let, reduction=red))
    return tuple(out)


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
        for period in range(1, MAX_PERIOD + 1):
            count = _run(facts, i, period)
            if count >= MIN_COUNT and count * period > best[0] * best[1]:
                best = (count, period)
        count, period = best
        if count < MIN_COUNT or all(s.kind is StepKind.COMMENT for s in steps[i:i + period]):
            out.append(steps[i])
            i += 1
            continue
        body = _body(steps[i:i + period], steps[i + period:i + 2 * period], peers)
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


__all__ = ["MAX_PERIOD", "MIN_COUNT", "fold_key", "loop_body", "reroll",
           "reroll_segments", "texts"]
