"""Fold the per-rank programs of a kernel into programs of the run-time rank (issue 26, item 4).

`codegen.plan` lowers every rank's logical blocks separately, so a kernel used to carry
one device function per rank and block, its size growing with the team.  Most programs
are the same on every rank up to numbers that depend on the rank: the peer `(me + k) %
n`, the offset of my slot in a peer's window `base + me * size`, the offset of peer p's
block `base + p * size`, the lane of a peer of `peers()` (`i + (me <= i)`).  This pass
finds, for each logical block, classes of ranks whose programs print the same text up to
their integer literals, and gives each class one function whose literals are C
expressions of `c.rank` (the run-time rank), fitted exactly to the ranks of the class:

    affine       A + B * c.rank
    rotation     A + S * ((B * c.rank + K) % N)         N the team size
    one apart    A + S * (c.rank == T)                  (my own lane: a local address)
    step         A + S * (c.rank <= T)                  (a lane of `peers()`)

The first fitting form is taken (constants stay literals).  A class whose literals do not
all fit is split (rank 0 and rank N-1 apart, then every rank alone: the per-rank
functions of before).  The kernel's dispatch labels every rank of a class with its
function (`BlockProgram.cases`).

What is compared are the printed texts of the steps (`codegen.spell.cuda` through the
`c_*` fields of `steps.Step`), so a folded function executed on rank r runs exactly the
calls rank r's own program did: `at_rank` evaluates a folded program's expressions for
one rank, and tests/codegen/test_ranks.py checks that it prints the unfolded program of
every rank, over the library at 2, 4 and 8 ranks.  After folding, runs of per-peer steps
(whose literals now differ from one peer to the next by constants) become device loops
(`codegen.reroll` with `peers=True`), and consecutive warp or thread branches that differ
only by affine literals become one branch over a range of lanes (`fold_lanes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from ccogen.codegen.model import BlockProgram, KernelModel, Segment
from ccogen.codegen.reroll import map_sequences, reroll_segments
from ccogen.codegen.steps import Step, StepKind

# the printed texts of a step whose literals may depend on the rank, `Step.c_<slot>`
SLOTS = ("peer", "off", "value", "per_epoch", "dst_peer", "dst_off", "src_peer", "src_off",
         "nbytes", "seq", "trips", "vec", "src", "queue", "line")
_NUMBER = re.compile(r"(?<![\w.])(-?\d+)(ULL|LL)?(?![\w.])")
ME = "c.rank"

Numbers = list[int]
Rewrite = Callable[[re.Match[str]], str]


# ----------------------------------------------------------------------------- one step


def texts(s: Step) -> list[str]:
    """Every printed text of `s` whose literals may depend on the rank, in one order."""
    out = [getattr(s, f"c_{slot}") for slot in SLOTS] + [v for _, v in s.let]
    if s.reduction is not None:
        for peer, off in s.c_srcs:
            out += [peer, off]
        out += list(s.reduction.weights)
    return out


# steps whose `text` is a comment: the folded program prints every rank's comment
COMMENTED = frozenset({StepKind.COMMENT, StepKind.SPREAD})


def fixed(s: Step) -> Step:
    """`s` with its rank-dependent texts (`texts`), its comment and its nested steps
    taken out."""
    red = s.reduction
    if red is not None:
        red = replace(red, srcs=tuple((0, 0) for _ in red.srcs), weights=())
    spread = s.spread
    if spread is not None:
        spread = replace(spread, cases=())
    text = "" if s.kind in COMMENTED else s.text
    return replace(s, text=text, peer=0, off=0, value=0, per_epoch=0, dst_peer=0, dst_off=0,
                   src_peer=0,
                   src_off=0, nbytes=0, seq=0, vec=False, src=0, queue=0, line=0, rt=(), affine=(),
                   let=tuple((name, "") for name, _ in s.let), reduction=red, body=(),
                   spread=spread)


def rewrite(s: Step, sub: Rewrite) -> Step:
    """`s` with every literal of `texts` replaced by `sub(match)` (nested steps apart)."""
    rt = dict(s.rt)
    for slot in SLOTS:
        before = getattr(s, f"c_{slot}")
        after = _NUMBER.sub(sub, before)
        if after != before or slot in rt:
            rt[slot] = after
    let = tuple((name, _NUMBER.sub(sub, v)) for name, v in s.let)
    red = s.reduction
    if red is not None:
        for i, (peer, off) in enumerate(s.c_srcs):
            for key, before in ((f"srcpeer{i}", peer), (f"src{i}", off)):
                after = _NUMBER.sub(sub, before)
                if after != before or key in rt:
                    rt[key] = after
        red = replace(red, weights=tuple(_NUMBER.sub(sub, w) for w in red.weights))
    # a slot now printed as a rank expression is a run-time text (its `Affine` in it)
    affine = tuple((slot, a) for slot, a in s.affine if slot not in rt)
    return replace(s, rt=tuple(rt.items()), let=let, reduction=red, affine=affine)


# ----------------------------------------------------------------------------- walking


def _map_step(s: Step, f: Callable[[Step], Step]) -> Step:
    if s.body:
        s = replace(s, body=tuple(_map_step(b, f) for b in s.body))
    if s.spread is not None:
        s = replace(s, spread=replace(s.spread, cases=tuple(
            tuple(_map_step(b, f) for b in case) for case in s.spread.cases)))
    return f(s)


def map_program(segments: Sequence[Segment], f: Callable[[Step], Step]) -> tuple[Segment, ...]:
    """`segments` with `f` applied to every step, nested ones first, in printing order."""
    out = []
    for seg in segments:
        steps = tuple(_map_step(s, f) for s in seg.steps)
        branches = tuple(replace(b, steps=tuple(_map_step(s, f) for s in b.steps))
                         for b in seg.branches)
        join = None if seg.join is None else _map_step(seg.join, f)
        out.append(replace(seg, steps=steps, branches=branches, join=join))
    return tuple(out)


def comments(p: BlockProgram) -> list[str]:
    """The comments of `p` (`COMMENTED`), in printing order."""
    out: list[str] = []

    def visit(s: Step) -> Step:
        if s.kind in COMMENTED:
            out.append(s.text)
        return s

    map_program(p.segments, visit)
    return out


def merged(texts: Sequence[str]) -> str:
    """One comment for the ranks' `texts` of one step: each distinct one, in order."""
    distinct = list(dict.fromkeys(texts))
    return distinct[0] + "".join(" | " + t.removeprefix("// ") for t in distinct[1:])


def _shape_numbers(p: BlockProgram) -> tuple[object, Numbers]:
    """What must be equal for two ranks' programs to fold, and their literals in order."""
    keys: list[object] = []
    numbers: Numbers = []

    def visit(s: Step) -> Step:
        skeletons = []
        for text in texts(s):
            parts = _NUMBER.split(text)
            numbers.extend(int(n) for n in parts[1::3])
            skeletons.append((tuple(parts[0::3]), tuple(parts[2::3])))
        keys.append((fixed(s), tuple(skeletons)))
        return s

    map_program(p.segments, visit)
    frame = tuple((len(seg.steps), tuple((b.scope, b.index, len(b.steps), b.count)
                                         for b in seg.branches), seg.join is None)
                  for seg in p.segments)
    return (p.syncs, frame, tuple(keys)), numbers


# ----------------------------------------------------------------------------- fitting


def fit(ranks: Sequence[int], values: Sequence[int], nranks: int) -> tuple[int, ...] | None:
    """The form of `values` over `ranks` (module doc): () a constant, (A, B) affine,
    (A, S, B, K) a rotation, (A, S, T) a step, (A, S, T, -1) one rank apart; None if
    none fits."""
    if all(v == values[0] for v in values):
        return ()
    r0, v0 = ranks[0], values[0]
    r1, v1 = ranks[1], values[1]
    if (v1 - v0) % (r1 - r0) == 0:
        b = (v1 - v0) // (r1 - r0)
        a = v0 - b * r0
        if all(v == a + b * r for r, v in zip(ranks, values, strict=True)):
            return (a, b)
    for t in range(nranks - 1):
        inside = [v for r, v in zip(ranks, values, strict=True) if r <= t]
        outside = [v for r, v in zip(ranks, values, strict=True) if r > t]
        if inside and outside and len(set(inside)) == 1 and len(set(outside)) == 1:
            return (outside[0], inside[0] - outside[0], t)
    for t in range(nranks):
        hit = [v for r, v in zip(ranks, values, strict=True) if r == t]
        rest = [v for r, v in zip(ranks, values, strict=True) if r != t]
        if hit and rest and len(set(rest)) == 1:
            return (rest[0], hit[0] - rest[0], t, -1)
    for b in range(1, nranks):
        for k in range(nranks):
            found = _scaled([(b * r + k) % nranks for r in ranks], values)
            if found is not None:
                return (found[0], found[1], b, k)
    return None


def _scaled(m: Sequence[int], values: Sequence[int]) -> tuple[int, int] | None:
    """(A, S) with values == A + S * m, or None."""
    i = next((j for j in range(1, len(m)) if m[j] != m[0]), None)
    if i is None or (values[i] - values[0]) % (m[i] - m[0]):
        return None
    s = (values[i] - values[0]) // (m[i] - m[0])
    a = values[0] - s * m[0]
    ok = all(v == a + s * x for x, v in zip(m, values, strict=True))
    return (a, s) if ok else None


def spell(form: tuple[int, ...], suffix: str, nranks: int) -> str:
    """The C text of a fitted literal (`fit`) printed with `suffix` (ULL, LL or none)."""
    ll = "LL" if suffix else ""
    if len(form) == 2:
        expr = f"{form[0]}{ll} + {form[1]}{ll} * {ME}"
    elif len(form) == 3:
        expr = f"{form[0]}{ll} + {form[1]}{ll} * ({ME} <= {form[2]})"
    elif form[3] < 0:
        expr = f"{form[0]}{ll} + {form[1]}{ll} * ({ME} == {form[2]})"
    else:
        a, s, b, k = form
        expr = f"{a}{ll} + {s}{ll} * (({b} * {ME} + {k}) % {nranks})"
    return f"static_cast<uint64_t>({expr})" if suffix == "ULL" else f"({expr})"


# the texts `spell` prints, for `at_rank`
_FORMULA = re.compile(
    r"(?P<cast>static_cast<uint64_t>)?\((?P<a>-?\d+)(?P<ll>LL)? \+ (?P<s>-?\d+)(?:LL)? \* "
    r"(?:(?P<me>c\.rank)|\(c\.rank <= (?P<t>-?\d+)\)|\(c\.rank == (?P<e>-?\d+)\)"
    r"|\(\((?P<b>\d+) \* c\.rank \+ (?P<k>\d+)\) % (?P<n>\d+)\))\)")


def _evaluate(m: re.Match[str], rank: int) -> str:
    a, s = int(m["a"]), int(m["s"])
    if m["me"]:
        x = rank
    elif m["t"] is not None:
        x = int(rank <= int(m["t"]))
    elif m["e"] is not None:
        x = int(rank == int(m["e"]))
    else:
        x = (int(m["b"]) * rank + int(m["k"])) % int(m["n"])
    suffix = "ULL" if m["cast"] else (m["ll"] or "")
    return f"{a + s * x}{suffix}"


def at_rank(p: BlockProgram, rank: int) -> tuple[Segment, ...]:
    """A folded program's segments with every rank expression evaluated for `rank` (the
    oracle of tests/codegen/test_ranks.py: the text rank `rank`'s own program prints)."""

    def f(s: Step) -> Step:
        rt = tuple((k, _FORMULA.sub(lambda m: _evaluate(m, rank), v)) for k, v in s.rt)
        let = tuple((k, _FORMULA.sub(lambda m: _evaluate(m, rank), v)) for k, v in s.let)
        red = s.reduction
        if red is not None:
            red = replace(red, weights=tuple(_FORMULA.sub(lambda m: _evaluate(m, rank), w)
                                             for w in red.weights))
        return replace(s, rt=rt, let=let, reduction=red)

    return map_program(p.segments, f)


# ----------------------------------------------------------------------------- folding


def _fold_class(programs: Sequence[BlockProgram], nranks: int,
                numbers: Sequence[Numbers], blocks: int) -> BlockProgram | None:
    """One program for the ranks of `programs` (equal shapes), or None."""
    first = programs[0]
    if len(programs) == 1:
        return first
    ranks = [p.rank for p in programs]
    forms = []
    for column in zip(*numbers, strict=True):
        form = fit(ranks, column, nranks)
        if form is None:
            return None
        forms.append(form)
    it: Iterator[tuple[int, ...]] = iter(forms)

    def sub(m: re.Match[str]) -> str:
        form = next(it)
        return m[0] if not form else spell(form, m[2] or "", nranks)

    notes = iter([merged(column) for column in zip(*(comments(p) for p in programs),
                                                   strict=True)])

    def f(s: Step) -> Step:
        s = rewrite(s, sub)
        return replace(s, text=next(notes)) if s.kind in COMMENTED else s

    segments = map_program(first.segments, f)
    return replace(first, segments=segments,
                   cases=tuple(r * blocks + first.block for r in ranks))


def _classes(programs: Sequence[BlockProgram], nranks: int,
             blocks: int) -> list[BlockProgram]:
    """The programs of one logical block over every rank, folded (module doc)."""
    shaped = [(p, *_shape_numbers(p)) for p in programs]
    groups: dict[object, list[tuple[BlockProgram, Numbers]]] = {}
    for p, shape, numbers in shaped:
        groups.setdefault(shape, []).append((p, numbers))
    out: list[BlockProgram] = []
    for members in groups.values():
        pending = [members]
        while pending:
            group = pending.pop(0)
            folded = _fold_class([p for p, _ in group], nranks, [n for _, n in group], blocks)
            if folded is not None:
                out.append(folded)
                continue
            ends = [m for m in group if m[0].rank in (0, nranks - 1)]
            middle = [m for m in group if m[0].rank not in (0, nranks - 1)]
            if ends and middle:
                pending += [middle, *([m] for m in ends)]
            else:
                pending += [[m] for m in group]
    return sorted(out, key=lambda p: p.rank)


def fold_kernel(k: KernelModel, nranks: int) -> KernelModel:
    """`k` with each logical block's programs folded over the ranks (module doc)."""
    by_block: dict[int, list[BlockProgram]] = {}
    for p in k.programs:
        by_block.setdefault(p.block, []).append(p)
    programs = [p for block in sorted(by_block)
                for p in _classes(by_block[block], nranks, k.blocks)]
    programs.sort(key=lambda p: (p.rank, p.block))
    return replace(k, programs=tuple(programs))


def fold_ranks(k: KernelModel, nranks: int, inline_steps: int | None = None) -> KernelModel:
    """`fold_kernel`, then the per-peer runs of every program (folded or a rank alone) as
    device loops (`codegen.reroll` with `peers=True`).  With `inline_steps` (backends.sm's
    bound), the kernel's inline decision is taken again on the steps it now prints (a
    loop's body once): what ptxas compiles."""
    k = fold_kernel(k, nranks)
    before = k.programs
    # a rank alone (a root, the end of a chain) rolls its per-peer and per-chunk runs too
    k = replace(k, programs=tuple(
        replace(p, segments=tuple(reroll_segments(_once(p.segments), peers=True)))
        for p in k.programs))
    if inline_steps is not None and (any(p.folded for p in k.programs)
                                     or k.programs != before):
        k = replace(k, inline=sum(printed_steps(p) for p in k.programs) <= inline_steps)
    return k


def printed_steps(p: BlockProgram) -> int:
    """The steps `p` prints, nested ones included (a loop's body once)."""
    n = 0

    def visit(s: Step) -> Step:
        nonlocal n
        n += 1
        return s

    map_program(p.segments, visit)
    return n


def _once(segments: Sequence[Segment]) -> list[Segment]:
    """`segments` with each run of one comment printed once (the lanes of a `lanes p in
    peers()` run as phases print their op's comment each)."""

    def dedupe(steps: tuple[Step, ...]) -> tuple[Step, ...]:
        out: list[Step] = []
        for s in steps:
            if not (s.kind is StepKind.COMMENT and out and out[-1] == s):
                out.append(s)
        return tuple(out)

    return map_sequences(segments, dedupe)


__all__ = ["COMMENTED", "SLOTS", "at_rank", "comments", "fit", "fixed", "fold_kernel",
           "fold_ranks", "map_program", "printed_steps", "rewrite", "spell", "texts"]
