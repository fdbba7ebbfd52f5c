"""The mori-sdma lowering pass: one block's ops to call-level statements.

`lower_block(facts, ops)` is the pass: the ops one logical block of one rank runs (in
`codegen.plan.segments_of` order) become its `Part`s, each a list of `Stmt`s
(`codegen.steps`) that `codegen.spell.hip` spells; `facts` (`MoriFacts`, made once per
instance by `mori_facts`) carries what the analysis decided: expected values, per-epoch
totals, thread modes and the signals counted puts bring.  The pass decides which
`ccoSdma` call each op is, at which scope, with which peer, queue, offsets and lengths;
every piece of C text comes from `codegen.spell.hip` (`spell/c.py`: literals).

Who runs what (wave64 on gfx942/gfx950; the target's docs: codegen.backends.mori_sdma):
block-level ops run on every thread of the block; `warps w` ops on hardware wave w; the
lanes of one wave run in *phases* (every lane's k-th op before any lane's (k+1)-th), each
posting group ONE thread-scope call site reached by exactly the group's lanes with
per-lane arguments from a table (`StmtKind.LANES`); lanes that cannot be phased run one
by one, refused when a multi-lane group signals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ccogen.analysis import Analysis
from ccogen.analysis.matching import Increment, SlotKey
from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.plan import segments_of
from ccogen.codegen.reduce import VECTOR, reduction, with_runtime_weights
from ccogen.codegen.rtexpr import CExpr
from ccogen.codegen.spell import hip
from ccogen.codegen.spell.hip import ALL_QUEUES, COOP, CTX, LEADER, SYNC, THREAD, field
from ccogen.codegen.steps import LOCAL, Stmt, StmtKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import Instance, IssuerLevel, OpInst, RegionInst
from ccogen.ir.nodes import Mode
from ccogen.ir.opkind import OpKind
from ccogen.targets.mori_sdma import CAPABILITIES as CAPS

WAVE = CAPS.warp_threads

Row = Callable[[OpInst], tuple[str, ...]]


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


def lower_block(facts: MoriFacts, ops: Sequence[OpInst]) -> tuple[Part, ...]:
    """The pass: one block's ops to its parts (module doc)."""
    return tuple(_Lowering(facts).block_program(ops))


# ============================================================================= lowering


def _line(op: OpInst) -> int:
    return op.span.line if op.span is not None else 0


@dataclass(frozen=True, slots=True)
class _Lowering:
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
        return Stmt(StmtKind.COMMENT, text=f"{self.f.source}:{_line(op)}: {op.kind}")

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
                         args=(CTX, str(p), queue, str(_line(op)))) for p in peers]
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
                                    str(_line(op)))
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
                                        hip.expected(hip.u64(n), hip.u64(n)), str(_line(op)))
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
            runtime = any(self.rt_transfer(o, field("n")) is not None for o in ops)
            fields = ("peer", "queue", "dst", "src", "bytes")
            return [self.lanes(ops, hip.sdma(kind), self.targs(ops[0], "thread"),
                               ("n", *fields) if runtime else fields,
                               self.transfer_row(runtime),
                               hip.transfer_args(field("peer"), field("dst"), field("src"),
                                                 field("bytes"), field("queue")))]
        if kind is OpKind.COMMIT:
            firsts = {(o.peer, o.queue): o for o in reversed(ops)}  # one lane per queue
            return [self.lanes(sorted(firsts.values(), key=lambda o: o.index), hip.sdma("commit"),
                               (THREAD,), ("peer", "queue"),
                               lambda o: (str(o.peer), str(o.queue)),
                               (field("peer"), field("queue")))]
        if kind is OpKind.QUIET:
            return self.lane_quiet(ops)
        if kind is OpKind.WAIT_SIGNAL:
            return [self.lane_wait(ops)]
        if kind is OpKind.WAIT_COUNT:
            raise Unsupported("`wait_count` inside `lanes` is not supported by `mori-sdma` (it "
                              "waits on several signal slots): wait from a warp or the block",
                              ops[0].span)
        if kind is OpKind.COPY:
            return [self.lanes(ops, hip.helper("copy", "thread"), (),
                               ("dst", "src", "bytes", "vec"), self.lane_copy_row,
                               (CTX, field("dst"), field("src"), field("bytes"),
                                field("vec")))]
        if kind is OpKind.FENCE:
            return [self.lanes(ops, hip.helper("fence", "system"), (), (), lambda o: (), ())]
        raise Unsupported(f"`{kind}` inside `lanes` is not supported by `mori-sdma`", ops[0].span)

    def transfer_row(self, runtime: bool) -> Row:
        """A lane's put/get arguments; with `runtime`, its length `a.n` first (every lane
        of the call site sets it, a static one to its size)."""
        def row(o: OpInst) -> tuple[str, ...]:
            assert o.dst is not None and o.src is not None
            rt = self.rt_transfer(o, field("n"))
            if rt is not None:
                return (self.rt_length(o), str(o.peer), str(o.queue), *rt)
            static = (str(o.peer), str(o.queue), hip.u64(self.off(o.dst)),
                      hip.u64(self.off(o.src)), hip.u64(o.dst.size))
            return (hip.i64(o.dst.size), *static) if runtime else static
        return row

    def lane_copy_row(self, op: OpInst) -> tuple[str, ...]:
        assert op.dst is not None and op.src is not None
        if op.dst.runtime is None and op.src.runtime is None:
            return self.copy_args(op)
        return (self.rt_start(op, op.dst), self.rt_start(op, op.src), self.rt_length(op),
                hip.aligned16(field("dst"), field("src"), field("bytes")))

    def lanes(self, ops: Sequence[OpInst], func: str, targs: tuple[str, ...],
              fields: tuple[str, ...], values: Row, args: tuple[str, ...],
              acquire: bool = False) -> Stmt:
        rows = tuple((hw_thread(o), tuple(zip(fields, values(o), strict=True))) for o in ops)
        return Stmt(StmtKind.LANES, func=func, targs=targs, args=args, rows=rows, acquire=acquire)

    def lane_quiet(self, ops: list[OpInst]) -> list[Stmt]:
        op = ops[0]
        if self.f.debug:  # see `quiet`
            line = str(_line(op))
            bounded = hip.helper("quiet_bounded")
            if op.peer is None:
                return [self.lanes(ops, bounded, (THREAD,), (), lambda o: (),
                                   (CTX, str(p), ALL_QUEUES, line))
                        for p in self.peers(op.rank)]
            return [self.lanes(ops, bounded, (THREAD,), ("peer", "queue"),
                               lambda o: (str(o.peer),
                                          ALL_QUEUES if o.queue is None else str(o.queue)),
                               (CTX, field("peer"), field("queue"), line))]
        if op.peer is None:
            return [self.lanes(ops, hip.sdma("quiet"), (THREAD,), (), lambda o: (), (str(p),))
                    for p in self.peers(op.rank)]
        if op.queue is None:
            return [self.lanes(ops, hip.sdma("quiet"), (THREAD,), ("peer",),
                               lambda o: (str(o.peer),), (field("peer"),))]
        return [self.lanes(ops, hip.sdma("quietQueue"), (THREAD,), ("peer", "queue"),
                           lambda o: (str(o.peer), str(o.queue)),
                           (field("peer"), field("queue")))]

    def lane_wait(self, ops: list[OpInst]) -> Stmt:
        def row(o: OpInst) -> tuple[str, ...]:
            base, total = self.expected(o)
            return str(o.peer), str(o.queue), hip.u64(base), hip.u64(total), str(_line(o))

        func, args = self.wait_call(field("sender"), field("queue"),
                                    hip.expected(field("value"), field("per_epoch")),
                                    field("line"))
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
            return Branch(hip.wave_is(w), tuple(stmts))
        if levels != {IssuerLevel.LANE}:
            raise Unsupported("a `warps` body that mixes warp-level ops with a nested `lanes` "
                              "block is not supported by `mori-sdma`", ops[0].span)
        phases = _phases(ops)
        if phases is not None:
            stmts = [s for ph in phases for s in self.phase(ph)]
            return Branch(hip.wave_is(w), tuple(stmts))
        return Branch(hip.wave_is(w), tuple(self.one_by_one(ops)))

    def one_by_one(self, ops: list[OpInst]) -> list[Stmt]:
        out: list[Stmt] = []
        for lane_ops in sorted(_by_issuer(ops).values(), key=lambda lane: hw_thread(lane[0])):
            for op in lane_ops:
                if (op.kind.traits.queued and op.lanes_in_group > 1 and not op.signal_per_copy
                        and (op.signal.local or op.signal.remote)):
                    raise Unsupported("lanes that differ in shape cannot post as one group; "
                                      "give every lane the same op sequence", op.span)
            body = [s for op in lane_ops for s in self.single(op, "thread")]
            out.append(Stmt(StmtKind.OPEN, guard=hip.thread_is(hw_thread(lane_ops[0]))))
            out.extend(body)
            out.append(Stmt(StmtKind.CLOSE))
        return out


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


__all__ = ["WAVE", "Branch", "MoriFacts", "Part", "counted_signals", "hw_thread",
           "lower_block", "mori_facts"]
