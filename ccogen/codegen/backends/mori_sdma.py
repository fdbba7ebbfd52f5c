"""`mori-sdma`: AMD MORI CCO `ccoSdma`, the SDMA copy engines driven from a HIP kernel.

A copy-engine API: every `put`/`get` of an issuer is ONE `sdma.put<...>` / `sdma.get<...>`
call at that issuer's scope, with every template argument spelled out
(`<Coop, localSignal, remoteSignal, optFlags, threadMode>`); the engine moves the
bytes and fires the signal after the copy on the same queue.  Facts come from the
capability table `ccogen.targets.mori_sdma` and the analysis (`ccogen.analysis`):
expected values, per-epoch totals and the thread mode of every posting group.

Who runs what (wave64 on gfx942/gfx950):

- block-level ops run on every thread of the block: `ccoCoopBlock` calls (the leader
  posts, `quiet` syncs the block); `waitSignal` spins in thread 0, then the block syncs;
- `warps w`: IR warp w is hardware wave w (`threadIdx.x / 64 == w`), `ccoCoopWarp`;
- `lanes`: IR lane t is thread t (inside `warps w`: thread 64*w + (t - 32*w)).  The
  lanes of one wave run in *phases* (every lane's k-th op before any lane's
  (k+1)-th, the schedule the SM targets use too).  In a phase, each posting group is
  ONE `sdma.put<ccoCoopThread, ..., mode>` call site reached by exactly the group's
  lanes, with per-lane arguments from a `switch (threadIdx.x)` table, so MORI groups
  the lanes as the compiler counted them (one signal per group, `SameQueue` when every
  lane targets one `(peer, queue)`).  Non-blocking call sites come before blocking ones
  (lanes of a wave have no independent progress).  Lanes whose op sequences cannot be
  phased run one by one, which is refused when a multi-lane group signals.

`commit(p, queue=q)` is `sdma.commit<ccoCoopThread>(p, q)` by the issuer's leader: the
warp/block forms ring every queue toward `p`, including queues other issuers may be
filling.  `quiet(p)` / `quiet(p, queue=q)` are `quiet<Coop>(p)` / `quietQueue<Coop>(p, q)`
with the issuer's Coop; `quiet()` drains every peer.  Waits are
`sdma.waitSignal(src, q, expected + epoch * per_epoch)` followed by a system-scope
acquire fence (MORI polls with relaxed loads); `--debug` bounds them and reports the
wait in the debug record.  After a local `copy` a system release fence makes the CU
stores visible to the copy engines.

Run-time values (language v2 §3, a run-time protocol only): a `load` of my own window
reads `c.heap` where the op runs (a peer's is refused); a put/get of run-time length
computes it once and a length of 0 becomes an 8-byte copy between scratch words, so
the op still posts and signals as counted.  Counted writes (§4) are emulated: a counted
put is a `remoteSignal` put, and `wait_count` waits for every `(sender, queue)` slot its
counted puts signal, each for its static number of puts per epoch (docs/targets.md).

Files: `kernels.hip` (device code; defines `BUILD_CCO_SDMA` itself), `host.cpp` (C ABI
host entry: `ccoCommCreate`, `ccoMemAlloc`, `ccoWindowRegister`, `ccoDevCommCreate` with
`reqs.sdmaQueueCount` = the instance's queue count, and a clear error when SDMA has no
queues) and `manifest.json`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ccogen._version import __version__
from ccogen.analysis import Analysis, analyse
from ccogen.analysis.matching import Increment, SlotKey
from ccogen.codegen.backends.base import (
    Backend,
    Options,
    check_budget,
    manifest_head,
    refuse_buffers,
    shown_source,
)
from ccogen.codegen.files import GeneratedFiles, banner, options_hash
from ccogen.codegen.jinja import render
from ccogen.codegen.layout import HeapLayout, plan_heap
from ccogen.codegen.naming import c_identifier
from ccogen.codegen.plan import Unsupported, block_ops, segments_of
from ccogen.codegen.reduce import CTYPES, VECTOR, reduction, with_runtime_weights
from ccogen.codegen.rtexpr import CExpr
from ccogen.codegen.steps import LOCAL, Stmt, StmtKind
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance, IssuerLevel, OpInst, RegionInst
from ccogen.ir.nodes import Mode
from ccogen.ir.opkind import OpKind
from ccogen.targets.mori_sdma import CAPABILITIES as CAPS

WAVE = CAPS.warp_threads
ARCHES = ("gfx942", "gfx950")
MAX_BLOCK_DIM = CAPS.max_block_threads
# HIP spellings of the half-precision element types (the kernels define `ccogen_bf16`).
HIP_CTYPES = {**CTYPES, DType.F16: "_Float16", DType.BF16: "ccogen_bf16"}
COOP = {"block": "ccoCoopBlock", "warp": "ccoCoopWarp", "thread": "ccoCoopThread"}
LEADER = {"block": "threadIdx.x == 0", "warp": "ccogen_lane_id() == 0", "thread": ""}
SYNC = {"block": "__syncthreads()", "warp": "ccogen_sync_wave()", "thread": ""}


# ============================================================================= view-model


@dataclass(frozen=True, slots=True)
class Branch:
    """Statements run where `guard` holds (empty: the whole block)."""

    guard: str
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Part:
    """A block-level statement list (one branch, no guard) or a fork joined by a sync."""

    branches: tuple[Branch, ...]
    join: bool


@dataclass(frozen=True, slots=True)
class Program:
    rank: int
    block: int
    case: int
    function: str
    parts: tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    symbol: str
    line: int
    blocks: int
    block_dim: int
    programs: tuple[Program, ...]
    barrier: bool


@dataclass(frozen=True, slots=True)
class MoriModel:
    name: str
    banner: str
    source: str
    nranks: int
    queues: int
    heap_size: int
    debug: bool
    kernels: tuple[Kernel, ...]
    entry: str  # prefix of the host entry's C functions
    lsa_barrier_count: int
    wave: int = WAVE
    reduces: bool = False  # print the `reduce` primitives
    runtime: bool = False  # print the run-time value primitives (`ccogen_ld`, ...)


# ============================================================================= lowering


@dataclass
class _Lowering:
    """Lowers the ops of one instance; `expected` and `modes` come from the analysis."""

    instance: Instance
    analysis: Analysis
    layout: HeapLayout
    source: str
    debug: bool
    # counted puts: the signals each `(receiver, counter)` gets per `(sender, queue)`
    counted: dict[tuple[int, str], dict[tuple[int, int], int]]

    # ---------------------------------------------------------------- helpers
    def off(self, region: object) -> int:
        return self.layout.window(region.window).offset + region.start  # type: ignore[attr-defined]

    def cx(self, op: OpInst) -> CExpr:
        return _MoriExpr(self.instance, self.layout, op.rank, op.span)

    def bounds(self, op: OpInst, region: RegionInst) -> tuple[str, str]:
        """(heap offset, length) of a region with run-time bounds, as C expressions."""
        assert region.runtime is not None
        start, stop = region.runtime
        base = self.off(region) - region.start
        cx = self.cx(op)
        return cx.value(start + base), cx.value(stop - start)  # type: ignore[operator]

    def rt_transfer(self, op: OpInst, n: str) -> tuple[str, str, str] | None:
        """(dst, src, bytes) of a put/get with run-time bounds, given the name `n` its
        length is bound to (None: static).  A length of 0 becomes an 8-byte copy between
        the scratch words of both heaps, so that the op still posts, signals (its
        remote/local/counted signal) and groups with its lanes as the analysis counted:
        MORI's thread-scope put returns before posting or signalling when the size is 0
        (mori/cco/cco.hpp, `ccoSdmaPutThread`), and a zero-length SDMA copy packet is not
        documented for the warp and block scopes."""
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return None
        scratch = f"{self.layout.scratch.offset}ULL"
        dst = self.rt_start(op, op.dst)
        src = self.rt_start(op, op.src)
        return (f"ccogen_rt_at({n}, {dst}, {scratch})", f"ccogen_rt_at({n}, {src}, {scratch})",
                f"ccogen_rt_bytes({n})")

    def rt_start(self, op: OpInst, region: RegionInst) -> str:
        if region.runtime is None:
            return f"{self.off(region)}LL"
        return self.bounds(op, region)[0]

    def rt_length(self, op: OpInst) -> str:
        assert op.dst is not None
        if op.dst.runtime is None:
            return f"{op.dst.size}LL"
        return self.bounds(op, op.dst)[1]

    def comment(self, op: OpInst) -> Stmt:
        line = op.span.line if op.span is not None else 0
        return Stmt(StmtKind.COMMENT, text=f"// {self.source}:{line}: {op.kind}")

    def expected(self, op: OpInst) -> tuple[int, int]:
        found = self.analysis.expected.of_wait(op)
        if found is None:
            raise Unsupported("this `wait_signal` has no signal to pair with", op.span)
        return found

    def mode(self, op: OpInst) -> str:
        mode = op.mode if op.mode is not Mode.AUTO else self.analysis.matching.mode_of(op)
        same = mode is Mode.SAME_QUEUE
        return "ccoSdmaThreadSameQueue" if same else "ccoSdmaThreadIndependent"

    def targs(self, op: OpInst, scope: str) -> tuple[str, ...]:
        flags = [f for f, on in (("ccoSdmaOptFlagsAggregate", op.aggregate),
                                 ("ccoSdmaOptFlagsSignalPerCopy", op.signal_per_copy)) if on]
        remote = op.signal.remote or op.counter is not None  # a counted put signals
        return (COOP[scope], _cbool(op.signal.local), _cbool(remote),
                " | ".join(flags) or "ccoSdmaOptFlagsDefault",
                self.mode(op) if scope == "thread" else "ccoSdmaThreadIndependent")

    def peers(self, rank: int) -> list[int]:
        return [p for p in range(self.instance.nranks) if p != rank]

    # ---------------------------------------------------------------- one issuer
    def single(self, op: OpInst, scope: str) -> list[Stmt]:
        """The statements of one op run by one issuer at `scope`."""
        out = [self.comment(op)]
        kind = op.kind
        if kind.traits.queued:
            assert op.dst is not None and op.src is not None and op.peer is not None
            n = f"rt{op.index}_n"
            rt = self.rt_transfer(op, n)
            if rt is None:
                dst, src, nbytes = (f"{self.off(op.dst)}ULL", f"{self.off(op.src)}ULL",
                                    f"{op.dst.size}ULL")
            else:
                out.append(Stmt(StmtKind.LET, text=f"const int64_t {n} = {self.rt_length(op)};"))
                dst, src, nbytes = rt
            args = (str(op.peer), "c.win", dst, "c.win", src, nbytes, str(op.queue))
            out.append(Stmt(StmtKind.CALL, func=f"sdma.{kind}", targs=self.targs(op, scope),
                            args=args))
        elif kind is OpKind.COMMIT:
            out.append(Stmt(StmtKind.CALL, func="sdma.commit", targs=("ccoCoopThread",),
                            args=(str(op.peer), str(op.queue)), guard=LEADER[scope]))
        elif kind is OpKind.QUIET:
            out.extend(self.quiet(op, scope))
        elif kind is OpKind.WAIT_SIGNAL:
            out.extend(self.wait(op, scope))
        elif kind is OpKind.WAIT_COUNT:
            out.extend(self.wait_count(op, scope))
        elif kind is OpKind.RESET_COUNT:
            raise Unsupported("`reset_count` has no lowering on `mori-sdma`: a counter is its "
                              "(sender, queue) signal slots there, which are never reset; drop "
                              "`reset_count` (the generated waits already count per epoch) or "
                              "generate for a target with counted writes", op.span)
        elif kind is OpKind.COPY:
            assert op.dst is not None and op.src is not None
            lets, copy_args = self.copy_lets(op)
            out.extend(lets)
            out.append(Stmt(StmtKind.CALL, func=f"ccogen_copy_{scope}", args=("c", *copy_args)))
        elif kind is OpKind.FENCE:
            out.append(Stmt(StmtKind.CALL, func="ccogen_fence_system"))
        elif kind is OpKind.BARRIER:
            if scope != "block":
                raise Unsupported("`barrier()` inside `warps` or `lanes` is not supported by "
                                  "`mori-sdma`", op.span)
            out.append(Stmt(StmtKind.CALL, func="ccogen_barrier_block", args=("c",)))
        elif kind.traits.reduces:
            out.append(self.reduce(op, scope))
        else:
            raise Unsupported(f"`{kind}` has no lowering on `mori-sdma`", op.span)
        return out

    def reduce(self, op: OpInst, scope: str) -> Stmt:
        """A local `reduce` on the compute units (a peer's source is E042 before this)."""
        assert op.dst is not None
        (peer, dst), spec = reduction(op, self.layout, HIP_CTYPES)
        if peer != LOCAL or any(p != LOCAL for p, _ in spec.srcs):
            raise Unsupported("a `reduce` on `mori-sdma` reads and writes local windows only",
                              op.span)
        spec = with_runtime_weights(op, spec, self.cx)
        return Stmt(StmtKind.REDUCE, func=f"ccogen_reduce_{scope}",
                    args=(f"{dst}ULL", f"{op.dst.size}ULL", _cbool(spec.vector == VECTOR)),
                    reduction=spec)

    def copy_args(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        dst, src, n = self.off(op.dst), self.off(op.src), op.dst.size
        vec = dst % 16 == 0 and src % 16 == 0 and n % 16 == 0
        return f"{dst}ULL", f"{src}ULL", f"{n}ULL", _cbool(vec)

    def copy_lets(self, op: OpInst) -> tuple[list[Stmt], tuple[str, ...]]:
        """A local copy's declarations and arguments: run-time offsets and length are
        computed once, 16-byte vectors when all three turn out multiples of 16."""
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return [], self.copy_args(op)
        names = tuple(f"rt{op.index}_{x}" for x in ("d", "s", "n"))
        values = (self.rt_start(op, op.dst), self.rt_start(op, op.src), self.rt_length(op))
        lets = [Stmt(StmtKind.LET, text=f"const uint64_t {name} = {value};")
                for name, value in zip(names, values, strict=True)]
        d, s, n = names
        return lets, (d, s, n, f"(({d} | {s} | {n}) & 15ULL) == 0")

    def quiet(self, op: OpInst, scope: str) -> list[Stmt]:
        coop = (COOP[scope],)
        if self.debug:  # amd-mori's debug drain traps while another wave is mid-post (N6)
            line = str(op.span.line if op.span is not None else 0)
            peers = self.peers(op.rank) if op.peer is None else [op.peer]
            queue = "-1" if op.queue is None else str(op.queue)
            return [Stmt(StmtKind.CALL, func="ccogen_quiet_bounded", targs=coop,
                         args=("c", str(p), queue, line)) for p in peers]
        if op.peer is None:
            return [Stmt(StmtKind.CALL, func="sdma.quiet", targs=coop, args=(str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [Stmt(StmtKind.CALL, func="sdma.quiet", targs=coop, args=(str(op.peer),))]
        return [Stmt(StmtKind.CALL, func="sdma.quietQueue", targs=coop,
                     args=(str(op.peer), str(op.queue)))]

    def wait_call(self, src: str, queue: str, expected: str,
                  line: int) -> tuple[str, tuple[str, ...]]:
        if self.debug:
            return "ccogen_wait_bounded", ("c", src, queue, expected, str(line))
        return "sdma.waitSignal", (src, queue, expected)

    def wait(self, op: OpInst, scope: str) -> list[Stmt]:
        base, total = self.expected(op)
        line = op.span.line if op.span is not None else 0
        func, args = self.wait_call(str(op.peer), str(op.queue),
                                    f"{base}ULL + c.epoch * {total}ULL", line)
        out = [Stmt(StmtKind.WAIT, func=func, args=args, guard=LEADER[scope])]
        if SYNC[scope]:
            out.append(Stmt(StmtKind.SYNC, text=SYNC[scope]))
        return out

    def wait_count(self, op: OpInst, scope: str) -> list[Stmt]:
        """`wait_count(C)`: every (sender, queue) slot that the epoch's counted puts to me
        signal, each waited for its static number of puts (one signal per put, or per
        posting group of lanes), whatever the bytes: the checker proved `expected` (a
        run-time one too) equal to the bytes those puts bring (E034), so waiting for all
        of them is waiting for it."""
        assert op.counter is not None
        counted = self.counted.get((op.rank, op.counter), {})
        total = sum(w.nbytes for w in self.analysis.matching.counted.get(
            (op.rank, op.counter), ()))
        if op.expected_rt is None and op.expected is not None and op.expected != total:
            raise Unsupported(
                f"`wait_count({op.counter}, expected={op.expected})` waits for part of the "
                f"{total} bytes counted to `{op.counter}` on rank {op.rank} in an epoch: on "
                "`mori-sdma` a counter is the (sender, queue) signal slots of its counted "
                "puts, and only their whole per-epoch counts can be waited for; omit "
                "`expected=` (wait for every counted put), or give the puts you wait for "
                "first `signal=\"remote\"` and `wait_signal` them", op.span)
        line = op.span.line if op.span is not None else 0
        out = [Stmt(StmtKind.COMMENT, text=f"// `{op.counter}`: {plural_puts(n)} from rank {s} on "
                                    f"queue {q}") for (s, q), n in sorted(counted.items())]
        if not counted:
            out.append(Stmt(StmtKind.COMMENT, text="// nothing is counted to this rank: no wait"))
        for (sender, queue), n in sorted(counted.items()):
            func, args = self.wait_call(str(sender), str(queue),
                                        f"{n}ULL + c.epoch * {n}ULL", line)
            out.append(Stmt(StmtKind.WAIT, func=func, args=args, guard=LEADER[scope]))
        if counted and SYNC[scope]:
            out.append(Stmt(StmtKind.SYNC, text=SYNC[scope]))
        return out

    # ---------------------------------------------------------------- lanes in phases
    def phase(self, ops: Sequence[OpInst]) -> list[Stmt]:
        """One phase of a wave's lanes: call sites, non-blocking before blocking."""
        texts = [self.comment(op).text for op in ops]
        out = [Stmt(StmtKind.COMMENT,
                    text=t if texts.count(t) == 1 else f"{t} ({texts.count(t)} lanes)")
               for t in dict.fromkeys(texts)]
        sites: dict[tuple[object, ...], list[OpInst]] = defaultdict(list)
        for op in ops:
            sites[_site_key(op)].append(op)
        ordered = sorted(sites.values(), key=lambda ms: (ms[0].kind.traits.blocking, ms[0].index))
        for members in ordered:
            out.extend(self.site(members))
        return out

    def site(self, ops: list[OpInst]) -> list[Stmt]:
        kind = ops[0].kind
        if kind.traits.queued:
            runtime = any(self.rt_transfer(o, "a.n") is not None for o in ops)
            fields = ("peer", "queue", "dst", "src", "bytes")
            return [self.lanes(ops, f"sdma.{kind}", self.targs(ops[0], "thread"),
                               ("n", *fields) if runtime else fields,
                               _transfer_row(self, runtime),
                               ("a.peer", "c.win", "a.dst", "c.win", "a.src", "a.bytes",
                                "a.queue"))]
        if kind is OpKind.COMMIT:
            firsts = {(o.peer, o.queue): o for o in reversed(ops)}  # one lane per queue
            return [self.lanes(sorted(firsts.values(), key=lambda o: o.index), "sdma.commit",
                               ("ccoCoopThread",), ("peer", "queue"),
                               lambda o: (str(o.peer), str(o.queue)), ("a.peer", "a.queue"))]
        if kind is OpKind.QUIET:
            return self.lane_quiet(ops)
        if kind is OpKind.WAIT_SIGNAL:
            return [self.lane_wait(ops)]
        if kind is OpKind.WAIT_COUNT:
            raise Unsupported("`wait_count` inside `lanes` is not supported by `mori-sdma` (it "
                              "waits on several signal slots): wait from a warp or the block",
                              ops[0].span)
        if kind is OpKind.COPY:
            return [self.lanes(ops, "ccogen_copy_thread", (), ("dst", "src", "bytes", "vec"),
                               self.lane_copy_row,
                               ("c", "a.dst", "a.src", "a.bytes", "a.vec"))]
        if kind is OpKind.FENCE:
            return [self.lanes(ops, "ccogen_fence_system", (), (), lambda o: (), ())]
        raise Unsupported(f"`{kind}` inside `lanes` is not supported by `mori-sdma`", ops[0].span)

    def lane_copy_row(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return self.copy_args(op)
        return (self.rt_start(op, op.dst), self.rt_start(op, op.src), self.rt_length(op),
                "((a.dst | a.src | a.bytes) & 15ULL) == 0")

    def lanes(self, ops: Sequence[OpInst], func: str, targs: tuple[str, ...],
              fields: tuple[str, ...], values: object, args: tuple[str, ...],
              acquire: bool = False) -> Stmt:
        rows = tuple((hw_thread(o), tuple(zip(fields, values(o), strict=True)))  # type: ignore[operator]
                     for o in ops)
        return Stmt(StmtKind.LANES, func=func, targs=targs, args=args, rows=rows, acquire=acquire)

    def lane_quiet(self, ops: list[OpInst]) -> list[Stmt]:
        op = ops[0]
        if self.debug:  # see `quiet`
            line = str(op.span.line if op.span is not None else 0)
            if op.peer is None:
                return [self.lanes(ops, "ccogen_quiet_bounded", ("ccoCoopThread",), (),
                                   lambda o: (), ("c", str(p), "-1", line))
                        for p in self.peers(op.rank)]
            return [self.lanes(ops, "ccogen_quiet_bounded", ("ccoCoopThread",),
                               ("peer", "queue"),
                               lambda o: (str(o.peer), "-1" if o.queue is None else str(o.queue)),
                               ("c", "a.peer", "a.queue", line))]
        if op.peer is None:
            return [self.lanes(ops, "sdma.quiet", ("ccoCoopThread",), (), lambda o: (), (str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [self.lanes(ops, "sdma.quiet", ("ccoCoopThread",), ("peer",),
                               lambda o: (str(o.peer),), ("a.peer",))]
        return [self.lanes(ops, "sdma.quietQueue", ("ccoCoopThread",), ("peer", "queue"),
                           lambda o: (str(o.peer), str(o.queue)), ("a.peer", "a.queue"))]

    def lane_wait(self, ops: list[OpInst]) -> Stmt:
        def row(o: OpInst) -> tuple[str, ...]:
            base, total = self.expected(o)
            line = o.span.line if o.span is not None else 0
            return str(o.peer), str(o.queue), f"{base}ULL", f"{total}ULL", str(line)

        func, args = self.wait_call("a.sender", "a.queue", "a.value + c.epoch * a.per_epoch",
                                    0)
        if self.debug:
            args = (*args[:-1], "a.line")
        return self.lanes(ops, func, (), ("sender", "queue", "value", "per_epoch", "line"), row,
                          args, acquire=True)

    # ---------------------------------------------------------------- segments
    def block_program(self, ops: Sequence[OpInst]) -> list[Part]:
        parts: list[Part] = []
        for seg in segments_of(ops):
            if seg[0].issuer.level is IssuerLevel.BLOCK:
                parts.append(Part((Branch("", tuple(self.single(seg[0], "block"))),), False))
            else:
                parts.append(Part(self.fork(seg), True))
        return parts

    def fork(self, seg: Sequence[OpInst]) -> tuple[Branch, ...]:
        waves: dict[int, list[OpInst]] = defaultdict(list)
        for op in seg:
            waves[hw_thread(op) // WAVE].append(op)
        return tuple(self.wave(w, ops) for w, ops in sorted(waves.items()))

    def wave(self, w: int, ops: list[OpInst]) -> Branch:
        levels = {op.issuer.level for op in ops}
        if levels == {IssuerLevel.WARP}:
            stmts = [s for op in ops for s in self.single(op, "warp")]
            return Branch(f"ccogen_wave() == {w}", tuple(stmts))
        if levels != {IssuerLevel.LANE}:
            raise Unsupported("a `warps` body that mixes warp-level ops with a nested `lanes` "
                              "block is not supported by `mori-sdma`", ops[0].span)
        phases = _phases(ops)
        if phases is not None:
            stmts = [s for ph in phases for s in self.phase(ph)]
            return Branch(f"ccogen_wave() == {w}", tuple(stmts))
        return Branch(f"ccogen_wave() == {w}", tuple(self.one_by_one(ops)))

    def one_by_one(self, ops: list[OpInst]) -> list[Stmt]:
        out: list[Stmt] = []
        for lane_ops in sorted(_by_issuer(ops).values(), key=lambda lane: hw_thread(lane[0])):
            for op in lane_ops:
                if (op.kind.traits.queued and op.lanes_in_group > 1 and not op.signal_per_copy
                        and (op.signal.local or op.signal.remote)):
                    raise Unsupported("lanes that differ in shape cannot post as one group; "
                                      "give every lane the same op sequence", op.span)
            body = [s for op in lane_ops for s in self.single(op, "thread")]
            out.append(Stmt(StmtKind.OPEN, guard=f"threadIdx.x == {hw_thread(lane_ops[0])}"))
            out.extend(body)
            out.append(Stmt(StmtKind.CLOSE))
        return out


def _cbool(value: bool) -> str:
    return "true" if value else "false"


def hw_thread(op: OpInst) -> int:
    """The hardware thread (wave64) that runs a lane or leads a warp."""
    who = op.issuer
    if who.lane is None:
        return WAVE * (who.warp or 0)
    if who.warp is not None:
        return WAVE * who.warp + (who.lane - 32 * who.warp)
    return who.lane


def _site_key(op: OpInst) -> tuple[object, ...]:
    if op.kind.traits.queued:
        return (op.kind, op.group)
    if op.kind is OpKind.QUIET:
        return (op.kind, op.peer is None, op.queue is None)
    return (op.kind,)


def _transfer_row(low: _Lowering, runtime: bool) -> object:
    """A lane's put/get arguments; with `runtime`, its length `a.n` first (every lane of
    the call site sets it, a static one to its size)."""
    def row(o: OpInst) -> tuple[str, ...]:
        assert o.dst is not None and o.src is not None
        rt = low.rt_transfer(o, "a.n")
        if rt is not None:
            return (low.rt_length(o), str(o.peer), str(o.queue), *rt)
        static = (str(o.peer), str(o.queue), f"{low.off(o.dst)}ULL", f"{low.off(o.src)}ULL",
                  f"{o.dst.size}ULL")
        return (f"{o.dst.size}LL", *static) if runtime else static
    return row


def plural_puts(n: int) -> str:
    return f"{n} counted put" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class _MoriExpr(CExpr):
    """Run-time values on `mori-sdma`: a `load` reads an element of my own heap through
    `c.heap` (`ccogen_ld`, kernels.hip).  `ccoSdma` gives the compute units no pointer
    into a peer's window, so a `load(x@p[i])` of a peer is refused."""

    def element(self, window: str, rank: int, index: int) -> str:
        if rank != self.me:
            raise Unsupported(
                f"a run-time `load` of a peer's window (`{window}@{rank}`) is not generated on "
                "`mori-sdma`: `ccoSdma` gives the compute units no pointer into a peer's "
                "window; bring the value over first (a signalled `put` from the peer, or a "
                "`get` with `signal=\"local\"` and its `wait_signal`) into a window of mine "
                "and `load` it there, or generate for `nccl-lsa` or `nvshmem`", self.span)
        dtype = self.instance.dtype(window)
        off = self.layout.window(window).offset + index * dtype.size
        if dtype in (DType.F16, DType.BF16):
            return f"static_cast<double>(ccogen_ld_{dtype.value}(c, {off}ULL))"
        wide = "double" if dtype.is_float else "int64_t"
        return f"static_cast<{wide}>(ccogen_ld<{HIP_CTYPES[dtype]}>(c, {off}ULL))"


def counted_signals(instance: Instance, increments: Mapping[SlotKey, tuple[Increment, ...]]
                    ) -> dict[tuple[int, str], dict[tuple[int, int], int]]:
    """The signals the counted puts of an epoch bring, per `(receiver, counter)` and
    `(sender, queue)`: one per put, or one per posting group of lanes and `(peer, queue)`
    (MORI groups lanes by queue; `signal_per_copy`: one per lane), as
    `analysis.matching` counts signals.  A slot that also carries signalled ops
    (`increments`: the analysis's signal increments per slot) would count both, and the
    waits on either would be wrong: refused, naming the queue."""
    seen: dict[tuple[int, str], dict[tuple[int, int], set[object]]] = defaultdict(
        lambda: defaultdict(set))
    first: dict[tuple[int, int, int], OpInst] = {}
    for rank, ops in enumerate(instance.ranks):
        for op in ops:
            if op.kind is not OpKind.PUT or op.counter is None:
                continue
            assert op.peer is not None and op.queue is not None
            grouped = (op.issuer.level is IssuerLevel.LANE and op.lanes_in_group > 1
                       and not op.signal_per_copy)
            seen[(op.peer, op.counter)][(rank, op.queue)].add(
                ("g", op.group) if grouped else ("o", op.index))
            first.setdefault((op.peer, rank, op.queue), op)
    for (receiver, sender, queue), op in first.items():
        if increments.get((receiver, sender, queue)):
            raise Unsupported(
                f"counted puts from rank {sender} to rank {receiver} on queue {queue} share "
                "their signal slot with signalled ops on that queue: on `mori-sdma` a counted "
                "put is a put that signals its (sender, queue) slot, and the waits on that slot "
                "could not tell the two apart; give the counted puts a queue of their own "
                "(`queue=`)", op.span)
    return {key: {slot: len(keys) for slot, keys in slots.items()}
            for key, slots in seen.items()}


def _by_issuer(ops: Sequence[OpInst]) -> dict[object, list[OpInst]]:
    out: dict[object, list[OpInst]] = defaultdict(list)
    for op in ops:
        out[op.issuer].append(op)
    return out


def _phases(ops: Sequence[OpInst]) -> list[list[OpInst]] | None:
    """k-th op of every lane per phase, when every posting group lies in one phase."""
    lanes = list(_by_issuer(ops).values())
    depth = max(len(lane) for lane in lanes)
    phases = [[lane[k] for lane in lanes if len(lane) > k] for k in range(depth)]
    where: dict[int, int] = {}
    for k, ph in enumerate(phases):
        for op in ph:
            if op.kind.traits.queued and where.setdefault(op.group, k) != k:
                return None
    return phases


# ============================================================================= backend


class MoriSdma(Backend):
    name = "mori-sdma"
    language = "hip"
    kernel_params = ("devcomm_ptr", "window", "epoch", "debug")

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        if options.epoch_from_heap:
            raise Unsupported("Options.epoch_from_heap is implemented for nccl-lsa and nvshmem "
                              "only", None)
        if instance.period > 1:
            raise Unsupported("`launch % K` is not generated on `mori-sdma` yet: generate "
                              "for `nccl-lsa` or `nvshmem`", None)
        refuse_buffers(instance, self.name)
        model, layout = self.model(instance, source, options)
        files = {
            "kernels.hip": render("mori_sdma/kernels.hip.j2", model=model),
            "host.cpp": render("mori_sdma/host.cpp.j2", model=model),
            "manifest.json": json.dumps(self.manifest(model, layout, instance, options),
                                        indent=2) + "\n",
        }
        return GeneratedFiles(files)

    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[MoriModel, HeapLayout]:
        if instance.queues > (CAPS.queue_cap or instance.queues):
            raise Unsupported(f"{instance.queues} queues exceed the SDMA cap of {CAPS.queue_cap}",
                              instance.protocol.span)
        source = shown_source(instance, source)  # escaped once, for every file (codegen.text)
        layout = plan_heap(instance, 1)  # its scratch word: zero-length run-time transfers
        analysis = analyse(instance)
        low = _Lowering(instance, analysis, layout, source, options.debug,
                        counted_signals(instance, analysis.matching.increments))
        for k in instance.kernels:
            check_budget(k.blocks, options.max_ctas, k.name, k.span)
        kernels = tuple(self.kernel(instance, k.index, low) for k in instance.kernels)
        opts = {**options.as_dict(), "arch": list(ARCHES), "target": self.name}
        model = MoriModel(
            name=instance.protocol.name, source=source,
            banner=banner(source, __version__, options_hash(opts)), nranks=instance.nranks,
            queues=instance.queues, heap_size=layout.size, debug=options.debug,
            kernels=kernels, entry=c_identifier(instance.protocol.name),
            lsa_barrier_count=1 if any(k.barrier for k in kernels) else 0,
            reduces=any(op.kind.traits.reduces for ops in instance.ranks for op in ops),
            runtime=bool(instance.runtime))
        return model, layout

    def kernel(self, instance: Instance, index: int, low: _Lowering) -> Kernel:
        k = instance.kernels[index]
        programs = []
        threads = [k.threads]
        barrier = False
        for rank in range(instance.nranks):
            for block, ops in sorted(block_ops(instance, index, rank).items()):
                parts = low.block_program(ops)
                programs.append(Program(rank, block, rank * k.blocks + block,
                                        f"r{rank}_b{block}", tuple(parts)))
                threads += [hw_thread(op) + (WAVE if op.issuer.lane is None else 1)
                            for op in ops if op.issuer.level is not IssuerLevel.BLOCK]
                barrier = barrier or any(op.kind is OpKind.BARRIER for op in ops)
        if barrier and k.blocks > 1:
            raise Unsupported("`barrier()` in a kernel with several blocks is not supported by "
                              "`mori-sdma` (one LSA barrier slot)", k.span)
        block_dim = -(-max(threads) // WAVE) * WAVE
        if block_dim > MAX_BLOCK_DIM:  # never clamp: the waves past it would not run
            raise Unsupported(f"kernel `{k.name}` needs {block_dim} threads per block "
                              f"(64-thread waves), over the {MAX_BLOCK_DIM} a block can have",
                              k.span)
        return Kernel(name=k.name, symbol=c_identifier(instance.protocol.name, k.name),
                      line=k.span.line if k.span else 0, blocks=k.blocks, block_dim=block_dim,
                      programs=tuple(programs), barrier=barrier)

    def manifest(self, model: MoriModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        return {
            **manifest_head(self.name, instance, model.source, list(ARCHES), options.debug,
                            layout.size, options.max_ctas),
            "windows": layout.windows_manifest(instance),
            "scratch": {"offset": layout.scratch.offset, "size": layout.scratch.size},
            "kernel_file": "kernels.hip",
            "kernels": [
                {"name": k.name, "symbol": k.symbol, "grid": k.blocks, "block": k.block_dim,
                 # workgroups of one rank may wait on each other's signals: co-resident
                 "shared_mem": 0, "cooperative": k.blocks > 1,
                 "params": list(self.kernel_params)}
                for k in model.kernels],
            "mori": {
                "sdma_queue_count": model.queues,
                "lsa_barrier_count": model.lsa_barrier_count,
                "gda_connection_type": "CCO_GDA_CONNECTION_NONE",
                "host_entry": {"file": "host.cpp", "setup": f"{model.entry}_setup",
                               "teardown": f"{model.entry}_teardown",
                               "unique_id": f"{model.entry}_unique_id"},
                "env": {"MORI_ENABLE_SDMA": "1"},
                "hip_flags": ["-DMORI_CCO_SDMA_DEBUG"] if options.debug else [],
            },
        }


__all__ = ["MoriSdma", "hw_thread"]
