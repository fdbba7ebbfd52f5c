"""Instantiation: bind the team size and the parameters, evaluate, unroll.

`instantiate(protocol, nranks, params)` turns a `Protocol` into an `Instance`
(see `ccogen.ir.instance`): every loop unrolled, every expression evaluated, every
op instance with its rank, issuer, queue, regions, posting group and program-order
predecessors.  `team_sizes` says which sizes to instantiate; `parse_param_value`
reads a `--param` value.

Semantics (the contract of this module):

*Expressions* follow Python (`ccogen.ir.evaluate`): ints and bools, `//` and `%`
floor, `**` (exponent >= 0, results of `*`/`**` below 2**63 in magnitude),
chained comparisons, `and`/`or` return an operand, conditional expressions.
Built-ins: `me`, `nranks`, `peers()` (every rank but `me`, increasing), `ranks()`,
`range(...)`, `len`, `min`/`max` (several ints or one sequence), `abs`.  Sequences
are tuples of ints of at most 1,000,000 elements.  Loop variables are scoped to
their loop body.  A wrong type, a division by zero or a bad `**` is E004 at the
offending sub-expression, with the bound values in a note (`with nranks=3, me=1`).

*Declarations*.  Parameters: unknown names are E002 (at the protocol, listing the
known ones); a given value must be an `int`; defaults are evaluated in declaration
order and may use earlier parameters and `nranks`; a `bytes` parameter cannot be
negative (E002).  `team lsa(N)`/`team world(N)`: N may use parameters only and
must equal `nranks` (E002).  Window sizes, `queues N`, `threads=` and `blocks=` are
symmetric: evaluated with parameters and `nranks`, never `me` (E004).  A window
size must be > 0 (E003); `queues N` >= 1 (E002); `threads=` in 1..1024 and
`blocks=` in 1..2**31-1 (E005).  Without `blocks=` the grid is the longest
`blocks` range the kernel runs on any rank (at least 1).  `queues auto` is the
largest number of distinct issuers `(block, warp_of)` that issue auto-queued
`put`/`get` toward one peer in one kernel on one rank, capped at 8, at least 1.

*Issuers*.  The kernel top level is block 0's leader, `Issuer(block=0)`.  The
element at position i of an issuer block's range runs as issuer i; the loop
variable takes the element's value.  `blocks b in E` only at the top level of a
kernel body (E002), block i; at most `blocks=` of them (E005).  `warps w in E`:
warp i of the enclosing block; not inside `warps`/`lanes` (E002); needs
32*len(E) <= threads (E005).  `lanes x in E`: thread i (`Issuer(lane=i)`); inside
`warps` at position w thread w*32+i (`Issuer(warp=w, lane=w*32+i)`) and at most 32
lanes; otherwise at most `threads` lanes (E005); not inside `lanes` (E002).
`for`/`if` may appear anywhere and are evaluated per issuer.

*Program order* (`OpInst.preds`, minimal): an op follows the current frontier;
an issuer block forks (each issuer starts from the frontier before it) and joins
(the frontier after it is the last ops of every issuer that issued anything; if
none did, it is unchanged).  The frontier carries over from kernel k to k+1.  A
rank's ops are listed by kernel, then statement order, issuers in position order.

*Ops*.  `peer` of put/get/commit/quiet(p) and `src` of wait_signal must be in
[0, nranks) (E010); put/get/commit/quiet to `me` is E010 (a wait on one's own
slot is fine).  Regions: missing bounds are 0 and the window size; empty or out
of the window is E003; `dst` and `src` of put/get/copy must have equal lengths
(E003).  put: `dst` on the peer, `src` on me; get the reverse; copy both on me.
Queues: an explicit `queue=` is stored as evaluated (range checks are E012, not
here).  `queue=auto` on put/get/commit: issuer slot % Q where the slot is 0 for a
block leader, b for the leader of `blocks` position b, w for `warps` position w
(b*W + w inside `blocks` position b, W the length of that `warps` range), the
warp's slot for lanes inside `warps`, and thread//32 for other lanes
(b*ceil(len/32) + thread//32 inside `blocks` position b).  `quiet` without
`queue=` drains every queue (None).  `wait_signal` without `queue=` is queue 0
when Q == 1, else E002.  Any error in an op skips that op instance only; its
successors follow its predecessors.

*Posting groups*.  Lane op instances of one call site issued by one hardware warp
(same block and `warp_of`) in the same iteration of every enclosing `for` (by
iteration number, inside and outside the lanes body) share a group;
`lanes_in_group` counts them.  Every other op instance is a group of its own.
Group ids are dense per rank, in order of first appearance.

*ensure* runs per rank with `me` bound: `for`/`if` and comparisons, each
becoming a `CheckInst`; `w@p` names rank p (E010 outside the team), bounds and
lengths as above (E003).

*Limits* (`ccogen.limits`, raised with `--limit NAME=N`).  More than 1,000,000 op
instances (all ranks, kernels and checks) or 4,000,000 loop iterations is E006 at the
outermost loop running, and no instance; so is a team over 1,024 ranks (at the team
declaration) or a window over 1 TiB (at its size).

*Diagnostics* carry a note naming the instance (`in the instance nranks=3,
block=1048576`).  Identical ones (code, span, message) from several ranks or
iterations are reported once with the ranks in a note; at one place at most three
different messages of one code are shown, then a count of the rest.  The instance
is None only when declarations fail (parameters, team, windows, queue count,
launch sizes) or a limit is hit; a bad op is skipped and the rest still built.

*Run-time values* (language v2 §3, §4; `runtime`).  A protocol that reads run-time
values (`load`, `require`) is instantiated symbolically by default: `require` bounds
initial elements, a `load` is an `ccogen.ir.runtime.Rt`, a region with run-time bounds
is its footprint over the bounded range (`RegionInst.runtime` keeps the exact forms),
a run-time `expected=` of `wait_count` is `OpInst.expected_rt`, and `ensure` lines with
run-time bounds or weights are `CheckInst.runtime` (their values are the simulator's).
With `contents=`, every `load` reads those contents and the instance is concrete (a
run-time length may then be 0).  Unbounded bounds and run-time control flow are E004;
a footprint outside its window, or lengths that may differ, E003.

Modules: `params` (`--param` values), `findings` (merged diagnostics), `declarations`,
`evaluating` (per-rank evaluation, limits, ranks and regions), `unroll` (kernel
bodies into pending op instances), `ensure`, `finalize` (queues `auto`, groups,
`OpInst`s), `limits`, `runtime` (`require`, what loads read, contents).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.instantiate.declarations import (
    bind_dtype_params,
    bind_params,
    declare,
    is_dtype_param,
    kernel_insts,
    team_ok,
    team_size,
)
from ccogen.instantiate.ensure import Ensure
from ccogen.instantiate.evaluating import Overflow
from ccogen.instantiate.finalize import auto_queue_count, finalize
from ccogen.instantiate.findings import Findings, FindingsFull, label
from ccogen.instantiate.limits import DEFAULT_TEAM_SIZES, MAX_OP_INSTANCES
from ccogen.instantiate.params import parse_param_value, parse_params
from ccogen.instantiate.runtime import (
    Bounds,
    Cell,
    ConcreteLoader,
    Contents,
    SymbolicLoader,
    Writes,
    precondition_bounds,
    read_after_write,
    uses_runtime,
)
from ccogen.instantiate.sampling import Sampler, sampled_accesses, sampled_loads
from ccogen.instantiate.unroll import Pending, Unroller
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.evaluate import Compiler
from ccogen.ir.instance import Instance, OpInst
from ccogen.ir.opkind import OpKind
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits
from ccogen.source import Span

# ============================================================================= public API


def team_sizes(
    protocol: ir.Protocol,
    ranks: Sequence[int] | None = None,
    *,
    params: Mapping[str, int] | None = None,
) -> list[int]:
    """The team sizes to instantiate: `ranks` if given, `[N]` for a fixed team, else 2, 3, 4, 8.

    N is evaluated from the parameter defaults (overridden by `params`).  When it
    cannot be evaluated this returns one size, so that the single instance reports why.
    """
    if ranks:
        return [int(r) for r in ranks]
    if protocol.team.size is None:
        return list(DEFAULT_TEAM_SIZES)
    findings = Findings(0)
    compiler = Compiler()
    ints = {k: v for k, v in (params or {}).items() if not is_dtype_param(protocol, k)}
    bound = bind_params(protocol, None, ints, compiler, findings)
    size = None if bound is None else team_size(protocol, bound, compiler, findings)
    return [size] if size is not None else [DEFAULT_TEAM_SIZES[0]]


def instantiate(
    protocol: ir.Protocol, nranks: int, params: Mapping[str, Any] | None = None,
    limits: Limits = DEFAULT_LIMITS, *, contents: Contents | None = None,
    launch: int = 0, sample: bool = False,
) -> tuple[Instance | None, list[Diagnostic]]:
    """Bind `nranks` and `params` (defaults for the rest), evaluate and unroll.

    `params` maps integer parameters to ints and `dtype` parameters to `DType`s
    (or their names).  Returns the instance (None when a declaration or a limit
    fails) and every diagnostic found; see the module docstring for the rules.
    A protocol with run-time values is instantiated symbolically (footprints,
    `ccogen.instantiate.runtime`), or for the initial `contents` given.

    A protocol that uses `launch % K` is instantiated for `launch` (0 by default) and
    carries the instances of the other launches of its period (`Instance.rotation`,
    `Instance.at_launch`); they must have the same ops, only other regions.

    With `sample` (the checker: symbolic instances only), a loop uniform in its variable
    is instantiated on three of its iterations (`sampling`; docs/checker.md, "Loops
    checked on three iterations"): the instance is then for checking, not for code
    generation, and `Instance.loops` says which loops were sampled and why others not.
    """
    given = dict(params or {})
    findings = Findings(nranks, label(nranks, given), limits, stop=True)
    compiler = Compiler()
    try:
        types = bind_dtype_params(protocol, given, findings)
        ints = {k: v for k, v in given.items() if not is_dtype_param(protocol, k)}
        bound = bind_params(protocol, nranks, ints, compiler, findings)
        if bound is not None and types is not None:
            findings.label = label(nranks, {**bound, **types})
        if bound is None or types is None or not team_ok(protocol, nranks, bound, compiler,
                                                          findings):
            return None, findings.diagnostics()
        sampler = None if contents is not None or not sample else Sampler(protocol)
        inst = _unroll(protocol, nranks, bound, types, compiler, findings, contents, launch,
                       sampler)
        if inst is not None and inst.period > 1:
            inst = _rotation(inst, protocol, nranks, bound, types, compiler, findings,
                             contents, sampler)
    except FindingsFull:  # `limits.findings` of one rule: stop evaluating (Findings)
        return None, findings.diagnostics()
    return inst, findings.diagnostics()


MAX_PERIOD = 8  # `launch % K`: the checker builds period + 1 launches


def _rotation(inst: Instance, protocol: ir.Protocol, nranks: int, params: dict[str, int],
              types: dict[str, DType], compiler: Compiler, findings: Findings,
              contents: Contents | None, sampler: Sampler | None) -> Instance | None:
    """`inst` (of launch `inst.launch`) with the instances of every launch of its period."""
    period = inst.period
    if period > MAX_PERIOD:
        span = _launch_span(protocol)
        findings.add(error("E004", f"the launches rotate with a period of {period}, over the "
                           f"{MAX_PERIOD} the checker models", span, "`launch` used here",
                           help="use fewer landing slots (`launch % 2` is what double "
                           "buffering needs)"), 0)
        return None
    others = []
    for e in range(period):
        if e == inst.launch % period:
            continue
        other = _unroll(protocol, nranks, params, types, compiler, findings, contents, e,
                        None if sampler is None else Sampler(protocol, sampler.excluded))
        if other is None:
            return None
        mismatch = _shape_mismatch(inst, other)
        if mismatch is not None:
            findings.add(error(
                "E004", "`launch` decides which ops run: launches must differ only in "
                "their regions", mismatch.span, f"differs in launch {e}",
                help="use `launch % K` only in region bounds (a landing slot)"), mismatch.rank)
            return None
        others.append(other)
    return replace(inst, rotation=tuple(others))


def _shape(op: OpInst) -> tuple[object, ...]:
    return (op.kind, op.issuer, op.preds, op.peer, op.queue, op.signal, op.group,
            op.expected, op.counter, op.kernel, op.aggregate, op.lanes_in_group)


def _shape_mismatch(a: Instance, b: Instance) -> OpInst | None:
    """The first op of `a` whose launch in `b` is another op (None: same shape)."""
    for ops_a, ops_b in zip(a.ranks, b.ranks, strict=True):
        for x, y in zip(ops_a, ops_b, strict=False):
            if _shape(x) != _shape(y):
                return x
        if len(ops_a) != len(ops_b):
            return ops_a[min(len(ops_a), len(ops_b)) - 1] if ops_a else ops_b[0]
    if len(a.checks) != len(b.checks):
        return None if not a.ranks[0] else a.ranks[0][0]
    return None


def _launch_span(protocol: ir.Protocol) -> Span | None:
    """Where the protocol first uses `launch`."""
    stack: list[object] = [protocol.ensure, protocol.kernels]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Launch):
            return node.span
        if isinstance(node, tuple | list):
            stack.extend(reversed(node))
        elif hasattr(node, "__dataclass_fields__") and not isinstance(node, type):
            stack.extend(getattr(node, f) for f in node.__dataclass_fields__ if f != "span")
    return None


def _loader(protocol: ir.Protocol, nranks: int, params: dict[str, int], decl: Any,
            compiler: Compiler, findings: Findings, contents: Contents | None,
            sampler: Sampler | None = None) -> Callable[[ir.Load, int, int], Any] | None:
    """What `load(...)` reads: run `require`, then follow the static writes of a first,
    silent unrolling (`Writes`), so that a load of a written element reads its source."""
    if not uses_runtime(protocol):
        return None
    bounds = precondition_bounds(protocol, nranks, params, decl.memories, compiler, findings)
    writes = Writes(widths={n: m.dtype.size for n, m in decl.memories.items() if m is not None})
    if not read_after_write(protocol):  # no load reads what an op writes: nothing to follow
        return ConcreteLoader(contents, writes, SymbolicLoader(bounds, writes)) \
            if contents is not None else SymbolicLoader(bounds, writes)
    first = Unroller(protocol, nranks, params, decl, compiler, Findings(nranks))
    first.loader = SymbolicLoader(bounds, None)
    first.records_loads = False  # only its writes are wanted
    first.sampler = sampler  # a sampled loop writes no window a load reads
    for ops in first.run():
        for p in ops:
            if p.kind in (OpKind.PUT, OpKind.GET, OpKind.COPY):
                writes.add(p.dst, p.src)
                if p.dst is not None and p.dst.runtime is not None:
                    writes.add_unknown(p.dst)
            elif p.kind is OpKind.REDUCE:
                writes.add_unknown(p.dst)
    if contents is not None:
        return ConcreteLoader(contents, writes, SymbolicLoader(bounds, writes))
    return SymbolicLoader(bounds, writes)


def preconditions(protocol: ir.Protocol, nranks: int, params: Mapping[str, Any] | None = None
                  ) -> tuple[dict[Cell, tuple[int | None, int | None]], dict[str, Any],
                             dict[str, int]]:
    """The bounds `require` gives every initial element it names (`(window, rank, index)`
    -> (lo, hi)), the memories (`declarations.Memory` by name) and the bound integer
    parameters (defaults included), for drawing contents."""
    bounds, memories, bound, _ = precondition_state(protocol, nranks, params)
    return bounds.materialize(), memories, bound


def precondition_state(protocol: ir.Protocol, nranks: int,
                       params: Mapping[str, Any] | None = None
                       ) -> tuple[Bounds, dict[str, Any], dict[str, int], Findings]:
    """`preconditions` before the bounds are materialized: the `runtime.Bounds` (asked per
    cell or as a whole), the memories, the bound integer parameters and the findings of
    binding and reading `require`."""
    given = dict(params or {})
    findings = Findings(nranks)
    compiler = Compiler()
    types = bind_dtype_params(protocol, given, findings) or {}
    ints = {k: v for k, v in given.items() if not is_dtype_param(protocol, k)}
    bound = bind_params(protocol, nranks, ints, compiler, findings) or {}
    decl = declare(protocol, nranks, bound, types, compiler, findings)
    bounds = precondition_bounds(protocol, nranks, bound, decl.memories, compiler, findings)
    return (bounds, {k: m for k, m in decl.memories.items() if m is not None}, bound,
            findings)


def _unroll(protocol: ir.Protocol, nranks: int, params: dict[str, int],
            types: dict[str, DType], compiler: Compiler,
            findings: Findings, contents: Contents | None = None,
            launch: int = 0, sampler: Sampler | None = None) -> Instance | None:
    """The instance of `launch`: with `sampler`, on three iterations of every loop whose
    instance meets the conditions (`Sampler.rejects`); a loop that does not is excluded
    and the instantiation redone, until none is rejected."""
    kernels: _Kernels | None = None
    while sampler is not None:
        trial = Findings(nranks, findings.label, findings.limits, stop=findings.stop,
                         record=True)
        try:
            inst, rejected, kept = _build(protocol, nranks, params, types, compiler, trial,
                                          contents, launch, sampler, kernels)
        except FindingsFull:  # many findings: the exact instance says which
            inst, rejected, kept = None, {0: "the instance stopped at the findings limit"}, None
        if not rejected:
            trial.replay(findings)
            return inst
        sampler.excluded.update(rejected)
        kernels = kernels or kept
        if not sampler.sampled_any():
            break
    inst, _, _ = _build(protocol, nranks, params, types, compiler, findings, contents,
                        launch, sampler, kernels)
    return inst


@dataclass
class _Kernels:
    """The kernels' part of a rejected trial (`_build`), kept for the next instantiation
    when no loop of it ran sampled and nothing is loaded at run time: excluding loops
    (they are all `ensure`'s, then) changes nothing in it, so it is not redone."""

    decl: Any
    unroller: Unroller
    pending: list[list[Pending]]
    log: list[tuple[Diagnostic, int | None]]  # what it added to its findings, in order
    total: int  # the unroller's shared counts once it ended
    iterations: int


def _build(protocol: ir.Protocol, nranks: int, params: dict[str, int],
           types: dict[str, DType], compiler: Compiler, findings: Findings,
           contents: Contents | None, launch: int, sampler: Sampler | None,
           kernels: _Kernels | None = None
           ) -> tuple[Instance | None, dict[int, str], _Kernels | None]:
    """One instantiation, the sampled loops whose instance breaks a condition, and (for
    a trial: recording `findings`) its kernels' part where it may be reused (`_Kernels`).
    `kernels`: such a part of a rejected trial, reused instead of redone."""
    loader: Any = None
    kept: _Kernels | None = None
    if kernels is not None:
        decl, unroller, pending = kernels.decl, kernels.unroller, kernels.pending
        for d, rank in kernels.log:
            findings.add(d, rank)
        unroller.findings = findings
        unroller.total, unroller.iterations = kernels.total, kernels.iterations
    else:
        decl = declare(protocol, nranks, params, types, compiler, findings)
    try:
        if kernels is None:
            loader = _loader(protocol, nranks, params, decl, compiler, findings, contents,
                             sampler)
            unroller = Unroller(protocol, nranks, params, decl, compiler, findings)
            unroller.launch = launch
            unroller.loader = loader
            unroller.empty_ok = contents is not None
            unroller.sampler = sampler
            pending = unroller.run()
            if (findings.log is not None and loader is None and sampler is not None
                    and not sampler.sampled_any()):
                kept = _Kernels(decl, unroller, pending, list(findings.log),
                                unroller.total, unroller.iterations)
        ensure = Ensure(nranks, params, decl.memories, compiler, findings)
        ensure.launch, ensure.moduli = launch, unroller.moduli
        ensure.loader = loader
        ensure.empty_ok = contents is not None
        ensure.sampler = sampler
        ensure.total, ensure.iterations = unroller.total, unroller.iterations  # shared limits
        checks = ensure.run(protocol.ensure)
    except Overflow as exc:
        findings.add(exc.diagnostic, exc.rank)
        return None, {}, None
    rejected: dict[int, str] = {}
    if sampler is not None and sampler.sampled_any():
        rejected = sampler.rejects(
            sampled_accesses(pending, checks, ensure.wheres),
            sampled_loads(pending, checks, ensure.wheres),
            loader.bounds if isinstance(loader, SymbolicLoader) else None,
            {n: m.dtype.size for n, m in decl.memories.items() if m is not None})
        if rejected:
            return None, rejected, kept
        for ops in pending:
            for p in ops:
                if p.where is not None and p.where.v == 1:
                    p.where = sampler.with_strides(p.where)
    queues = auto_queue_count(pending) if decl.queues is None else decl.queues
    auto = decl.queues is None
    ranks = tuple(finalize(r, ops, queues, auto, findings) for r, ops in enumerate(pending))
    if decl.fatal:
        return None, {}, None
    return Instance(
        protocol=protocol, nranks=nranks, params=tuple(params.items()), queues=queues,
        window_sizes=tuple((n, s) for n, s in decl.windows.items() if s is not None),
        kernels=kernel_insts(decl, unroller.grid), ranks=ranks, checks=tuple(checks),
        dtypes=tuple((n, m.dtype) for n, m in decl.memories.items()
                     if m is not None and m.dtype is not DType.U8),
        buffer_sizes=tuple((n, m.nbytes) for n, m in decl.memories.items()
                           if m is not None and m.buffer),
        dtype_params=tuple(types.items()),
        runtime="" if loader is None else "concrete" if contents is not None else "symbolic",
        unchecked=ensure.unchecked, unproved=tuple(ensure.unproved),
        contents_label=contents.label if contents else "",
        launch=launch, period=math.lcm(*unroller.moduli) if unroller.moduli else 1,
        loops=() if sampler is None else sampler.notes(),
    ), {}, None


__all__ = ["DEFAULT_TEAM_SIZES", "MAX_OP_INSTANCES", "Contents", "instantiate",
           "parse_param_value", "parse_params", "precondition_state", "preconditions", "team_sizes",
           "uses_runtime"]
