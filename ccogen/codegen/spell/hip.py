"""HIP spelling: mori-sdma's statements (`codegen.steps.Stmt`) and their C pieces.

`stmt(s, indent)` is the text of one statement: lines, each ending in a newline, every
one starting with `indent`.  The calls name `ccoSdma` members (`sdma.put<...>`) and the
helpers templates/mori_sdma/kernels.hip.j2 defines (`ccogen_copy_block`, ...); that
template prints the text inside each block program.

The pieces a statement is made of (the rest of this module) are every HIP text the
mori-sdma lowering (`codegen.lower.mori`) puts into its statements: the `ccoSdma` names
and template arguments, the helpers' names, who leads and syncs at each scope (`block`,
`warp`: a 64-thread wave, `thread`), the per-lane table's fields, the element types and
the loads of run-time values from my own heap (`HeapExpr`).  The lowering decides which
call, which peer, queue and offsets; it writes no C beyond the decimal `int`s of peers,
queues and source lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ccogen.codegen.reduce import CTYPES
from ccogen.codegen.spell.c import CExpr, cbool, i64, u64
from ccogen.codegen.steps import Stmt, StmtKind
from ccogen.ir.dtype import DType

Spelling = Callable[[Stmt, str], list[str]]


def stmt(s: Stmt, indent: str) -> str:
    """The text of `s`, indented by `indent` (module doc)."""
    return "".join(line + "\n" for line in SPELLINGS[s.kind](s, indent))


def call(s: Stmt) -> str:
    """`func<targs>(args);` (no template arguments: `func(args);`)."""
    targs = f"<{', '.join(s.targs)}>" if s.targs else ""
    return f"{s.func}{targs}({', '.join(s.args)});"


def _text(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}{s.text}"]


def _comment(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}// {s.text}"]


def _call(s: Stmt, ind: str) -> list[str]:
    guard = f"if ({s.guard}) " if s.guard else ""
    return [f"{ind}{guard}{call(s)}"]


def _wait(s: Stmt, ind: str) -> list[str]:
    # MORI polls with relaxed loads: acquire before reading what the signal announces
    return [f"{ind}if ({s.guard or 'true'}) {{", f"{ind}  {call(s)}",
            f"{ind}  ccogen_acquire_system();", f"{ind}}}"]


def _reduce(s: Stmt, ind: str) -> list[str]:
    red = s.reduction
    assert red is not None
    dst, nbytes, vec = s.args
    offsets = ", ".join(f"{off}ULL" for _, off in red.srcs)
    lines = [f"{ind}{{", f"{ind}  const uint64_t s[] = {{ {offsets} }};"]
    if red.weights:
        lines.append(f"{ind}  const {red.acc} w[] = {{ {', '.join(red.weights)} }};")
    lines.append(
        f"{ind}  {s.func}<{red.ctype}, {red.acc}, CCOGEN_{red.op.upper()}, {len(red.srcs)}, "
        f"{cbool(red.weights)}>(c, {dst}, s, {'w' if red.weights else 'nullptr'}, {nbytes}, "
        f"{vec});")
    return [*lines, f"{ind}}}"]


def _sync(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}{s.text};"]


def _open(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}if ({s.guard}) {{"]


def _close(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}}}"]


def _lanes(s: Stmt, ind: str) -> list[str]:
    """The lanes of one call site: each sets its arguments from the table, then calls."""
    lines = [f"{ind}{{", f"{ind}  ccogen_lane a{{}};", f"{ind}  switch (threadIdx.x) {{"]
    for thread, fields in s.rows:
        sets = "".join(f" a.{name} = {value};" for name, value in fields)
        lines.append(f"{ind}    case {thread}: a.on = true;{sets} break;")
    lines += [f"{ind}    default: break;", f"{ind}  }}", f"{ind}  if (a.on) {{",
              f"{ind}    {call(s)}"]
    if s.acquire:
        lines.append(f"{ind}    ccogen_acquire_system();")
    return [*lines, f"{ind}  }}", f"{ind}}}"]


SPELLINGS: dict[StmtKind, Spelling] = {
    StmtKind.COMMENT: _comment,
    StmtKind.CALL: _call,
    StmtKind.WAIT: _wait,
    StmtKind.REDUCE: _reduce,
    StmtKind.LET: _text,
    StmtKind.SYNC: _sync,
    StmtKind.OPEN: _open,
    StmtKind.CLOSE: _close,
    StmtKind.LANES: _lanes,
}
"""Every statement kind's spelling (tests/codegen/spell/test_hip.py: one for each)."""


# ============================================================================= pieces

CTX = "c"  # the kernel's `ccogen_ctx` (kernels.hip.j2)
HEAP = "c.win"  # the instance's heap window: every transfer's source and destination
THREAD = "ccoCoopThread"
ALL_QUEUES = "-1"  # `ccogen_quiet_bounded`: every queue toward the peer
# HIP spellings of the element types (the kernels define `ccogen_bf16`)
HIP_CTYPES = {**CTYPES, DType.F16: "_Float16", DType.BF16: "ccogen_bf16"}
COOP = {"block": "ccoCoopBlock", "warp": "ccoCoopWarp", "thread": THREAD}
LEADER = {"block": "threadIdx.x == 0", "warp": "ccogen_lane_id() == 0", "thread": ""}
SYNC = {"block": "__syncthreads()", "warp": "ccogen_sync_wave()", "thread": ""}


def sdma(member: object) -> str:
    """A member of the kernel's `ccoSdma` (`put`, `get`, `commit`, `quiet`, ...)."""
    return f"sdma.{member}"


def helper(name: str, scope: str | None = None) -> str:
    """A helper of kernels.hip.j2: `ccogen_<name>` or `ccogen_<name>_<scope>`."""
    return f"ccogen_{name}" if scope is None else f"ccogen_{name}_{scope}"


def sdma_targs(scope: str, local: bool, remote: bool, aggregate: bool, per_copy: bool,
               same_queue: bool) -> tuple[str, ...]:
    """`<Coop, localSignal, remoteSignal, optFlags, threadMode>` of a put or get."""
    flags = [f for f, on in (("ccoSdmaOptFlagsAggregate", aggregate),
                             ("ccoSdmaOptFlagsSignalPerCopy", per_copy)) if on]
    mode = "ccoSdmaThreadSameQueue" if scope == "thread" and same_queue \
        else "ccoSdmaThreadIndependent"
    return (COOP[scope], cbool(local), cbool(remote),
            " | ".join(flags) or "ccoSdmaOptFlagsDefault", mode)


def transfer_args(peer: str, dst: str, src: str, nbytes: str, queue: str) -> tuple[str, ...]:
    """The arguments of `sdma.put` / `sdma.get`: both addresses are in the heap window."""
    return (peer, HEAP, dst, HEAP, src, nbytes, queue)


def field(name: str) -> str:
    """A field of the per-lane table's `ccogen_lane a` (kernels.hip.j2)."""
    return f"a.{name}"


def name(index: int, what: str) -> str:
    """The name a run-time value of op `index` is bound to (`rt3_n`)."""
    return f"rt{index}_{what}"


def let_i64(var: str, value: str) -> str:
    return f"const int64_t {var} = {value};"


def let_u64(var: str, value: str) -> str:
    return f"const uint64_t {var} = {value};"


def rt_at(n: str, start: str, scratch: int) -> str:
    """A run-time transfer's address: `start`, or the scratch word when its length `n` is 0."""
    return f"ccogen_rt_at({n}, {start}, {u64(scratch)})"


def rt_bytes(n: str) -> str:
    """A run-time transfer's byte count: `n`, or the scratch word's 8 when it is 0."""
    return f"ccogen_rt_bytes({n})"


def aligned16(dst: str, src: str, nbytes: str) -> str:
    """True where both addresses and the length are multiples of 16 (a vector copy)."""
    return f"(({dst} | {src} | {nbytes}) & 15ULL) == 0"


def expected(base: str, per_epoch: str) -> str:
    """The value a signal reaches in this launch: `base` plus `per_epoch` for each epoch."""
    return f"{base} + c.epoch * {per_epoch}"


def wave_is(wave: int) -> str:
    return f"ccogen_wave() == {wave}"


def thread_is(thread: int) -> str:
    return f"threadIdx.x == {thread}"


@dataclass(frozen=True)
class HeapExpr(CExpr):
    """Run-time values read from my own heap through `c.heap` (`ccogen_ld`, kernels.hip);
    a peer's element is `peer_element`'s to answer (a target without pointers into a
    peer's window refuses it)."""

    def element(self, window: str, rank: int, index: int) -> str:
        if rank != self.me:
            return self.peer_element(window, rank, index)
        dtype = self.instance.dtype(window)
        off = self.layout.window(window).offset + index * dtype.size
        if dtype in (DType.F16, DType.BF16):
            return f"static_cast<double>(ccogen_ld_{dtype.value}(c, {u64(off)}))"
        wide = "double" if dtype.is_float else "int64_t"
        return f"static_cast<{wide}>(ccogen_ld<{HIP_CTYPES[dtype]}>(c, {u64(off)}))"

    def peer_element(self, window: str, rank: int, index: int) -> str:
        raise NotImplementedError


__all__ = ["ALL_QUEUES", "COOP", "CTX", "HEAP", "HIP_CTYPES", "LEADER", "SPELLINGS", "SYNC",
           "THREAD", "HeapExpr", "aligned16", "call", "cbool", "expected", "field", "helper",
           "i64", "let_i64", "let_u64", "name", "rt_at", "rt_bytes", "sdma", "sdma_targs",
           "stmt", "thread_is", "transfer_args", "u64", "wave_is"]
