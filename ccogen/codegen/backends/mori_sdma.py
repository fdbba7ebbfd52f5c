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

Files: `kernels.hip` (device code; defines `BUILD_CCO_SDMA` itself), `host.cpp` (C ABI
host entry: `ccoCommCreate`, `ccoMemAlloc`, `ccoWindowRegister`, `ccoDevCommCreate` with
`reqs.sdmaQueueCount` = the instance's queue count, and a clear error when SDMA has no
queues) and `manifest.json`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ccogen import __version__
from ccogen.analysis import Analysis, analyse
from ccogen.codegen.backends.base import (
    Backend,
    Options,
    check_budget,
    manifest_head,
    refuse_buffers,
)
from ccogen.codegen.files import GeneratedFiles, banner, options_hash
from ccogen.codegen.jinja import render
from ccogen.codegen.layout import HeapLayout, plan_heap
from ccogen.codegen.model import LOCAL, Reduction
from ccogen.codegen.naming import c_identifier
from ccogen.codegen.plan import Unsupported, block_ops, segments_of
from ccogen.codegen.reduce import CTYPES, VECTOR, reduction
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance, IssuerLevel, OpInst
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
class Stmt:
    """One printed statement.

    kinds: `comment` (text); `call` (`func<targs>(args)`, under `guard` when set);
    `wait` (`func(args)` then the acquire fence, under `guard`); `sync` (text is the
    statement); `lanes` (a per-lane table: `rows` of (thread, ((field, value), ...)),
    then `func<targs>(args)` by the lanes of the table, `acquire` after it for waits);
    `reduce` (`func<reduction's types>(c, args...)` over the sources of `reduction`).
    """

    kind: str
    text: str = ""
    func: str = ""
    targs: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    guard: str = ""
    rows: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    acquire: bool = False
    reduction: Reduction | None = None


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


# ============================================================================= lowering


@dataclass
class _Lowering:
    """Lowers the ops of one instance; `expected` and `modes` come from the analysis."""

    instance: Instance
    analysis: Analysis
    layout: HeapLayout
    source: str
    debug: bool

    # ---------------------------------------------------------------- helpers
    def off(self, region: object) -> int:
        return self.layout.window(region.window).offset + region.start  # type: ignore[attr-defined]

    def comment(self, op: OpInst) -> Stmt:
        line = op.span.line if op.span is not None else 0
        return Stmt("comment", text=f"// {self.source}:{line}: {op.kind}")

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
        return (COOP[scope], _cbool(op.signal.local), _cbool(op.signal.remote),
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
            args = (str(op.peer), "c.win", f"{self.off(op.dst)}ULL", "c.win",
                    f"{self.off(op.src)}ULL", f"{op.dst.size}ULL", str(op.queue))
            out.append(Stmt("call", func=f"sdma.{kind}", targs=self.targs(op, scope), args=args))
        elif kind is OpKind.COMMIT:
            out.append(Stmt("call", func="sdma.commit", targs=("ccoCoopThread",),
                            args=(str(op.peer), str(op.queue)), guard=LEADER[scope]))
        elif kind is OpKind.QUIET:
            out.extend(self.quiet(op, scope))
        elif kind is OpKind.WAIT_SIGNAL:
            out.extend(self.wait(op, scope))
        elif kind is OpKind.COPY:
            assert op.dst is not None and op.src is not None
            out.append(Stmt("call", func=f"ccogen_copy_{scope}",
                            args=("c", *self.copy_args(op))))
        elif kind is OpKind.FENCE:
            out.append(Stmt("call", func="ccogen_fence_system"))
        elif kind is OpKind.BARRIER:
            if scope != "block":
                raise Unsupported("`barrier()` inside `warps` or `lanes` is not supported by "
                                  "`mori-sdma`", op.span)
            out.append(Stmt("call", func="ccogen_barrier_block", args=("c",)))
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
        return Stmt("reduce", func=f"ccogen_reduce_{scope}",
                    args=(f"{dst}ULL", f"{op.dst.size}ULL", _cbool(spec.vector == VECTOR)),
                    reduction=spec)

    def copy_args(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        dst, src, n = self.off(op.dst), self.off(op.src), op.dst.size
        vec = dst % 16 == 0 and src % 16 == 0 and n % 16 == 0
        return f"{dst}ULL", f"{src}ULL", f"{n}ULL", _cbool(vec)

    def quiet(self, op: OpInst, scope: str) -> list[Stmt]:
        coop = (COOP[scope],)
        if op.peer is None:
            return [Stmt("call", func="sdma.quiet", targs=coop, args=(str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [Stmt("call", func="sdma.quiet", targs=coop, args=(str(op.peer),))]
        return [Stmt("call", func="sdma.quietQueue", targs=coop,
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
        out = [Stmt("wait", func=func, args=args, guard=LEADER[scope])]
        if SYNC[scope]:
            out.append(Stmt("sync", text=SYNC[scope]))
        return out

    # ---------------------------------------------------------------- lanes in phases
    def phase(self, ops: Sequence[OpInst]) -> list[Stmt]:
        """One phase of a wave's lanes: call sites, non-blocking before blocking."""
        texts = [self.comment(op).text for op in ops]
        out = [Stmt("comment", text=t if texts.count(t) == 1 else f"{t} ({texts.count(t)} lanes)")
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
            return [self.lanes(ops, f"sdma.{kind}", self.targs(ops[0], "thread"),
                               ("peer", "queue", "dst", "src", "bytes"), _transfer_row(self),
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
        if kind is OpKind.COPY:
            return [self.lanes(ops, "ccogen_copy_thread", (), ("dst", "src", "bytes", "vec"),
                               lambda o: self.copy_args(o),
                               ("c", "a.dst", "a.src", "a.bytes", "a.vec"))]
        if kind is OpKind.FENCE:
            return [self.lanes(ops, "ccogen_fence_system", (), (), lambda o: (), ())]
        raise Unsupported(f"`{kind}` inside `lanes` is not supported by `mori-sdma`", ops[0].span)

    def lanes(self, ops: Sequence[OpInst], func: str, targs: tuple[str, ...],
              fields: tuple[str, ...], values: object, args: tuple[str, ...],
              acquire: bool = False) -> Stmt:
        rows = tuple((hw_thread(o), tuple(zip(fields, values(o), strict=True)))  # type: ignore[operator]
                     for o in ops)
        return Stmt("lanes", func=func, targs=targs, args=args, rows=rows, acquire=acquire)

    def lane_quiet(self, ops: list[OpInst]) -> list[Stmt]:
        op = ops[0]
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
            out.append(Stmt("open", guard=f"threadIdx.x == {hw_thread(lane_ops[0])}"))
            out.extend(body)
            out.append(Stmt("close"))
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


def _transfer_row(low: _Lowering) -> object:
    def row(o: OpInst) -> tuple[str, ...]:
        assert o.dst is not None and o.src is not None
        return (str(o.peer), str(o.queue), f"{low.off(o.dst)}ULL", f"{low.off(o.src)}ULL",
                f"{o.dst.size}ULL")
    return row


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
        layout = plan_heap(instance, 1)
        low = _Lowering(instance, analyse(instance), layout, source, options.debug)
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
            reduces=any(op.kind.traits.reduces for ops in instance.ranks for op in ops))
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
