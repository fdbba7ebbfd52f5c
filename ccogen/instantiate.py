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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.diag.merge import FindingSet, ranks_note
from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import Compiler, Env, EvalError, IntFn, expr_text
from ccogen.ir.instance import CheckInst, Instance, Issuer, KernelInst, OpInst, RegionInst
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits, raise_hint
from ccogen.source import Span

DEFAULT_TEAM_SIZES: tuple[int, ...] = (2, 3, 4, 8)
MAX_OP_INSTANCES = DEFAULT_LIMITS.op_instances
MAX_ITERATIONS = DEFAULT_LIMITS.iterations
MAX_THREADS = 1024
MAX_BLOCKS = 2**31 - 1
MAX_AUTO_QUEUES = 8
WARP_SIZE = 32
SIMILAR_SHOWN = 3

_UNITS: dict[str, int] = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_DECIMAL_UNITS = {"k", "kb", "m", "mb", "g", "gb", "t", "tb", "tib", "kib/s"}
_UNIT_HINT = "use `B`, `KiB`, `MiB` or `GiB` (1 KiB = 1024 bytes), e.g. `4KiB`"

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
    findings = _Findings(0)
    compiler = Compiler()
    bound = _bind_params(protocol, None, dict(params or {}), compiler, findings)
    size = None if bound is None else _team_size(protocol, bound, compiler, findings)
    return [size] if size is not None else [DEFAULT_TEAM_SIZES[0]]


def parse_param_value(text: str, type: ir.ParamType) -> int:
    """A `--param` value: `4096`, `1_024`, `0x10`, and for bytes `4KiB`, `4 KiB`, `64 B`.

    Units are binary (`KiB` = 1024); decimal ones (`KB`, `MB`) are refused.  A
    `bytes` value cannot be negative.  Raises `ValueError` with a readable message.
    """
    s = text.strip()
    number, unit = _split_unit(s)
    value = _parse_int(number, s)
    if unit is not None and type is not ir.ParamType.BYTES:
        raise ValueError(f"`{s}`: units are only for `bytes` parameters; write a plain integer")
    value *= _UNITS[unit.lower()] if unit else 1
    if type is ir.ParamType.BYTES and value < 0:
        raise ValueError(f"`{s}`: a byte count cannot be negative")
    return value


def parse_params(values: Sequence[str], protocol: ir.Protocol) -> dict[str, int]:
    """`["block=4KiB", "n=3"]` -> `{"block": 4096, "n": 3}`, typed by the declarations.

    Raises ValueError with a message naming the bad item; unknown names are kept (the
    instance reports them as E002, with the known names).
    """
    out: dict[str, int] = {}
    for item in values:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--param takes NAME=VALUE, not {item!r}")
        decl = protocol.param(name.strip())
        kind = decl.type if decl is not None else ir.ParamType.INT
        try:
            out[name.strip()] = parse_param_value(text.strip(), kind)
        except ValueError as exc:
            raise ValueError(f"--param {item}: {exc}") from None
    return out


def instantiate(
    protocol: ir.Protocol, nranks: int, params: Mapping[str, int] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[Instance | None, list[Diagnostic]]:
    """Bind `nranks` and `params` (defaults for the rest), evaluate and unroll.

    Returns the instance (None when a declaration or a limit fails) and every
    diagnostic found; see the module docstring for the rules.
    """
    given = dict(params or {})
    findings = _Findings(nranks, _label(nranks, given), limits)
    compiler = Compiler()
    bound = _bind_params(protocol, nranks, given, compiler, findings)
    if bound is not None:
        findings.label = _label(nranks, bound)
    if bound is None or not _team_ok(protocol, nranks, bound, compiler, findings):
        return None, findings.diagnostics()
    return _unroll(protocol, nranks, bound, compiler, findings), findings.diagnostics()


def _unroll(protocol: ir.Protocol, nranks: int, params: dict[str, int], compiler: Compiler,
            findings: _Findings) -> Instance | None:
    decl = _declare(protocol, nranks, params, compiler, findings)
    try:
        unroller = _Unroller(protocol, nranks, params, decl, compiler, findings)
        pending = unroller.run()
        ensure = _Ensure(nranks, params, decl.windows, compiler, findings)
        ensure.total, ensure.iterations = unroller.total, unroller.iterations  # shared limits
        checks = ensure.run(protocol.ensure)
    except _Overflow as exc:
        findings.add(exc.diagnostic, exc.rank)
        return None
    queues = _auto_queue_count(pending) if decl.queues is None else decl.queues
    auto = decl.queues is None
    ranks = tuple(_finalize(r, ops, queues, auto, findings) for r, ops in enumerate(pending))
    if decl.fatal:
        return None
    return Instance(
        protocol=protocol, nranks=nranks, params=tuple(params.items()), queues=queues,
        window_sizes=tuple((n, s) for n, s in decl.windows.items() if s is not None),
        kernels=_kernel_insts(decl, unroller.grid), ranks=ranks, checks=tuple(checks),
    )


# ============================================================================= --param values


def _split_unit(s: str) -> tuple[str, str | None]:
    if _int_or_none(s) is not None:
        return s, None
    lowered = s.lower()
    for unit in ("gib", "mib", "kib", "b"):
        number = s[: -len(unit)].strip()
        if lowered.endswith(unit) and _int_or_none(number) is not None:
            return number, s[-len(unit):]
    trailing = re.search(r"[A-Za-z/]+$", s)
    if trailing and trailing.group().lower() in _DECIMAL_UNITS:
        raise ValueError(f"`{s}`: unknown unit `{trailing.group()}`; {_UNIT_HINT}")
    return s, None


def _int_or_none(s: str) -> int | None:
    for base in (0, 10):
        try:
            return int(s, base)
        except ValueError:
            continue
    return None


def _parse_int(number: str, whole: str) -> int:
    value = _int_or_none(number)
    if value is None:
        raise ValueError(f"`{whole}` is not an integer: write `4096`, `0x1000`, `1_024` or, "
                         f"for bytes, {_UNIT_HINT[4:]}")
    return value


# ============================================================================= findings


class _Findings:
    """Collects diagnostics, merging identical ones from several ranks or iterations
    (`FindingSet`); at one place at most `SIMILAR_SHOWN` messages of one code.  Also
    carries the instantiation's `limits`."""

    def __init__(self, nranks: int, label: str = "", limits: Limits = DEFAULT_LIMITS) -> None:
        self.nranks = nranks
        self.label = label or f"nranks={nranks}"
        self.limits = limits
        self._set: FindingSet[int] = FindingSet(lambda d: (d.code, d.span, d.message))
        self._sites: dict[tuple[str, Span], list[Diagnostic]] = {}
        self._hidden: dict[int, set[str]] = {}  # id of the last shown -> messages hidden

    def add(self, d: Diagnostic, rank: int | None = None) -> None:
        if self._set.get(d) is None and d.span is not None:
            shown = self._sites.setdefault((d.code, d.span), [])
            if len(shown) >= SIMILAR_SHOWN:
                self._hidden.setdefault(id(shown[-1]), set()).add(d.message)
                return
            shown.append(d)
        self._set.add(d, rank)

    def diagnostics(self) -> list[Diagnostic]:
        out = []
        for entry in self._set:
            d = entry.diagnostic
            notes = list(d.notes)
            if entry.places:
                notes.append(ranks_note(sorted(entry.places), self.nranks))
            if hidden := self._hidden.get(id(d)):
                n = len(hidden)
                notes.append(f"{n} more finding{'s' if n > 1 else ''} of this kind here, not shown")
            notes.append(f"in the instance {self.label}")
            out.append(replace(d, notes=tuple(notes)))
        return out


def _label(nranks: int, params: Mapping[str, Any]) -> str:
    return ", ".join([f"nranks={nranks}"] + [f"{k}={v}" for k, v in params.items()])


def _from_eval(exc: EvalError, env: Env, fallback: Span | None) -> Diagnostic:
    return error(exc.code, exc.message, exc.span or fallback, exc.label,
                 notes=(env.bindings(),), help=exc.help)


# ============================================================================= declarations


@dataclass(frozen=True, slots=True)
class _KernelHead:
    kernel: ir.Kernel
    threads: int | None  # None: could not be evaluated (checks against it are skipped)
    blocks: int | None  # `blocks=` as given; None when absent or bad
    ok: bool


@dataclass(slots=True)
class _Decl:
    windows: dict[str, int | None]  # None: the size could not be evaluated
    queues: int | None  # None: `queues auto`
    kernels: list[_KernelHead]
    fatal: bool


def _symmetric(nranks: int | None, params: Mapping[str, int], what: str) -> Env:
    return Env(nranks, None, params,
               me_error=f"{what} symmetric: must not depend on `me`",
               nranks_error=f"{what} fixed before the team size: must not depend on `nranks`")


def _bind_params(
    protocol: ir.Protocol, nranks: int | None, given: dict[str, Any],
    compiler: Compiler, findings: _Findings,
) -> dict[str, int] | None:
    ok = _check_param_names(protocol, given, findings)
    bound: dict[str, int] = {}
    env = _symmetric(nranks, bound, "parameter defaults are")
    for p in protocol.params:
        value = _param_value(p, given, env, compiler, findings)
        if value is None:
            ok = False
        else:
            bound[p.name] = value
    return bound if ok else None


def _check_param_names(protocol: ir.Protocol, given: Mapping[str, Any],
                       findings: _Findings) -> bool:
    known = [p.name for p in protocol.params]
    unknown = [name for name in given if name not in known]
    listed = ", ".join(f"`{n}`" for n in known)
    help = (f"the parameters of `{protocol.name}` are {listed}" if known
            else f"`{protocol.name}` takes no parameters")
    for name in unknown:
        findings.add(error("E002", f"unknown parameter `{name}`", protocol.span,
                           f"`{protocol.name}` has no parameter `{name}`", help=help))
    return not unknown


def _param_value(p: ir.Param, given: Mapping[str, Any], env: Env, compiler: Compiler,
                 findings: _Findings) -> int | None:
    if p.name in given:
        value = given[p.name]
        if type(value) is not int:
            findings.add(error("E002", f"parameter `{p.name}` must be an integer, not "
                               f"`{value!r}`", p.span, "declared here"))
            return None
    else:
        try:
            value = compiler.integer(p.default, f"the default of `{p.name}`")(env)
        except EvalError as exc:
            findings.add(_from_eval(exc, env, p.span))
            return None
    if p.type is ir.ParamType.BYTES and value < 0:
        findings.add(error("E002", f"parameter `{p.name}` is a byte count and cannot be "
                           f"negative, not {value}", p.span, "declared `bytes` here"))
        return None
    return value


def _team_size(protocol: ir.Protocol, params: Mapping[str, int], compiler: Compiler,
               findings: _Findings) -> int | None:
    team = protocol.team
    assert team.size is not None
    env = _symmetric(None, params, "the team size is")
    try:
        return compiler.integer(team.size, "the team size")(env)
    except EvalError as exc:
        findings.add(_from_eval(exc, env, team.span))
        return None


def _team_ok(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
             compiler: Compiler, findings: _Findings) -> bool:
    team = protocol.team
    span = team.span or protocol.span
    if nranks < 1:
        findings.add(error("E002", f"a team needs at least one rank, not {nranks}", span))
        return False
    if nranks > findings.limits.ranks:
        findings.add(error(
            "E006", f"a team of {nranks:,} ranks is over the limit of {findings.limits.ranks:,}",
            span, "the team", notes=("checking costs memory that grows with the square of "
                                     "the team size",), help=raise_hint("ranks", nranks)))
        return False
    if team.size is None:
        return True
    size = _team_size(protocol, params, compiler, findings)
    if size is None:
        return False
    if size < 1:
        findings.add(error("E002", f"the team size must be at least 1, not {size}",
                           team.size.span or span, f"this is {size}"))
        return False
    if size != nranks:
        findings.add(error(
            "E002", f"the team is fixed at {size} rank{'s' if size != 1 else ''}, not {nranks}",
            span, f"`team {team.kind.value}({size})`",
            help=f"instantiate with `--ranks {size}`, or write `team {team.kind.value}` "
                 "to allow any size"))
        return False
    return True


def _declare(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
             compiler: Compiler, findings: _Findings) -> _Decl:
    windows = {w.name: _window_size(w, nranks, params, compiler, findings)
               for w in protocol.windows}
    queues, queues_ok = _queue_count(protocol, nranks, params, compiler, findings)
    kernels = [_kernel_head(k, nranks, params, compiler, findings) for k in protocol.kernels]
    fatal = (None in windows.values() or not queues_ok or not all(k.ok for k in kernels))
    return _Decl(windows, queues, kernels, fatal)


def _window_size(w: ir.Window, nranks: int, params: Mapping[str, int],
                 compiler: Compiler, findings: _Findings) -> int | None:
    env = _symmetric(nranks, params, "window sizes are")
    try:
        size = compiler.integer(w.size, f"the size of window `{w.name}`")(env)
    except EvalError as exc:
        findings.add(_from_eval(exc, env, w.span))
        return None
    if size <= 0:
        findings.add(error("E003", f"window `{w.name}` must have a positive size, not {size}",
                           w.size.span or w.span, f"this is {size}", notes=(env.bindings(),)))
        return None
    if size > (limit := findings.limits.window_bytes):
        findings.add(error("E006", f"window `{w.name}` of {size:,} bytes is over the limit of "
                           f"{limit:,} bytes", w.size.span or w.span, f"this is {size:,} bytes",
                           notes=(env.bindings(), "no device has that much memory for one "
                                  "window"), help=raise_hint("window-bytes", size)))
        return None
    return size


def _queue_count(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                 compiler: Compiler, findings: _Findings) -> tuple[int | None, bool]:
    if protocol.queues is None:
        return None, True
    env = _symmetric(nranks, params, "queue counts are")
    span = protocol.queues.span or protocol.queues_span or protocol.span
    try:
        count = compiler.integer(protocol.queues, "the queue count")(env)
    except EvalError as exc:
        findings.add(_from_eval(exc, env, span))
        return 1, False
    if count < 1:
        findings.add(error("E002", f"`queues` must be at least 1, not {count}", span,
                           f"this is {count}", help="write `queues 1`, or `queues auto`"))
        return 1, False
    return count, True


def _kernel_head(k: ir.Kernel, nranks: int, params: Mapping[str, int],
                 compiler: Compiler, findings: _Findings) -> _KernelHead:
    env = _symmetric(nranks, params, "launch sizes are")
    threads = _launch_size(k, k.threads, "threads", MAX_THREADS, env, compiler, findings)
    blocks, blocks_ok = None, True
    if k.blocks is not None:
        blocks = _launch_size(k, k.blocks, "blocks", MAX_BLOCKS, env, compiler, findings)
        blocks_ok = blocks is not None
    return _KernelHead(k, threads, blocks, threads is not None and blocks_ok)


def _launch_size(k: ir.Kernel, expr: ir.Expr, name: str, limit: int, env: Env,
                 compiler: Compiler, findings: _Findings) -> int | None:
    span = expr.span or k.span
    try:
        value = compiler.integer(expr, f"`{name}=`")(env)
    except EvalError as exc:
        findings.add(_from_eval(exc, env, span))
        return None
    if 1 <= value <= limit:
        return value
    message = (f"kernel `{k.name}` has `{name}={value}`, over the device limit of {limit}"
               if value > limit else f"kernel `{k.name}` needs `{name}=` of at least 1, "
               f"not {value}")
    findings.add(error("E005", message, span, f"this is {value}", notes=(env.bindings(),)))
    return None


def _kernel_insts(decl: _Decl, grid: list[int]) -> tuple[KernelInst, ...]:
    return tuple(
        KernelInst(name=h.kernel.name, index=i, threads=h.threads or 1,
                   blocks=h.blocks if h.blocks is not None else grid[i], span=h.kernel.span)
        for i, h in enumerate(decl.kernels))


# ============================================================================= unrolling


class _Pending:
    """An op instance before queues `auto` and groups are resolved."""

    __slots__ = ("dst", "expected", "group", "issuer", "kernel", "kind", "op", "peer", "preds",
                 "queue", "slot", "src", "wait_default")

    def __init__(self, kind: str, op: ir.Op, kernel: int, issuer: Issuer) -> None:
        self.kind = kind
        self.op = op
        self.kernel = kernel
        self.issuer = issuer
        self.preds: tuple[int, ...] = ()
        self.peer: int | None = None
        self.queue: int | None = None
        self.slot: int | None = None  # queue=auto: the queue is slot % Q
        self.wait_default = False  # wait_signal without queue=
        self.dst: RegionInst | None = None
        self.src: RegionInst | None = None
        self.expected: int | None = None
        self.group: tuple[object, ...] | None = None  # lane posting-group key


@dataclass(frozen=True, slots=True)
class _Scope:
    """Who runs the statements being unrolled, and inside what."""

    issuer: Issuer
    slot: int = 0  # auto-queue slot
    top: bool = True  # directly in the kernel body
    block_pos: int | None = None
    warp_pos: int | None = None
    lanes: bool = False
    outer: tuple[ir.IssuerBlock, ...] = ()

    def nested(self) -> _Scope:
        return replace(self, top=False) if self.top else self


_TOP = _Scope(Issuer(block=0))
_FINENESS = {ir.IssuerKind.LANES: 0, ir.IssuerKind.WARPS: 1, ir.IssuerKind.BLOCKS: 2}
_UNSET = object()


def _child(kind: ir.IssuerKind, scope: _Scope, outer: tuple[ir.IssuerBlock, ...],
           pos: int, n: int) -> _Scope:
    block = scope.issuer.block
    if kind is ir.IssuerKind.BLOCKS:
        return _Scope(Issuer(block=pos), pos, False, pos, None, False, outer)
    if kind is ir.IssuerKind.WARPS:
        slot = pos if scope.block_pos is None else scope.block_pos * n + pos
        return _Scope(Issuer(block=block, warp=pos), slot, False, scope.block_pos, pos, False,
                      outer)
    if scope.warp_pos is not None:
        w = scope.warp_pos
        return _Scope(Issuer(block, w, w * WARP_SIZE + pos), scope.slot, False, scope.block_pos,
                      w, True, outer)
    warp = pos // WARP_SIZE
    per_block = -(-n // WARP_SIZE)
    slot = warp if scope.block_pos is None else scope.block_pos * per_block + warp
    return _Scope(Issuer(block=block, lane=pos), slot, False, scope.block_pos, None, True, outer)


class _Overflow(Exception):
    def __init__(self, diagnostic: Diagnostic, rank: int) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic
        self.rank = rank


class _Evaluating:
    """Evaluation on one rank at a time, reporting into the findings."""

    def __init__(self, nranks: int, params: Mapping[str, int], windows: Mapping[str, int | None],
                 compiler: Compiler, findings: _Findings) -> None:
        self.nranks = nranks
        self.params = params
        self.windows = windows
        self.compiler = compiler
        self.findings = findings
        self.rank = 0
        self.env = Env(nranks, 0, params)
        self.failed = False
        self.total = 0
        self.iterations = 0
        self._loops: list[ir.Stmt] = []
        self._bounds: dict[int, tuple[IntFn | None, IntFn | None, ir.Region]] = {}

    def _bind_rank(self, rank: int) -> None:
        self.rank = rank
        self.env = Env(self.nranks, rank, self.params)

    def _error(self, code: str, message: str, span: Span | None, label: str = "", *,
               secondary: Iterable[tuple[Span | None, str]] = (), help: str | None = None) -> None:
        self.failed = True
        self.findings.add(error(code, message, span, label, secondary=secondary,
                                notes=(self.env.bindings(),), help=help), self.rank)

    def _eval_failed(self, exc: EvalError, fallback: Span | None) -> None:
        self._error(exc.code, exc.message, exc.span or fallback, exc.label, help=exc.help)

    def _int(self, expr: ir.Expr, what: str, fallback: Span | None) -> int | None:
        try:
            return self.compiler.integer(expr, what)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    def _seq(self, expr: ir.Expr, what: str, fallback: Span | None) -> tuple[int, ...] | None:
        try:
            return self.compiler.sequence(expr, what)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    def _truth(self, expr: ir.Expr, fallback: Span | None) -> bool | None:
        try:
            return bool(self.compiler.value(expr)(self.env))
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    # ------------------------------------------------------------------ loops and limits

    def _enter(self, loop: ir.For | ir.IssuerBlock, n: int) -> object:
        self._loops.append(loop)
        self.iterations += n
        if self.iterations > (limit := self.findings.limits.iterations):
            raise self._overflow(loop, f"more than {limit:,} loop iterations", "iterations")
        return self.env.vars.get(loop.var, _UNSET)

    def _leave(self, var: str, saved: object) -> None:
        self._loops.pop()
        if saved is _UNSET:
            self.env.vars.pop(var, None)
        else:
            self.env.vars[var] = saved  # type: ignore[assignment]

    def _count(self, node: ir.Stmt) -> None:
        self.total += 1
        if self.total > (limit := self.findings.limits.op_instances):
            raise self._overflow(node, f"more than {limit:,} op instances", "op-instances")

    def _overflow(self, node: ir.Stmt, what: str, name: str) -> _Overflow:
        where = self._loops[0] if self._loops else node
        message = ("this loop unrolls to " if self._loops else "the protocol has ") + what
        return _Overflow(error("E006", message, where.span, "unrolled here",
                               notes=(self.env.bindings(),),
                               help=f"lower the loop bounds or the parameters they use; "
                                    f"{raise_hint(name)}"), self.rank)

    # ------------------------------------------------------------------ ranks and regions

    def _team_rank(self, expr: ir.Expr, role: str, fallback: Span | None, *,
                   allow_me: bool) -> int | None:
        span = expr.span or fallback
        value = self._int(expr, f"the {role}", span)
        if value is None:
            return None
        n = self.nranks
        if not 0 <= value < n:
            text = expr_text(expr)
            subject = f"{role} {value} is" if text == str(value) else f"{role} `{text}` is {value},"
            self._error("E010", f"{subject} outside the team of {n} rank{'s' if n != 1 else ''}",
                        span, f"ranks are 0 to {n - 1}",
                        help="name a rank of the team, e.g. `(me + 1) % nranks` or one of "
                             "`peers()`")
            return None
        if value == self.rank and not allow_me:
            self._error("E010", "`me` used as a peer", span, f"this is rank {value}, `me` itself",
                        help="loop over `peers()` rather than `ranks()`; "
                             "moving data within one rank is a `copy`")
            return None
        return value

    def _region(self, region: ir.Region, rank: int, fallback: Span | None) -> RegionInst | None:
        size = self.windows.get(region.window, -1)
        if size is None or size < 0:
            self._no_window(region, size, fallback)
            return None
        bounds = self._bounds.get(id(region))
        if bounds is None:
            bounds = self._bound_fns(region)
            self._bounds[id(region)] = bounds
        try:
            start = 0 if bounds[0] is None else bounds[0](self.env)
            stop = size if bounds[1] is None else bounds[1](self.env)
        except EvalError as exc:
            self._eval_failed(exc, region.span or fallback)
            return None
        if 0 <= start < stop <= size:
            return RegionInst(region.window, start, stop, rank)
        self._bad_bounds(region, rank, start, stop, size, region.span or fallback)
        return None

    def _bound_fns(self, region: ir.Region) -> tuple[IntFn | None, IntFn | None, ir.Region]:
        def fn(e: ir.Expr | None) -> IntFn | None:
            return None if e is None else self.compiler.integer(e, "a region bound")
        return fn(region.start), fn(region.stop), region

    def _no_window(self, region: ir.Region, size: int | None, fallback: Span | None) -> None:
        if size is not None:
            self._error("E002", f"unknown window `{region.window}`", region.span or fallback,
                        "not a declared window")
        self.failed = True  # a window whose size failed was reported with the window

    def _bad_bounds(self, region: ir.Region, rank: int, start: int, stop: int, size: int,
                    span: Span | None) -> None:
        text = _region_text(region, rank, start, stop)
        if start >= stop:
            label = "starts where it ends" if start == stop else f"ends at {stop}, before {start}"
            self._error("E003", f"region `{text}` is empty", span, label,
                        help="a region `w[a:b]` holds bytes a to b-1 and needs a < b")
            return
        label = (f"starts {-start} bytes before the window" if start < 0
                 else f"ends {stop - size} bytes past the end of the window")
        self._error("E003", f"region `{text}` is outside window `{region.window}` of {size} "
                    "bytes", span, label, help=f"keep bounds within 0 and {size}")

    def _same_length(self, what: str, a: RegionInst | None, b: RegionInst | None,
                     spans: tuple[Span | None, Span | None], names: tuple[str, str]) -> None:
        if a is None or b is None or a.size == b.size:
            return
        self._error("E003", f"{what} differ in length: {a.size} and {b.size} bytes", spans[0],
                    f"{names[0]} is {a.size} bytes", secondary=[(spans[1],
                    f"{names[1]} is {b.size} bytes")], help="give both regions the same length")


def _region_text(region: ir.Region, rank: int, start: int, stop: int) -> str:
    base = region.window if region.rank is None else f"{region.window}@{rank}"
    if region.init:
        base = f"init({base})"
    return f"{base}[{start}:{stop}]"


class _Unroller(_Evaluating):
    """Runs every kernel body on every rank, recording `_Pending` op instances."""

    def __init__(self, protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                 decl: _Decl, compiler: Compiler, findings: _Findings) -> None:
        super().__init__(nranks, params, decl.windows, compiler, findings)
        self.decl = decl
        self.ops: list[list[_Pending]] = [[] for _ in range(nranks)]
        self.grid = [1] * len(decl.kernels)  # longest `blocks` range run, per kernel
        self._kernel = 0
        self._head = decl.kernels[0] if decl.kernels else None
        self._rank_ops: list[_Pending] = []
        self._path: list[int] = []
        self._stmts: dict[type, Callable[[Any, _Scope, tuple[int, ...]], tuple[int, ...]]] = {
            ir.For: self._for, ir.If: self._if, ir.IssuerBlock: self._issuers,
            ir.Check: self._misplaced_check,
        }
        self._ops: dict[type, Callable[[Any, _Scope, _Pending], None]] = {
            ir.Put: self._put, ir.Get: self._get, ir.Copy: self._copy, ir.Commit: self._commit,
            ir.Quiet: self._quiet, ir.WaitSignal: self._wait_signal,
            ir.WaitCount: self._wait_count, ir.Barrier: self._plain, ir.Fence: self._plain,
            ir.ResetCount: self._plain,
        }

    def run(self) -> list[list[_Pending]]:
        frontiers: list[tuple[int, ...]] = [()] * self.nranks
        for k, head in enumerate(self.decl.kernels):
            self._kernel, self._head = k, head
            for rank in range(self.nranks):
                self._bind_rank(rank)
                self._rank_ops = self.ops[rank]
                frontiers[rank] = self._body(head.kernel.body, _TOP, frontiers[rank])
        return self.ops

    def _body(self, stmts: Sequence[ir.Stmt], scope: _Scope,
              frontier: tuple[int, ...]) -> tuple[int, ...]:
        for s in stmts:
            handler = self._stmts.get(type(s))
            if handler is None:
                frontier = self._op(s, scope, frontier)  # type: ignore[arg-type]
            else:
                frontier = handler(s, scope, frontier)
        return frontier

    # ------------------------------------------------------------------ control flow

    def _misplaced_check(self, s: ir.Check, scope: _Scope,
                         frontier: tuple[int, ...]) -> tuple[int, ...]:
        self._error("E002", "a postcondition is only allowed in `ensure`", s.span, "in a kernel")
        return frontier

    def _if(self, s: ir.If, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        cond = self._truth(s.cond, s.span)
        if cond is None:
            return frontier
        return self._body(s.body if cond else s.orelse, scope.nested(), frontier)

    def _for(self, s: ir.For, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        seq = self._seq(s.iter, "`for`", s.span)
        if seq is None:
            return frontier
        saved = self._enter(s, len(seq))
        inner, env_vars, path = scope.nested(), self.env.vars, self._path
        depth = len(path)
        path.append(0)
        for i, value in enumerate(seq):
            env_vars[s.var] = value
            path[depth] = i
            frontier = self._body(s.body, inner, frontier)
        path.pop()
        self._leave(s.var, saved)
        return frontier

    def _issuers(self, blk: ir.IssuerBlock, scope: _Scope,
                 frontier: tuple[int, ...]) -> tuple[int, ...]:
        if not self._nesting_ok(blk, scope):
            return frontier
        seq = self._seq(blk.iter, f"`{blk.kind.value}`", blk.span)
        if seq is None or not self._fits(blk, scope, len(seq)):
            return frontier
        if blk.kind is ir.IssuerKind.BLOCKS:
            self.grid[self._kernel] = max(self.grid[self._kernel], len(seq))
        saved = self._enter(blk, len(seq))
        outer = (*scope.outer, blk)
        ends: list[int] = []
        for pos, value in enumerate(seq):
            self.env.vars[blk.var] = value
            before = len(self._rank_ops)
            end = self._body(blk.body, _child(blk.kind, scope, outer, pos, len(seq)), frontier)
            if len(self._rank_ops) > before:
                ends.extend(end)
        self._leave(blk.var, saved)
        return tuple(ends) if ends else frontier

    def _nesting_ok(self, blk: ir.IssuerBlock, scope: _Scope) -> bool:
        kind = blk.kind.value
        if blk.kind is ir.IssuerKind.BLOCKS and not scope.top:
            inner = scope.outer[-1] if scope.outer else None
            secondary = [(inner.span, f"inside this `{inner.kind.value}` block")] if inner else []
            self._error("E002", "`blocks` must be outermost", blk.span, "nested here",
                        secondary=secondary, help="put `blocks` directly in the kernel body, "
                        "around everything else")
            return False
        clash = next((o for o in scope.outer if _FINENESS[o.kind] <= _FINENESS[blk.kind]), None)
        if clash is not None:
            self._error("E002", f"`{kind}` cannot be nested inside `{clash.kind.value}`",
                        blk.span, "nested here",
                        secondary=[(clash.span, f"inside this `{clash.kind.value}` block")],
                        help="issuer blocks nest from coarse to fine: `blocks`, `warps`, `lanes`")
            return False
        return True

    def _fits(self, blk: ir.IssuerBlock, scope: _Scope, n: int) -> bool:
        head = self._head
        assert head is not None
        if blk.kind is ir.IssuerKind.BLOCKS:
            return self._fits_grid(blk, head, n)
        if head.threads is None:
            return True
        if blk.kind is ir.IssuerKind.WARPS:
            return self._fits_threads(blk, head, n * WARP_SIZE, f"{n} warps ({n * WARP_SIZE} "
                                      "threads)", head.threads)
        if scope.warp_pos is not None:
            if n <= WARP_SIZE:
                return True
            self._error("E005", f"`lanes` inside `warps` runs {n} lanes, but a warp has "
                        f"{WARP_SIZE}", blk.iter.span or blk.span, f"{n} lanes",
                        help="split the lanes over more warps, or move `lanes` out of `warps`")
            return False
        return self._fits_threads(blk, head, n, f"{n} lanes", head.threads)

    def _fits_threads(self, blk: ir.IssuerBlock, head: _KernelHead, need: int, what: str,
                      threads: int) -> bool:
        if need <= threads:
            return True
        k = head.kernel
        self._error("E005", f"`{blk.kind.value}` runs {what}, but kernel `{k.name}` has "
                    f"`threads={threads}`", blk.iter.span or blk.span, what,
                    secondary=[(k.threads.span, "set here")], help=f"raise `threads=` to {need}")
        return False

    def _fits_grid(self, blk: ir.IssuerBlock, head: _KernelHead, n: int) -> bool:
        if head.blocks is None or n <= head.blocks:
            return True
        k = head.kernel
        self._error("E005", f"`blocks` runs {n} blocks, but kernel `{k.name}` has "
                    f"`blocks={head.blocks}`", blk.iter.span or blk.span, f"{n} blocks",
                    secondary=[(k.blocks.span if k.blocks else None, "set here")],
                    help=f"raise `blocks=` to {n}, or drop it to size the grid from `blocks`")
        return False

    # ------------------------------------------------------------------ operations

    def _op(self, op: ir.Op, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        evaluate = self._ops[type(op)]
        self.failed = False
        pending = _Pending(ir.OP_NAMES[type(op)], op, self._kernel, scope.issuer)
        evaluate(op, scope, pending)
        if self.failed:
            return frontier
        if scope.lanes:
            issuer = scope.issuer
            pending.group = (issuer.block, issuer.warp_of, id(op), tuple(self._path))
        pending.preds = frontier
        ops = self._rank_ops
        ops.append(pending)
        self._count(op)
        return (len(ops) - 1,)

    def _peer(self, expr: ir.Expr, op: ir.Op) -> int | None:
        return self._team_rank(expr, "peer", op.span, allow_me=False)

    def _on(self, region: ir.Region, rank: int | None, op: ir.Op) -> RegionInst | None:
        if region.rank is not None or region.init:
            self._error("E002", "`@` and `init(...)` are only allowed in `ensure`",
                        region.span or op.span, "in a kernel")
            return None
        return self._region(region, -1 if rank is None else rank, op.span)

    def _transfer(self, op: ir.Put | ir.Get | ir.Copy, p: _Pending,
                  dst_rank: int | None, src_rank: int | None) -> None:
        p.dst = self._on(op.dst, dst_rank, op)
        p.src = self._on(op.src, src_rank, op)
        self._same_length("`dst` and `src`", p.dst, p.src,
                          (op.dst.span or op.span, op.src.span), ("`dst`", "`src`"))

    def _auto_queue(self, expr: ir.Expr | None, scope: _Scope, p: _Pending, op: ir.Op) -> None:
        if expr is None:
            p.slot = scope.slot
        else:
            p.queue = self._int(expr, "the queue", op.span)

    def _put(self, op: ir.Put, scope: _Scope, p: _Pending) -> None:
        p.peer = self._peer(op.peer, op)
        self._transfer(op, p, p.peer, self.rank)
        self._auto_queue(op.queue, scope, p, op)

    def _get(self, op: ir.Get, scope: _Scope, p: _Pending) -> None:
        p.peer = self._peer(op.peer, op)
        self._transfer(op, p, self.rank, p.peer)
        self._auto_queue(op.queue, scope, p, op)

    def _copy(self, op: ir.Copy, scope: _Scope, p: _Pending) -> None:
        self._transfer(op, p, self.rank, self.rank)

    def _commit(self, op: ir.Commit, scope: _Scope, p: _Pending) -> None:
        p.peer = self._peer(op.peer, op)
        self._auto_queue(op.queue, scope, p, op)

    def _quiet(self, op: ir.Quiet, scope: _Scope, p: _Pending) -> None:
        if op.peer is not None:
            p.peer = self._peer(op.peer, op)
        if op.queue is not None:
            p.queue = self._int(op.queue, "the queue", op.span)

    def _wait_signal(self, op: ir.WaitSignal, scope: _Scope, p: _Pending) -> None:
        p.peer = self._team_rank(op.src, "source rank", op.span, allow_me=True)
        if op.queue is None:
            p.wait_default = True
        else:
            p.queue = self._int(op.queue, "the queue", op.span)
        if op.expected is not None:
            p.expected = self._int(op.expected, "`expected`", op.span)

    def _wait_count(self, op: ir.WaitCount, scope: _Scope, p: _Pending) -> None:
        if op.expected is not None:
            p.expected = self._int(op.expected, "`expected`", op.span)

    def _plain(self, op: ir.Op, scope: _Scope, p: _Pending) -> None:
        return None


class _Ensure(_Evaluating):
    """Evaluates the `ensure` statements on every rank into `CheckInst`s."""

    def run(self, stmts: Sequence[ir.Stmt]) -> list[CheckInst]:
        self.checks: list[CheckInst] = []
        for rank in range(self.nranks):
            self._bind_rank(rank)
            self._body(stmts)
        return self.checks

    def _body(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Check):
                self._check(s)
            elif isinstance(s, ir.For):
                self._for(s)
            elif isinstance(s, ir.If):
                cond = self._truth(s.cond, s.span)
                if cond is not None:
                    self._body(s.body if cond else s.orelse)
            else:
                kind = s.kind.value if isinstance(s, ir.IssuerBlock) else ir.OP_NAMES[type(s)]
                self._error("E002", f"`{kind}` is not allowed in `ensure`", s.span,
                            "in `ensure`", help="`ensure` holds comparisons, `for` and `if`")

    def _for(self, s: ir.For) -> None:
        seq = self._seq(s.iter, "`for`", s.span)
        if seq is None:
            return
        saved = self._enter(s, len(seq))
        for value in seq:
            self.env.vars[s.var] = value
            self._body(s.body)
        self._leave(s.var, saved)

    def _check(self, s: ir.Check) -> None:
        self.failed = False
        left, right = self._side(s.left, s), self._side(s.right, s)
        self._same_length(f"the two sides of `{s.op}`", left, right,
                          (s.left.span or s.span, s.right.span),
                          ("the left side", "the right side"))
        if self.failed or left is None or right is None:
            return
        self.checks.append(CheckInst(rank=self.rank, op=s.op, left=left, left_init=s.left.init,
                                     right=right, right_init=s.right.init, check=s, span=s.span))
        self._count(s)

    def _side(self, region: ir.Region, s: ir.Check) -> RegionInst | None:
        rank: int | None = self.rank
        if region.rank is not None:
            rank = self._team_rank(region.rank, "rank", region.span or s.span, allow_me=True)
        region_inst = self._region(region, -1 if rank is None else rank, s.span)
        return region_inst if rank is not None else None


# ============================================================================= finishing


def _auto_queue_count(ops: list[list[_Pending]]) -> int:
    issuers: dict[tuple[int, int, int | None], set[tuple[int, int | None]]] = {}
    for rank, pending in enumerate(ops):
        for p in pending:
            if p.slot is not None and p.kind in ("put", "get"):
                key = (rank, p.kernel, p.peer)
                issuers.setdefault(key, set()).add((p.issuer.block, p.issuer.warp_of))
    most = max((len(s) for s in issuers.values()), default=1)
    return max(1, min(MAX_AUTO_QUEUES, most))


def _finalize(rank: int, pending: list[_Pending], queues: int, auto: bool,
              findings: _Findings) -> tuple[OpInst, ...]:
    kept: list[tuple[_Pending, tuple[int, ...], int | None]] = []
    remap: list[tuple[int, ...]] = []
    dropped = False
    for p in pending:
        preds = _remap(p.preds, remap) if dropped else p.preds
        if p.wait_default and queues != 1:
            findings.add(_wait_queue_error(p.op, queues, auto), rank)
            remap.append(preds)
            dropped = True
            continue
        queue = p.slot % queues if p.slot is not None else 0 if p.wait_default else p.queue
        remap.append((len(kept),))
        kept.append((p, preds, queue))
    group_of, sizes = _groups([p for p, _, _ in kept])
    statics: dict[int, tuple[Any, ...]] = {}
    return tuple(_op_inst(i, rank, p, preds, queue, group_of[i], sizes, statics)
                 for i, (p, preds, queue) in enumerate(kept))


def _remap(preds: tuple[int, ...], remap: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(j for i in preds for j in remap[i]))


def _wait_queue_error(op: ir.Op, queues: int, auto: bool) -> Diagnostic:
    notes = (f"`queues auto` chose {queues} queues",) if auto else ()
    return error("E002", f"`wait_signal` needs `queue=` when the protocol has {queues} queues",
                 op.span, f"the signal may come on any of {queues} queues", notes=notes,
                 help="add `queue=...`")


def _groups(pending: list[_Pending]) -> tuple[list[int], list[int]]:
    ids: dict[object, int] = {}
    group_of: list[int] = []
    sizes: list[int] = []
    for p in pending:
        gid = None if p.group is None else ids.get(p.group)
        if gid is None:
            gid = len(sizes)
            sizes.append(0)
            if p.group is not None:
                ids[p.group] = gid
        sizes[gid] += 1
        group_of.append(gid)
    return group_of, sizes


def _static_fields(op: ir.Op) -> tuple[Any, ...]:
    return (getattr(op, "signal", ir.SignalKind.NONE), getattr(op, "aggregate", False),
            getattr(op, "signal_per_copy", False), getattr(op, "mode", ir.Mode.AUTO),
            getattr(op, "count", None) or getattr(op, "counter", None))


def _op_inst(index: int, rank: int, p: _Pending, preds: tuple[int, ...], queue: int | None,
             group: int, sizes: list[int], statics: dict[int, tuple[Any, ...]]) -> OpInst:
    op = p.op
    static = statics.get(id(op))
    if static is None:
        static = statics[id(op)] = _static_fields(op)
    signal, aggregate, per_copy, mode, counter = static
    return OpInst(index=index, rank=rank, kernel=p.kernel, kind=p.kind, issuer=p.issuer,
                  preds=preds, op=op, span=op.span, group=group, peer=p.peer, queue=queue,
                  dst=p.dst, src=p.src, signal=signal, aggregate=aggregate,
                  signal_per_copy=per_copy, mode=mode, counter=counter, expected=p.expected,
                  lanes_in_group=sizes[group])


__all__ = ["DEFAULT_TEAM_SIZES", "MAX_OP_INSTANCES", "instantiate", "parse_param_value",
           "team_sizes"]
