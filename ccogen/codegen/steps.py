"""The device IR: typed steps (the SM targets) and statements (mori-sdma).

`codegen.plan` lowers an instance's ops into `Step`s, the passes (`codegen.ctasplit`,
`codegen.spread`, `codegen.reroll`, `codegen.rotate`, the backends' `refine`) rewrite
them, and `codegen.spell.cuda` spells each one as C++ for the templates to print.  A
step's kind is a `StepKind` member, never a string: a pass asks `s.kind is
StepKind.COPY` or a family below (`s.kind in MOVES_DATA`), and a rewrite names its
target kind (`replace(s, kind=StepKind.CSIGNAL)`).  `StepKind` is a plain `Enum`, so a
comparison with a string is always false (tests/house/test_step_kinds.py keeps them out
of codegen altogether); its value is the kind's name in the device primitives
(`ccogen_<value>_<scope>`, templates/*/kernels.cu.j2).

mori-sdma's lowering pass (codegen.lower.mori) produces call-level `Stmt`s instead,
typed the same way (`StmtKind`) and spelled by `codegen.spell.hip`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ccogen.codegen.spell.affine import affine

LOCAL = -1  # `peer` of an address on the executing rank
# the static `dst_peer`/`src_peer` of a copy whose peer is a run-time value (its C text is
# in `Step.rt`; codegen.rtpeer): a remote rank (>= 0) equal to no rank of a team (at most
# 1,024), so that no pass fuses it with a signal or counter of a known peer; the passes
# that compare footprints take it as any rank (ctasplit.Footprint, spread)
RT_PEER = 1 << 20
# `peer` of an address in local buffer i (language v2 `buffer`, a kernel parameter):
# BUFFER0 - i.  Such an address is an offset into the caller's tensor, not the heap.
BUFFER0 = -2


def buffer_peer(index: int) -> int:
    """The `peer` value that names local buffer `index` (0-based, declaration order)."""
    return BUFFER0 - index


class StepKind(Enum):
    """What a step does (fields: `Step`); the value names its device primitive."""

    COMMENT = "comment"  # `text`, printed as is
    COPY = "copy"  # dst_peer/dst_off <- src_peer/src_off, `nbytes`, `vec`
    SIGNAL = "signal"  # atomic add `value` at heap offset `off` on rank `peer`, release
    WAIT = "wait"  # acquire-spin until the local word at `off` >= value + epoch * per_epoch
    SYNC = "sync"  # barrier of the executing scope; `seq` numbers group syncs
    FENCE = "fence"
    QUIET = "quiet"
    BARRIER = "barrier"  # the whole team; `seq` numbers them within the launch
    RESET = "reset"  # store 0 at local `off`
    REDUCE = "reduce"  # element-wise combine of `reduction.srcs` into dst_peer/dst_off
    PUTSIG = "putsig"  # a fused copy + signal: copy fields plus off/value/peer
    # a copy to `dst_peer` whose `nbytes` the engine itself adds to the peer's counter at
    # `off` after the data (NCCL CFT `putCounted`, NVSHMEM `putmem_signal_counted`)
    PUTCOUNTED = "putcounted"
    WAITCOUNTED = "waitcounted"  # a `wait` through the engine's counted wait
    # after a wait on a signal slot where counted data comes through the fabric proxy
    FABACQUIRE = "fabacquire"
    PFENCE = "pfence"  # a proxy fence; `text` is its argument (codegen.fences)
    LLPUT = "llput"  # a small put with its signal folded in (codegen.ll)
    LLWAIT = "llwait"  # the wait of an LL put, which writes the payload at `dst_off`
    # a wait for a total computed on the device (`rt` value), then the bytes taken off
    RTWAIT = "rtwait"
    RTWAITCOUNTED = "rtwaitcounted"  # an `rtwait` through the engine's counted wait
    REQUIRE = "require"  # a debug check: `text` the C condition (codegen.require)
    # Split over the CTAs of a group (codegen.ctasplit): this CTA's threads meet
    CTASYNC = "ctasync"
    CSIGNAL = "csignal"  # thread 0 of every CTA adds `value` on `peer`
    CWAIT = "cwait"  # thread 0 of every CTA spins
    CPUTSIG = "cputsig"  # every CTA puts its slice and adds `value`
    # `body` run `value` times (`c_trips`), `var` counting from 0 (codegen.reroll and
    # codegen.loops, which folds a loop the checker sampled)
    LOOP = "loop"
    SPREAD = "spread"  # the persistent loop over a fork's rows (codegen.spread)
    CHUNK = "chunk"  # one copy of a spread row: its `chunk`-th `value` bytes


# ----------------------------------------------------------------------------- families

# steps that read or write data bytes (their footprints: codegen.ctasplit)
MOVES_DATA = frozenset({StepKind.COPY, StepKind.PUTSIG, StepKind.CPUTSIG, StepKind.PUTCOUNTED,
                        StepKind.LLPUT, StepKind.LLWAIT, StepKind.REDUCE})
# signals whose value is split over the CTAs of the group (codegen.ctasplit scales)
PER_CTA_SIGNALS = frozenset({StepKind.CSIGNAL, StepKind.CPUTSIG})
GROUP_SIGNALS = frozenset({StepKind.SIGNAL, StepKind.PUTSIG})
SPIN_WAITS = frozenset({StepKind.WAIT, StepKind.CWAIT})  # compare with count x `scale`
RUNTIME_WAITS = frozenset({StepKind.RTWAIT, StepKind.RTWAITCOUNTED})  # the leader's alone
# every wait on a heap word (codegen.fences adds the acquires after them)
WAITS = SPIN_WAITS | RUNTIME_WAITS | {StepKind.WAITCOUNTED}


# (the loop's execution on its rank, iteration, trips): `OpInst.trip`
Trip = tuple[tuple[object, ...], int, int]


@dataclass(frozen=True, slots=True)
class Reduction:
    """What a `reduce` step combines, decided here and printed by the templates.

    `srcs` are (peer, offset) addresses like a copy's (`LOCAL`, a rank, or a buffer:
    `buffer_peer`), combined in list order.  `ctype` is the element's C type, `acc` the
    accumulator's (f32 for f16/bf16, the type itself otherwise: integers wrap as the
    simulator's do), `weights` C literals of the accumulator type (empty: unweighted),
    `vector` the bytes one load moves (16 when every heap address and the length allow
    it; the device code still checks a buffer's base address at run time), `elements`
    the element count.  `kinds`: for a converting `reduce` (a source's float type is not
    `dst`'s), each source's `CCOGEN_F32`/`CCOGEN_F16`/`CCOGEN_BF16` code, and `widths` its
    element bytes (both empty otherwise).
    """

    op: str  # sum | max | min
    dtype: str
    ctype: str
    acc: str
    srcs: tuple[tuple[int, int], ...]
    weights: tuple[str, ...]
    vector: int
    elements: int
    kinds: tuple[str, ...] = ()
    widths: tuple[int, ...] = ()  # a converting `reduce`: each source's element bytes

    def source_bytes(self, k: int, nbytes: int) -> int:
        """Bytes source `k` covers when `dst` covers `nbytes`."""
        return self.elements * self.widths[k] if self.widths else nbytes


@dataclass(frozen=True, slots=True)
class Spread:
    """Rows of a `warps`/`lanes` fork spread over every warp of the group (codegen.spread).

    Item i (of `items`, taken by grid stride) is branch `i % branches`, iteration
    `t = i // (branches * chunks)`, chunk `i // branches % chunks`; `cases[b]` are the
    steps of branch b's item (comments, and `chunk` copies whose texts use `t`).
    """

    branches: int
    iterations: int
    chunks: int
    chunk_bytes: int
    cases: tuple[tuple[Step, ...], ...]

    @property
    def items(self) -> int:
        return self.branches * self.iterations * self.chunks

    @property
    def per_iteration(self) -> int:
        return self.branches * self.chunks


@dataclass(frozen=True, slots=True)
class Affine:
    """An integer slot of a step in a `loop` body, moved by the loop's trip `t`:
    `const + coef * t + alt * (t % 2)` (codegen.reroll folds runs whose numbers move so;
    `alt` only in a program folded over the ranks, where a ring alternates two slots).

    The passes decide on these numbers (codegen.spread asks whether a row's destination
    moves by at least its length); `codegen.spell.affine` prints them, never the other
    way round."""

    const: int
    coef: int = 0
    alt: int = 0

    def at(self, t: int) -> int:
        """The value at trip `t`."""
        return self.const + self.coef * t + self.alt * (t % 2)


@dataclass(frozen=True, slots=True)
class Step:
    """One primitive of the generated program (what each kind means: `StepKind`).

    Split over the CTAs of a group (codegen.ctasplit), `value` of a wait stays the
    checker's count: the word is compared with it times `scale`.
    """

    kind: StepKind
    text: str = ""
    peer: int = LOCAL
    off: int = 0
    value: int = 0
    per_epoch: int = 0
    dst_peer: int = LOCAL
    dst_off: int = 0
    src_peer: int = LOCAL
    src_off: int = 0
    nbytes: int = 0
    vec: bool = False
    seq: int = 0
    line: int = 0
    src: int = -1
    queue: int = -1
    wait_kind: int = 0  # 1 wait_signal, 2 wait_count
    scale: int = 1  # a signal slot's word counts signals x scale (codegen.ctasplit)
    reduction: Reduction | None = None  # `reduce`: dst_peer/dst_off/nbytes + this
    # run-time values (language v2 §3): C expressions that replace the static fields of
    # the same name (`dst_off`, `src_off`, `nbytes`, `value`, `vec`) where the op's
    # regions or count are only known on the device; the static fields then hold the
    # footprint (what the op may touch), for the passes that reason over addresses
    rt: tuple[tuple[str, str], ...] = ()
    let: tuple[tuple[str, str], ...] = ()  # (name, C expression) the `rt` texts use
    # a `loop` body's integer slots that move with the trip (codegen.reroll): (slot,
    # `Affine` in `t`) for the slots `rt` does not hold, the static fields keeping trip
    # 0's value (the footprint); slot names as `rt`'s (`dst_off`, `src0`, `srcpeer0`...)
    affine: tuple[tuple[str, Affine], ...] = ()
    # `loop` (codegen.reroll, codegen.loops): `body` run `value` times (a run-time trip
    # count would be `rt` "trips": `c_trips`), `var` counting from 0
    body: tuple[Step, ...] = ()
    var: str = "t"
    # `spread` (codegen.spread): the persistent loop over a fork's rows; `chunk`: one of
    # its copies, the `chunk`-th `value` bytes of the row
    spread: Spread | None = None
    # lowered from an op of a loop instantiated on three iterations (`OpInst.trip`): the
    # loop's execution, the iteration and the trips; codegen.loops folds or expands them
    trip: Trip | None = field(default=None, compare=False)

    def _c(self, name: str, static: str) -> str:
        for key, text in self.rt:
            if key == name:
                return text
        return static

    def _n(self, name: str, static: int, unsigned: bool = True) -> str:
        """An integer slot: its `rt` text, else its `affine` value, else the literal."""
        for key, text in self.rt:
            if key == name:
                return text
        for key, a in self.affine:
            if key == name:
                return affine(a.const, a.coef, a.alt, unsigned)
        return f"{static}ULL" if unsigned else str(static)

    def moving(self, name: str) -> Affine | None:
        """Slot `name`'s `Affine` in the enclosing loop's trip (None: not moving, or a
        run-time `rt` text)."""
        if any(key == name for key, _ in self.rt):
            return None
        return next((a for key, a in self.affine if key == name), None)

    @property
    def c_peer(self) -> str:
        return self._n("peer", self.peer, unsigned=False)

    @property
    def c_src(self) -> str:
        """The rank a wait's words come from, for the debug record (-1: any)."""
        return self._n("src", self.src, unsigned=False)

    @property
    def c_line(self) -> str:
        return self._n("line", self.line, unsigned=False)

    @property
    def c_queue(self) -> str:
        return self._n("queue", self.queue, unsigned=False)

    @property
    def c_off(self) -> str:
        return self._n("off", self.off)

    @property
    def c_per_epoch(self) -> str:
        return self._n("per_epoch", self.per_epoch)

    @property
    def c_dst_peer(self) -> str:
        return self._n("dst_peer", self.dst_peer, unsigned=False)

    @property
    def c_src_peer(self) -> str:
        return self._n("src_peer", self.src_peer, unsigned=False)

    @property
    def c_dst_off(self) -> str:
        return self._n("dst_off", self.dst_off)

    @property
    def c_src_off(self) -> str:
        return self._n("src_off", self.src_off)

    @property
    def c_nbytes(self) -> str:
        return self._n("nbytes", self.nbytes)

    @property
    def c_value(self) -> str:
        return self._n("value", self.value)

    @property
    def c_trips(self) -> str:
        """A `loop`'s trip count as C (`rt` "trips" where it is a run-time value)."""
        return self._c("trips", str(self.value))

    @property
    def c_seq(self) -> str:
        return self._n("seq", self.seq)

    @property
    def c_vec(self) -> str:
        return self._c("vec", "true" if self.vec else "false")

    @property
    def c_srcs(self) -> tuple[tuple[str, str], ...]:
        """A `reduce`'s sources as (C peer, C offset): `src0`, `src1`... in `rt` replace
        the static offsets (a folded loop's, codegen.reroll), `srcpeer0`... the peers (a
        program folded over ranks, codegen.ranks)."""
        if self.reduction is None:
            return ()
        return tuple((self._n(f"srcpeer{i}", peer, unsigned=False), self._n(f"src{i}", off))
                     for i, (peer, off) in enumerate(self.reduction.srcs))


# ----------------------------------------------------------------------------- HIP statements


class StmtKind(Enum):
    """What a mori-sdma statement is (`Stmt`; spelled by `codegen.spell.hip`).

    mori-sdma lowers ops straight to the calls of `ccoSdma` (the pass codegen.lower.mori),
    so its statements are call-level: the function, its template arguments and its
    arguments are decided when it is lowered, their text written by codegen.spell.hip."""

    COMMENT = "comment"  # `text`, a line comment
    CALL = "call"  # `func<targs>(args)`, under `guard` when set
    WAIT = "wait"  # `func(args)` then the acquire fence, under `guard`
    SYNC = "sync"  # `text` is the statement
    # a per-lane table: `rows` of (thread, ((field, value), ...)), then `func<targs>(args)`
    # by the lanes of the table, `acquire` after it for waits
    LANES = "lanes"
    REDUCE = "reduce"  # `func<reduction's types>(c, args...)` over the sources of `reduction`
    LET = "let"  # `text` is a declaration: a run-time value computed once where the op runs
    OPEN = "open"  # `if (guard) {`
    CLOSE = "close"  # `}`


@dataclass(frozen=True, slots=True)
class Stmt:
    """One printed statement of a mori-sdma program (what each kind means: `StmtKind`)."""

    kind: StmtKind
    text: str = ""
    func: str = ""
    targs: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    guard: str = ""
    rows: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    acquire: bool = False
    reduction: Reduction | None = None


__all__ = ["BUFFER0", "GROUP_SIGNALS", "LOCAL", "MOVES_DATA", "PER_CTA_SIGNALS", "RT_PEER",
           "RUNTIME_WAITS", "SPIN_WAITS", "WAITS", "Affine", "Reduction", "Spread", "Step",
           "StepKind", "Stmt", "StmtKind", "Trip", "buffer_peer"]
