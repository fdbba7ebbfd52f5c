"""Declarations: parameters, the team, windows, the queue count and launch sizes.

All are symmetric (evaluated with the parameters and `nranks`, never `me`); a failure
here leaves no instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccogen.diag import error
from ccogen.instantiate.findings import Findings, from_eval
from ccogen.instantiate.limits import MAX_BLOCKS, MAX_THREADS
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DTYPE_NAMES, DType
from ccogen.ir.evaluate import Compiler, Env, EvalError
from ccogen.ir.instance import KernelInst
from ccogen.limits import raise_hint


@dataclass(frozen=True, slots=True)
class KernelHead:
    kernel: ir.Kernel
    threads: int | None  # None: could not be evaluated (checks against it are skipped)
    blocks: int | None  # `blocks=` as given; None when absent or bad
    ok: bool


@dataclass(frozen=True, slots=True)
class Memory:
    """A window or buffer of `count` elements of `dtype`."""

    count: int
    dtype: DType
    buffer: bool

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.size


@dataclass(slots=True)
class Decl:
    windows: dict[str, int | None]  # bytes; None: the size could not be evaluated
    queues: int | None  # None: `queues auto`
    kernels: list[KernelHead]
    fatal: bool
    memories: dict[str, Memory | None] = field(default_factory=dict)  # windows and buffers


def _symmetric(nranks: int | None, params: Mapping[str, int], what: str) -> Env:
    return Env(nranks, None, params,
               me_error=f"{what} symmetric: must not depend on `me`",
               nranks_error=f"{what} fixed before the team size: must not depend on `nranks`")


def bind_params(
    protocol: ir.Protocol, nranks: int | None, given: dict[str, Any],
    compiler: Compiler, findings: Findings,
) -> dict[str, int] | None:
    ok = _check_param_names(protocol, given, findings)
    bound: dict[str, int] = {}
    env = _symmetric(nranks, bound, "parameter defaults are")
    for p in protocol.params:
        if p.type is ir.ParamType.DTYPE:
            continue  # `bind_dtype_params`
        value = _param_value(p, given, env, compiler, findings)
        if value is None:
            ok = False
        else:
            bound[p.name] = value
    return bound if ok else None


def is_dtype_param(protocol: ir.Protocol, name: str) -> bool:
    decl = protocol.param(name)
    return decl is not None and decl.type is ir.ParamType.DTYPE


def bind_dtype_params(protocol: ir.Protocol, given: Mapping[str, Any],
                      findings: Findings) -> dict[str, DType] | None:
    """The value of every `dtype` parameter: given (a `DType` or its name) or the default."""
    out: dict[str, DType] = {}
    ok = True
    for p in protocol.params:
        if p.type is not ir.ParamType.DTYPE:
            continue
        value = given.get(p.name, p.default)
        if isinstance(value, str) and value in DTYPE_NAMES:
            out[p.name] = DType(value)
            continue
        findings.add(error("E002", f"parameter `{p.name}` is an element type, not `{value!r}`",
                           p.span, "declared `dtype` here",
                           help=f"give one of {', '.join(DTYPE_NAMES)}"))
        ok = False
    return out if ok else None


def _check_param_names(protocol: ir.Protocol, given: Mapping[str, Any],
                       findings: Findings) -> bool:
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
                 findings: Findings) -> int | None:
    if p.name in given:
        value = given[p.name]
        if type(value) is not int:
            findings.add(error("E002", f"parameter `{p.name}` must be an integer, not "
                               f"`{value!r}`", p.span, "declared here"))
            return None
    else:
        assert not isinstance(p.default, DType)
        try:
            value = compiler.integer(p.default, f"the default of `{p.name}`")(env)
        except EvalError as exc:
            findings.add(from_eval(exc, env, p.span))
            return None
    if p.type is ir.ParamType.BYTES and value < 0:
        findings.add(error("E002", f"parameter `{p.name}` is a byte count and cannot be "
                           f"negative, not {value}", p.span, "declared `bytes` here"))
        return None
    return value


def team_size(protocol: ir.Protocol, params: Mapping[str, int], compiler: Compiler,
               findings: Findings) -> int | None:
    team = protocol.team
    assert team.size is not None
    env = _symmetric(None, params, "the team size is")
    try:
        return compiler.integer(team.size, "the team size")(env)
    except EvalError as exc:
        findings.add(from_eval(exc, env, team.span))
        return None


def team_ok(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
             compiler: Compiler, findings: Findings) -> bool:
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
    size = team_size(protocol, params, compiler, findings)
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


def declare(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
            types: Mapping[str, DType], compiler: Compiler, findings: Findings) -> Decl:
    memories: dict[str, Memory | None] = {}
    decls: tuple[ir.Window | ir.Buffer, ...] = (*protocol.windows, *protocol.buffers)
    for w in decls:
        count = _window_size(w, nranks, params, compiler, findings)
        dtype = w.dtype if isinstance(w.dtype, DType) else types[w.dtype.name]
        memories[w.name] = (None if count is None
                            else Memory(count, dtype, isinstance(w, ir.Buffer)))
    windows = {w.name: (m.nbytes if (m := memories[w.name]) is not None else None)
               for w in protocol.windows}
    queues, queues_ok = _queue_count(protocol, nranks, params, compiler, findings)
    kernels = [_kernel_head(k, nranks, params, compiler, findings) for k in protocol.kernels]
    fatal = (None in memories.values() or not queues_ok or not all(k.ok for k in kernels))
    return Decl(windows, queues, kernels, fatal, memories)


def _window_size(w: ir.Window | ir.Buffer, nranks: int, params: Mapping[str, int],
                 compiler: Compiler, findings: Findings) -> int | None:
    """The element count of a window or buffer (bytes for an untyped window)."""
    what = "buffer" if isinstance(w, ir.Buffer) else "window"
    env = _symmetric(nranks, params, f"{what} sizes are")
    try:
        size = compiler.integer(w.size, f"the size of {what} `{w.name}`")(env)
    except EvalError as exc:
        findings.add(from_eval(exc, env, w.span))
        return None
    if size <= 0:
        findings.add(error("E003", f"{what} `{w.name}` must have a positive size, not {size}",
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
                 compiler: Compiler, findings: Findings) -> tuple[int | None, bool]:
    if protocol.queues is None:
        return None, True
    env = _symmetric(nranks, params, "queue counts are")
    span = protocol.queues.span or protocol.queues_span or protocol.span
    try:
        count = compiler.integer(protocol.queues, "the queue count")(env)
    except EvalError as exc:
        findings.add(from_eval(exc, env, span))
        return 1, False
    if count < 1:
        findings.add(error("E002", f"`queues` must be at least 1, not {count}", span,
                           f"this is {count}", help="write `queues 1`, or `queues auto`"))
        return 1, False
    return count, True


def _kernel_head(k: ir.Kernel, nranks: int, params: Mapping[str, int],
                 compiler: Compiler, findings: Findings) -> KernelHead:
    env = _symmetric(nranks, params, "launch sizes are")
    threads = _launch_size(k, k.threads, "threads", MAX_THREADS, env, compiler, findings)
    blocks, blocks_ok = None, True
    if k.blocks is not None:
        blocks = _launch_size(k, k.blocks, "blocks", MAX_BLOCKS, env, compiler, findings)
        blocks_ok = blocks is not None
    return KernelHead(k, threads, blocks, threads is not None and blocks_ok)


def _launch_size(k: ir.Kernel, expr: ir.Expr, name: str, limit: int, env: Env,
                 compiler: Compiler, findings: Findings) -> int | None:
    span = expr.span or k.span
    try:
        value = compiler.integer(expr, f"`{name}=`")(env)
    except EvalError as exc:
        findings.add(from_eval(exc, env, span))
        return None
    if 1 <= value <= limit:
        return value
    message = (f"kernel `{k.name}` has `{name}={value}`, over the device limit of {limit}"
               if value > limit else f"kernel `{k.name}` needs `{name}=` of at least 1, "
               f"not {value}")
    findings.add(error("E005", message, span, f"this is {value}", notes=(env.bindings(),)))
    return None


def kernel_insts(decl: Decl, grid: list[int]) -> tuple[KernelInst, ...]:
    return tuple(
        KernelInst(name=h.kernel.name, index=i, threads=h.threads or 1,
                   blocks=h.blocks if h.blocks is not None else grid[i], span=h.kernel.span,
                   logical_blocks=grid[i])
        for i, h in enumerate(decl.kernels))
