"""mori-sdma lowering, one op at one scope: the statements of a put, a wait, a quiet...

Part of the pass `codegen.lower.mori` (its doc: who runs what).  `MoriFacts` is what the
pass reads of one instance; `OpLowering.single` lowers one op run by one issuer at
`block`, `warp` (a 64-thread wave) or `thread` scope.  Every piece of C text comes from
`codegen.spell.hip`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ccogen.analysis import Analysis
from ccogen.analysis.matching import Increment, SlotKey
from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.reduce import VECTOR, reduction, refuse_runtime_bounds, with_runtime_weights
from ccogen.codegen.spell import hip
from ccogen.codegen.spell.c import CExpr
from ccogen.codegen.spell.hip import ALL_QUEUES, COOP, CTX, LEADER, SYNC, THREAD
from ccogen.codegen.steps import LOCAL, Stmt, StmtKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import Instance, IssuerLevel, OpInst, RegionInst
from ccogen.ir.nodes import Mode
from ccogen.ir.opkind import OpKind
from ccogen.targets.mori_sdma import CAPABILITIES as CAPS

WAVE = CAPS.warp_threads

Row = Callable[[OpInst], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class MoriFacts:
    """What the pass reads of one instance; `expected` and modes come from the analysis."""

    instance: Instance
    analysis: Analysis
    layout: HeapLayout
    source: str  # as generated files print it (backends.base.shown_source)
    debug: bool
    # counted puts: the signals each `(receiver, counter)` gets per `(sender, queue)`
    counted: dict[tuple[int, str], dict[tuple[int, int], int]]


def mori_facts(instance: Instance, analysis: Analysis, layout: HeapLayout, source: str,
               debug: bool) -> MoriFacts:
    return MoriFacts(instance, analysis, layout, source, debug,
                     counted_signals(instance, analysis.matching.increments))


def line_of(op: OpInst) -> int:
    return op.span.line if op.span is not None else 0


@dataclass(frozen=True, slots=True)
class OpLowering:
    """The statements of one op run by one issuer at one scope (`single`)."""

    f: MoriFacts

    # ---------------------------------------------------------------- helpers
    def off(self, region: RegionInst) -> int:
        return self.f.layout.window(region.window).offset + region.start

    def cx(self, op: OpInst) -> CExpr:
        return _MoriExpr(self.f.instance, self.f.layout, op.rank, op.span)

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
        scratch = self.f.layout.scratch.offset
        return (hip.rt_at(n, self.rt_start(op, op.dst), scratch),
                hip.rt_at(n, self.rt_start(op, op.src), scratch), hip.rt_bytes(n))

    def rt_start(self, op: OpInst, region: RegionInst) -> str:
        if region.runtime is None:
            return hip.i64(self.off(region))
        return self.bounds(op, region)[0]

    def rt_length(self, op: OpInst) -> str:
        assert op.dst is not None
        if op.dst.runtime is None:
            return hip.i64(op.dst.size)
        return self.bounds(op, op.dst)[1]

    def comment(self, op: OpInst) -> Stmt:
        return Stmt(StmtKind.COMMENT, text=f"{self.f.source}:{line_of(op)}: {op.kind}")

    def expected(self, op: OpInst) -> tuple[int, int]:
        found = self.f.analysis.expected.of_wait(op)
        if found is None:
            raise Unsupported("this `wait_signal` has no signal to pair with", op.span)
        return found

    def targs(self, op: OpInst, scope: str) -> tuple[str, ...]:
        same = False
        if scope == "thread":  # a thread-scope post groups with its lanes' (thread mode)
            mode = op.mode if op.mode is not Mode.AUTO else self.f.analysis.matching.mode_of(op)
            same = mode is Mode.SAME_QUEUE
        remote = op.signal.remote or op.counter is not None  # a counted put signals
        return hip.sdma_targs(scope, op.signal.local, remote, op.aggregate,
                              op.signal_per_copy, same)

    def peers(self, rank: int) -> list[int]:
        return [p for p in range(self.f.instance.nranks) if p != rank]

    # ---------------------------------------------------------------- one issuer
    def single(self, op: OpInst, scope: str) -> list[Stmt]:
        """The statements of one op run by one issuer at `scope`."""
        out = [self.comment(op)]
        kind = op.kind
        if kind.traits.queued:
            assert op.dst is not None and op.src is not None and op.peer is not None
            n = hip.name(op.index, "n")
            rt = self.rt_transfer(op, n)
            if rt is None:
                dst, src, nbytes = (hip.u64(self.off(op.dst)), hip.u64(self.off(op.src)),
                                    hip.u64(op.dst.size))
            else:
                out.append(Stmt(StmtKind.LET, text=hip.let_i64(n, self.rt_length(op))))
                dst, src, nbytes = rt
            args = hip.transfer_args(str(op.peer), dst, src, nbytes, str(op.queue))
            out.append(Stmt(StmtKind.CALL, func=hip.sdma(kind), targs=self.targs(op, scope),
                            args=args))
        elif kind is OpKind.COMMIT:
            out.append(Stmt(StmtKind.CALL, func=hip.sdma("commit"), targs=(THREAD,),
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
            out.append(Stmt(StmtKind.CALL, func=hip.helper("copy", scope),
                            args=(CTX, *copy_args)))
        elif kind is OpKind.FENCE:
            out.append(Stmt(StmtKind.CALL, func=hip.helper("fence", "system")))
        elif kind is OpKind.BARRIER:
            if scope != "block":
                raise Unsupported("`barrier()` inside `warps` or `lanes` is not supported by "
                                  "`mori-sdma`", op.span)
            out.append(Stmt(StmtKind.CALL, func=hip.helper("barrier", "block"), args=(CTX,)))
        elif kind.traits.reduces:
            out.append(self.reduce(op, scope))
        else:
            raise Unsupported(f"`{kind}` has no lowering on `mori-sdma`", op.span)
        return out

    def reduce(self, op: OpInst, scope: str) -> Stmt:
        """A local `reduce` on the compute units (a peer's source is E042 before this)."""
        assert op.dst is not None
        (peer, dst), spec = reduction(op, self.f.layout, hip.HIP_CTYPES)
        if peer != LOCAL or any(p != LOCAL for p, _ in spec.srcs):
            raise Unsupported("a `reduce` on `mori-sdma` reads and writes local windows only",
                              op.span)
        refuse_runtime_bounds(op, "mori-sdma")
        spec = with_runtime_weights(op, spec, self.cx)
        return Stmt(StmtKind.REDUCE, func=hip.helper("reduce", scope),
                    args=(hip.u64(dst), hip.u64(op.dst.size), hip.cbool(spec.vector == VECTOR)),
                    reduction=spec)

    def copy_args(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        dst, src, n = self.off(op.dst), self.off(op.src), op.dst.size
        vec = dst % 16 == 0 and src % 16 == 0 and n % 16 == 0
        return hip.u64(dst), hip.u64(src), hip.u64(n), hip.cbool(vec)

    def copy_lets(self, op: OpInst) -> tuple[list[Stmt], tuple[str, ...]]:
        """A local copy's declarations and arguments: run-time offsets and length are
        computed once, 16-byte vectors when all three turn out multiples of 16."""
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return [], self.copy_args(op)
        names = tuple(hip.name(op.index, x) for x in ("d", "s", "n"))
        values = (self.rt_start(op, op.dst), self.rt_start(op, op.src), self.rt_length(op))
        lets = [Stmt(StmtKind.LET, text=hip.let_u64(var, value))
                for var, value in zip(names, values, strict=True)]
        d, s, n = names
        return lets, (d, s, n, hip.aligned16(d, s, n))

    def quiet(self, op: OpInst, scope: str) -> list[Stmt]:
        coop = (COOP[scope],)
        if self.f.debug:  # amd-mori's debug drain traps while another wave is mid-post (N6)
            peers = self.peers(op.rank) if op.peer is None else [op.peer]
            queue = ALL_QUEUES if op.queue is None else str(op.queue)
            return [Stmt(StmtKind.CALL, func=hip.helper("quiet_bounded"), targs=coop,
                         args=(CTX, str(p), queue, str(line_of(op)))) for p in peers]
        if op.peer is None:
            return [Stmt(StmtKind.CALL, func=hip.sdma("quiet"), targs=coop, args=(str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [Stmt(StmtKind.CALL, func=hip.sdma("quiet"), targs=coop,
                         args=(str(op.peer),))]
        return [Stmt(StmtKind.CALL, func=hip.sdma("quietQueue"), targs=coop,
                     args=(str(op.peer), str(op.queue)))]

    def wait_call(self, src: str, queue: str, expected: str,
                  line: str) -> tuple[str, tuple[str, ...]]:
        if self.f.debug:
            return hip.helper("wait_bounded"), (CTX, src, queue, expected, line)
        return hip.sdma("waitSignal"), (src, queue, expected)

    def wait(self, op: OpInst, scope: str) -> list[Stmt]:
        base, total = self.expected(op)
        func, args = self.wait_call(str(op.peer), str(op.queue),
                                    hip.expected(hip.u64(base), hip.u64(total)),
                                    str(line_of(op)))
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
        counted = self.f.counted.get((op.rank, op.counter), {})
        total = sum(w.nbytes for w in self.f.analysis.matching.counted.get(
            (op.rank, op.counter), ()))
        if op.expected_rt is None and op.expected is not None and op.expected != total:
            raise Unsupported(
                f"`wait_count({op.counter}, expected={op.expected})` waits for part of the "
                f"{total} bytes counted to `{op.counter}` on rank {op.rank} in an epoch: on "
                "`mori-sdma` a counter is the (sender, queue) signal slots of its counted "
                "puts, and only their whole per-epoch counts can be waited for; omit "
                "`expected=` (wait for every counted put), or give the puts you wait for "
                "first `signal=\"remote\"` and `wait_signal` them", op.span)
        out = [Stmt(StmtKind.COMMENT, text=f"`{op.counter}`: {plural_puts(n)} from rank {s} on "
                                           f"queue {q}") for (s, q), n in sorted(counted.items())]
        if not counted:
            out.append(Stmt(StmtKind.COMMENT, text="nothing is counted to this rank: no wait"))
        for (sender, queue), n in sorted(counted.items()):
            func, args = self.wait_call(str(sender), str(queue),
                                        hip.expected(hip.u64(n), hip.u64(n)), str(line_of(op)))
            out.append(Stmt(StmtKind.WAIT, func=func, args=args, guard=LEADER[scope]))
        if counted and SYNC[scope]:
            out.append(Stmt(StmtKind.SYNC, text=SYNC[scope]))
        return out


def hw_thread(op: OpInst) -> int:
    """The hardware thread (wave64) that runs a lane or leads a warp."""
    who = op.issuer
    if who.lane is None:
        return WAVE * (who.warp or 0)
    if who.warp is not None:
        return WAVE * who.warp + (who.lane - 32 * who.warp)
    return who.lane


def plural_puts(n: int) -> str:
    return f"{n} counted put" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class _MoriExpr(hip.HeapExpr):
    """Run-time values on `mori-sdma`: a `load` reads an element of my own heap
    (`hip.HeapExpr`).  `ccoSdma` gives the compute units no pointer into a peer's window,
    so a `load(x@p[i])` of a peer is refused."""

    def peer_element(self, window: str, rank: int, index: int) -> str:
        raise Unsupported(
            f"a run-time `load` of a peer's window (`{window}@{rank}`) is not generated on "
            "`mori-sdma`: `ccoSdma` gives the compute units no pointer into a peer's "
            "window; bring the value over first (a signalled `put` from the peer, or a "
            "`get` with `signal=\"local\"` and its `wait_signal`) into a window of mine "
            "and `load` it there, or generate for `nccl-lsa` or `nvshmem`", self.span)


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


def by_issuer(ops: Sequence[OpInst]) -> dict[object, list[OpInst]]:
    out: dict[object, list[OpInst]] = defaultdict(list)
    for op in ops:
        out[op.issuer].append(op)
    return out


__all__ = ["WAVE", "MoriFacts", "OpLowering", "Row", "by_issuer", "counted_signals",
           "hw_thread", "line_of", "mori_facts", "plural_puts"]
