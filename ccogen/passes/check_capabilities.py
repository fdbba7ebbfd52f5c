"""What the chosen target can lower: alignment, barrier slots, features (E040, E041, E042)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.evaluate import Compiler, Env, EvalError
from ccogen.ir.instance import Instance, Issuer, IssuerLevel, OpInst, RegionInst
from ccogen.ir.nodes import Expr, TeamKind
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import (
    Findings,
    ProgramOrder,
    first_spans,
    fmt_bytes,
    keyword_span,
    number_list,
    plural,
    region_text,
    target_caps,
)
from ccogen.passes.base import Pass, PassContext
from ccogen.source import Span
from ccogen.targets import providers
from ccogen.targets.base import BUFFER_ALIGN, Alignment, Capabilities, Feature, Support, align_up


@dataclass(frozen=True)
class CheckCapabilities(Pass):
    """The op and options the selected target cannot lower (only with a target).

    Requires: an instance; `ctx.target` a name in `ccogen.targets.TARGETS`.
    Guarantees: nothing; a check.
    Emits: E040 for a `put`/`get` whose operand address (window base + offset) or
    length breaks the target's alignment (`alignment`, or `counted_alignment` for a
    counted put); the window base is its `align=` or the target's `window_align`.
    Counters cannot be misaligned: ccogen lays them out (`targets.base.counter_offsets`).
    E041 where one block issues `barrier()` from more concurrent issuers than the
    target's barrier slots per block.  E005 where the target's warps are wider than 32
    threads (`warp_threads`: MORI's waves are 64) and a kernel's warps then need
    more threads than a block can have (never clamped: the warps past it would not
    run, and whatever waits for them would hang).  E042 for a feature the target lacks
    (`team world`, counted writes, `get`, a `reduce` reading a peer's window,
    `signal`, local buffers, `reset_count`, a run-time peer), naming the targets that
    have it and the alternative.
    """

    name: ClassVar[str] = "check-capabilities"
    codes: ClassVar[tuple[str, ...]] = ("E005", "E040", "E041", "E042")

    def run(self, ctx: PassContext) -> None:
        caps = target_caps(ctx)
        if caps is None:
            return
        findings = Findings(ctx)
        _features(ctx.instance, caps, findings)
        _block_threads(ctx.instance, caps, findings)
        aligns = _window_aligns(ctx.instance, caps)
        sites: dict[Span | None, list[_Misfit]] = defaultdict(list)
        for ops in ctx.instance.ranks:
            for op in ops:
                misfit = _misfit(op, caps, aligns)
                if misfit is not None:
                    sites[op.span].append(misfit)
            _barrier_slots(ops, ctx.instance, caps, findings)
        for misfits in sites.values():
            _report_alignment(misfits, caps, findings)
        findings.flush()


# ----------------------------------------------------------------------------- E005


def _block_threads(instance: Instance, caps: Capabilities, findings: Findings) -> None:
    """Warps mapped onto the target's hardware warps fit in one block."""
    worst: dict[int, tuple[int, OpInst]] = {}
    for ops in instance.ranks:
        for op in ops:
            need = caps.threads_needed(op.issuer)
            if need > caps.max_block_threads and need > worst.get(op.kernel, (0, op))[0]:
                worst[op.kernel] = (need, op)
    for kernel, (need, op) in sorted(worst.items()):
        k = instance.kernels[kernel]
        who = f"warp {op.issuer.warp}" if op.issuer.warp is not None else f"lane {op.issuer.lane}"
        first = caps.hw_thread(op.issuer)
        findings.add(error(
            "E005", f"kernel `{k.name}` needs {need} threads per block on `{caps.name}`, "
            f"over the {caps.max_block_threads} a block can have",
            op.span, f"{who} runs on hardware thread {first}",
            secondary=[(k.span, "the kernel")],
            notes=[f"on `{caps.name}` an IR warp is a hardware warp of {caps.warp_threads} "
                   f"threads: warp w runs on threads {caps.warp_threads}w .. "
                   f"{caps.warp_threads}w+{caps.warp_threads - 1}",
                   "a block of fewer threads would not run this issuer, and every wait on "
                   "what it sends would hang"],
            help=f"use at most {caps.max_block_threads // caps.warp_threads} warps per block "
                 "on this target, or spread them over `blocks`"))


# ----------------------------------------------------------------------------- E042


def _features(instance: Instance, caps: Capabilities, findings: Findings) -> None:
    team = instance.protocol.team
    kind = Feature.TEAM_WORLD if team.kind is TeamKind.WORLD else Feature.TEAM_LSA
    if not caps.supports(kind).available:
        _unsupported(caps, kind, f"`{kind.value}`", team.span, [], findings)
    ops = [op for rank_ops in instance.ranks for op in rank_ops]
    counted = [op for op in ops if op.counter is not None]
    if counted and not caps.supports(Feature.COUNTED_WRITES).available:
        _unsupported(caps, Feature.COUNTED_WRITES, "counted writes (`count=`, `wait_count`)",
                     None, counted, findings)
    gets = [op for op in ops if op.kind is OpKind.GET]
    if gets and not caps.supports(Feature.GET).available:
        _unsupported(caps, Feature.GET, "`get`", None, gets, findings)
    peer_reads = [op for op in ops if op.kind.traits.reduces
                  and any(s.rank != op.rank for s in op.srcs)]
    if peer_reads and not caps.supports(Feature.PEER_READS).available:
        _unsupported(caps, Feature.PEER_READS, "a `reduce` that reads a peer's window "
                     "(`x@p` in `srcs`)", None, peer_reads, findings)
    converting = [op for op in ops if op.kind.traits.reduces and
                  any(instance.dtype(s.window) is not op.dtype for s in op.srcs)]
    if converting and not caps.supports(Feature.CONVERTING_REDUCE).available:
        _unsupported(caps, Feature.CONVERTING_REDUCE, "a `reduce` that converts between "
                     "element types (a source's type is not `dst`'s)", None, converting,
                     findings)
    if instance.period > 1 and not caps.supports(Feature.LAUNCH_ROTATION).available:
        _unsupported(caps, Feature.LAUNCH_ROTATION, "`launch % K` (regions that depend on the "
                     "launch)", None, _rotating(instance), findings)
    credits = [op for op in ops if op.kind is OpKind.SIGNAL]
    if credits and not caps.supports(Feature.CREDITS).available:
        _unsupported(caps, Feature.CREDITS, "`signal`", None, credits, findings)
    resets = [op for op in ops if op.kind is OpKind.RESET_COUNT]
    if resets and not caps.supports(Feature.COUNTER_RESET).available:
        _unsupported(caps, Feature.COUNTER_RESET, "`reset_count`", None, resets, findings)
    rt_peers = [op for op in ops if op.rt_peer is not None and op.rt_peer.first]
    if rt_peers and not caps.supports(Feature.RUNTIME_PEERS).available:
        _unsupported(caps, Feature.RUNTIME_PEERS, "a `put` to a run-time peer (one "
                     "read on the device)", None, rt_peers, findings)
    buffers = instance.protocol.buffers
    if buffers and not caps.supports(Feature.LOCAL_BUFFERS).available:
        _unsupported(caps, Feature.LOCAL_BUFFERS, f"local buffers (`buffer {buffers[0].name}`)",
                     buffers[0].span, [], findings)


def _rotating(instance: Instance) -> list[OpInst]:
    """The ops whose regions differ between launches (`launch % K`), by rank in order."""
    later = [op for other in instance.rotation for ops in other.ranks for op in ops]
    by_key = {(op.rank, op.index): op for op in later}
    return [op for ops in instance.ranks for op in ops
            if (o := by_key.get((op.rank, op.index))) is not None
            and (o.dst, o.src, o.srcs) != (op.dst, op.src, op.srcs)]


def _unsupported(caps: Capabilities, feature: Feature, what: str, span: Span | None,
                 ops: list[OpInst], findings: Findings) -> None:
    spans = first_spans(ops, 4)
    if span is None and spans:
        span = _feature_span(ops, spans[0], feature)
        spans = spans[1:]
    found = providers(feature)
    mixed = any(how is not Support.NATIVE for _, how in found)
    can = ", ".join(f"`{name}`" + (f" ({how.value})" if mixed else "") for name, how in found)
    notes = [caps.reason(feature) or f"`{caps.name}` has no lowering for it"]
    findings.add(error(
        "E042", f"`{caps.name}` cannot lower {what}", span, "not available on this target",
        secondary=[(s, "also needs it") for s in spans], notes=notes,
        help=f"targets that can: {can}" + _alternative(feature)))


def _feature_span(ops: list[OpInst], span: Span, feature: Feature) -> Span | None:
    if feature is Feature.COUNTED_WRITES:
        op = next(op for op in ops if op.span == span)
        return keyword_span(span, "count") if op.kind is OpKind.PUT else span
    return span


def _alternative(feature: Feature) -> str:
    if feature is Feature.TEAM_WORLD:
        return "; or, if every rank is on one node, write `team lsa`"
    if feature is Feature.COUNTED_WRITES:
        return '; or signal each put (`signal="remote"`) and `wait_signal` for it'
    if feature is Feature.PEER_READS:
        return ('; or bring the peer\'s region over first and reduce locally: '
                '`get(p, dst=stage, src=x, signal="local")`, `wait_signal(me, ...)`, then '
                '`reduce(dst=..., srcs=[..., stage])` (or have the peer `put` it into a '
                'landing window and signal)')
    if feature is Feature.COUNTER_RESET:
        return ("; or drop `reset_count`: expected values already advance from epoch to "
                "epoch")
    if feature is Feature.LOCAL_BUFFERS:
        return ("; or declare it a `window` (the caller copies its tensor in before the "
                "launch)")
    if feature is Feature.RUNTIME_PEERS:
        return ("; or name the peer at instantiation: one put per candidate rank whose "
                "length is 0 unless the value read is that rank (`hit = load(table[i]) == p`, "
                "`put(p, dst=x[a : a + hit * n], ...)`, as protocols/moe_dispatch.cco does)")
    if feature is Feature.LAUNCH_ROTATION:
        return ("; or give the landing slots a `barrier()` or credits instead of rotating "
                "them by launch (`alltoall.cco` beside `alltoall_rotating.cco`)")
    if feature is Feature.CONVERTING_REDUCE:
        return ("; or keep every region of a `reduce` in one element type (f32 windows for "
                "f32 sums)")
    if feature is Feature.CREDITS:
        return ('; or send the credit with data: a signalled put of a small region on the '
                'same queue (`put(p, dst=credit[me : me + 1], src=..., queue=Q, '
                'signal="remote")`), which the receiver\'s `wait_signal` counts the same way')
    return ""


# ----------------------------------------------------------------------------- E040


def _window_aligns(instance: Instance, caps: Capabilities) -> dict[str, tuple[int, Span | None]]:
    """Each window's guaranteed base alignment, and the `align=` that raised it (if any).

    The heap places every window at a multiple of `caps.window_align`, or of its
    `align=` when that is larger (codegen/layout.py).
    """
    env = Env(instance.nranks, None, instance.param_dict)
    out: dict[str, tuple[int, Span | None]] = {}
    for w in instance.protocol.windows:
        value = _evaluate(w.align, env) if w.align is not None else None
        if value is None or value <= caps.window_align:
            out[w.name] = (caps.window_align, None)
        else:
            out[w.name] = (value, w.align.span if w.align is not None else None)
    for b in instance.protocol.buffers:  # the caller's tensors: checked at each call
        out[b.name] = (BUFFER_ALIGN, None)
    return out


def _evaluate(expr: Expr, env: Env) -> int | None:
    try:
        return Compiler().integer(expr, "`align=`")(env)
    except EvalError:
        return None  # the front end owns `align=` errors


@dataclass
class _Misfit:
    """What breaks the alignment rule in one op instance."""

    op: OpInst
    rule: Alignment
    regions: list[tuple[Span | None, str]]  # misaligned `dst`/`src`: span, label
    bases: list[tuple[Span | None, str]]  # an `align=` too small for the rule
    length_bad: bool

    @property
    def score(self) -> int:
        return len(self.regions) + self.length_bad


def _misfit(op: OpInst, caps: Capabilities, aligns: dict[str, tuple[int, Span | None]]
            ) -> _Misfit | None:
    if not op.kind.traits.queued or op.dst is None or op.src is None:
        return None
    rule = caps.counted_alignment if op.counter is not None else caps.alignment
    if rule.unconstrained:
        return None
    found = _Misfit(op, rule, [], [], op.dst.size % rule.length != 0)
    for name, region, expr in (("dst", op.dst, op.op.dst), ("src", op.src, op.op.src)):  # type: ignore[union-attr]
        label, base = _region_problem(region, rule, aligns)
        if label:
            found.regions.append((expr.span or op.span, f"`{name}` {label}"))
        if base and base not in found.bases:
            found.bases.append(base)
    return found if found.score else None


def _region_problem(region: RegionInst, rule: Alignment,
                    aligns: dict[str, tuple[int, Span | None]]
                    ) -> tuple[str, tuple[Span | None, str] | None]:
    base, align_span = aligns.get(region.window, (1, None))
    if base % rule.operand != 0:
        return (f"is in `{region.window}`, whose base is only {base}-byte aligned",
                (align_span, f"`{region.window}` guaranteed only {base}-byte aligned here"))
    if region.start % rule.operand != 0:
        return f"starts at byte {region.start} of `{region.window}`", None
    return "", None


def _report_alignment(misfits: list[_Misfit], caps: Capabilities, findings: Findings) -> None:
    """One E040 per call site: the union of what its instances break, the worst as example."""
    example = max(misfits, key=lambda m: m.score)
    op, rule = example.op, example.rule
    assert op.src is not None and op.dst is not None
    misaligned = any(m.regions for m in misfits)
    sized = next((m.op for m in misfits if m.length_bad), None)
    labels = _merged_labels(example)
    diagnostic = error(
        "E040", _alignment_message(op.kind, caps.name, rule, misaligned, sized is not None),
        labels[0][0], labels[0][1], secondary=[*labels[1:], *example.bases],
        notes=(f"`{caps.name}`{' counted' if op.counter else ''} transfers need every "
               f"`dst`/`src` address (window base + offset) {rule.operand}-byte aligned and "
               f"every length a multiple of {rule.length} bytes",
               f"this `{op.kind}` moves {fmt_bytes(op.src.size)} from {region_text(op.src)} "
               f"on rank {op.src.rank} to {region_text(op.dst)} on rank {op.dst.rank}"),
        help=_alignment_help(sized.dst.size if sized and sized.dst else 0, rule, misaligned,
                             any(m.bases for m in misfits)))
    for m in misfits:
        findings.add(diagnostic, m.op.rank)


def _merged_labels(m: _Misfit) -> list[tuple[Span | None, str]]:
    """The example's labels, with the length remark joined to the `dst` label."""
    labels = list(m.regions)
    if m.length_bad:
        assert m.op.dst is not None
        text = f"{m.op.dst.size} bytes, not a multiple of {m.rule.length}"
        span = m.op.op.dst.span or m.op.span  # type: ignore[union-attr]
        at = next((i for i, (s, _) in enumerate(labels) if s == span), None)
        if at is None:
            labels.insert(0, (span, text))
        else:
            labels[at] = (span, f"{labels[at][1]}; {text}")
    return labels


def _alignment_message(kind: OpKind, target: str, rule: Alignment, misaligned: bool,
                       length_bad: bool) -> str:
    if misaligned and length_bad:
        return f"`{kind}` breaks the {rule.operand}-byte alignment rules of `{target}`"
    if misaligned:
        return f"`{kind}` operands must be {rule.operand}-byte aligned on `{target}`"
    return f"`{kind}` length must be a multiple of {rule.length} bytes on `{target}`"


def _alignment_help(size: int, rule: Alignment, misaligned: bool, base_bad: bool) -> str:
    fixes = []
    if misaligned:
        fixes.append(f"start both regions at multiples of {rule.operand}")
    if size:
        fixes.append(f"move {align_up(size, rule.length)} bytes instead of {size}")
    if base_bad:
        fixes.append(f"declare the window with `align={rule.operand}` or more")
    return "; ".join(fixes) + " (pad the windows if needed)"


# ----------------------------------------------------------------------------- E041

_MAX_BARRIER_ISSUERS = 64  # enough to show the problem; bounds the pairwise order queries


def _barrier_slots(ops: tuple[OpInst, ...], instance: Instance, caps: Capabilities,
                   findings: Findings) -> None:
    slots = caps.barriers.slots_per_block
    if slots is None:
        return
    per_block: dict[tuple[int, int], dict[Issuer, OpInst]] = defaultdict(dict)
    for op in ops:
        if op.kind is OpKind.BARRIER:
            per_block[(op.kernel, op.issuer.block)].setdefault(op.issuer, op)
    order = ProgramOrder(ops)
    for (kernel, block), first in per_block.items():
        concurrent = _concurrent_issuers(list(first.values()), order)
        if len(concurrent) > slots:
            _report_barrier(concurrent, slots, instance.kernels[kernel].blocks, block, caps,
                            findings)


def _concurrent_issuers(firsts: list[OpInst], order: ProgramOrder) -> list[OpInst]:
    """The largest set found of barrier issuers whose barriers are mutually unordered."""
    firsts = firsts[:_MAX_BARRIER_ISSUERS]
    best: list[OpInst] = []
    for seed in firsts:
        group = [seed]
        for other in firsts:
            if other is not seed and all(order.concurrent(other.index, g.index) for g in group):
                group.append(other)
        if len(group) > len(best):
            best = group
    return sorted(best, key=lambda op: op.index)


def _report_barrier(issuers: list[OpInst], slots: int, blocks: int, block: int,
                    caps: Capabilities, findings: Findings) -> None:
    first = issuers[0]
    level = first.issuer.level
    kind = {IssuerLevel.LANE: "lane", IssuerLevel.WARP: "warp"}.get(level, "issuer")
    ids = [op.issuer.lane if level is IssuerLevel.LANE else op.issuer.warp for op in issuers]
    names = f"{kind}s {number_list(i for i in ids if i is not None)}"
    extra = len(issuers) - slots
    findings.add(error(
        "E041", f"`barrier()` needs {len(issuers)} barrier slots in one block, but "
        f"`{caps.name}` has {plural(slots, 'slot')} per block",
        first.span, f"issued at once by {names} of block {block}",
        secondary=[(s, "also a `barrier()` of this block") for s in first_spans(issuers[1:], 2)
                   if s != first.span],
        notes=(f"`{caps.name}` requests `{caps.barriers.requirement} = blocks` ({blocks} here) "
               "and uses `blockIdx.x` as the barrier index; the other "
               f"{plural(extra, 'issuer')} would use an index at or over that count, a slot "
               "nobody requested",),
        help="issue `barrier()` once per block: move it out of the `warps`/`lanes` block, to "
             "the kernel top level or directly inside `blocks b in ...`"), first.rank)


__all__ = ["CheckCapabilities"]
