"""Instances: a protocol with the team size and every parameter bound, unrolled.

Every loop is unrolled and every expression evaluated: an `Instance` holds, per
rank, the op instances of all kernels in a canonical order, each knowing its
issuer, queue, concrete regions and source span.  Program order is explicit:
`OpInst.preds` lists the indices (into the same rank's `ops`) of the op
instances that must complete issuing before this one is issued.  Issuer blocks
fork and join: the first op of each issuer follows what came before the block,
and what follows the block follows the last op of every issuer in it.  The first
op of a kernel follows every op of the previous kernel on the same rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from ccogen.ir.dtype import DType
from ccogen.ir.nodes import Check, Mode, Op, Protocol, ReduceOp, SignalKind
from ccogen.ir.opkind import OpKind
from ccogen.source import Span


class IssuerLevel(str, Enum):
    BLOCK = "block"
    WARP = "warp"
    LANE = "lane"


@dataclass(frozen=True, slots=True)
class Issuer:
    """Who issues an op: block `block`, its warp `warp`, or its thread `lane`.

    `lane` is the thread index inside the block; `warp` is set for warp issuers
    and for lanes nested in a `warps` block (then `lane` is still the thread index).
    """

    block: int = 0
    warp: int | None = None
    lane: int | None = None

    @property
    def level(self) -> IssuerLevel:
        if self.lane is not None:
            return IssuerLevel.LANE
        if self.warp is not None:
            return IssuerLevel.WARP
        return IssuerLevel.BLOCK

    @property
    def warp_of(self) -> int | None:
        """The hardware warp that runs this issuer (None for a block leader)."""
        if self.lane is not None:
            return self.lane // 32
        return self.warp

    def __str__(self) -> str:
        if self.lane is not None:
            return f"block {self.block} lane {self.lane}"
        if self.warp is not None:
            return f"block {self.block} warp {self.warp}"
        return f"block {self.block}"


@dataclass(frozen=True, slots=True)
class RegionInst:
    """Concrete bytes `[start, stop)` of window (or buffer) `window` on rank `rank`.

    Always bytes, whatever the dtype: element `i` of a `bf16` window is bytes
    `[2i, 2i+2)` (`Instance.dtype` gives the window's element type).
    """

    window: str
    start: int
    stop: int
    rank: int
    # run-time bounds (language v2 §3): [start, stop) is then the footprint, every byte
    # the op may touch over the bounded range; `runtime` holds the exact bounds in
    # bytes (`ccogen.ir.runtime.Rt` or int), for the checks that reason over them
    runtime: tuple[object, object] | None = field(default=None, compare=False)

    @property
    def size(self) -> int:
        return self.stop - self.start

    def overlaps(self, other: RegionInst) -> bool:
        return (
            self.window == other.window
            and self.rank == other.rank
            and self.start < other.stop
            and other.start < self.stop
        )

    def __str__(self) -> str:
        return f"{self.window}@{self.rank}[{self.start}:{self.stop}]"


@dataclass(frozen=True, slots=True)
class LoadInst:
    """One executed `load(...)` (or, in `ensure`, an element read as a run-time bound):
    the bytes of the element it reads (`region.rank` is the rank whose memory holds
    them: a remote load names the peer's), where it is written (`span`) and, in a
    concrete instance, the value the instance was built for (`value`: what the load
    reads when it is ordered after the single write of the element, or the initial
    contents)."""

    region: RegionInst
    span: Span | None = field(compare=False)
    value: int | float | None = field(default=None, compare=False)
    init: bool = False  # `init(x@p)[i]` in `ensure`: the caller's input, read at no event

    def __str__(self) -> str:
        return f"{self.region.window}@{self.region.rank}[{self.element}]"

    @property
    def element(self) -> int:
        return self.region.start // max(1, self.region.size)


@dataclass(frozen=True, slots=True)
class RtPeer:
    """A `put` whose peer is a run-time value (language reference §14, "Run-time
    peers"): instantiated as one op instance per candidate peer the `require` bound allows
    (its `OpInst.peer`), each moving `dst`/`src` only when the value is that candidate
    (its run-time length is `len * (value == candidate)`).  `value` is the peer (an `Rt`,
    or the int a concrete instance read), `first` marks the candidate that code generation
    emits as the one op to the run-time peer, `dst`/`src` the regions it moves then."""

    value: object
    first: bool
    dst: RegionInst | None
    src: RegionInst | None


@dataclass(frozen=True, slots=True)
class OpInst:
    """One executed op: `kind` says which (`OpKind.PUT`, ...; ask its `traits`).

    `peer` is the remote rank of put/get/commit/quiet (None for `quiet()` of all
    peers), the source rank of `wait_signal`, and None otherwise.  `queue` is the
    concrete queue (auto already assigned), None where the op has none (`quiet(p)`
    of every queue, copy, barrier...).  `dst`/`src` carry the rank whose memory
    they name.  `expected` is the hand-written value, if any.  `group` numbers
    posting groups: op instances of one call site issued together by lanes of one
    warp share it; every other op instance has a group of its own.
    """

    index: int
    rank: int
    kernel: int
    kind: OpKind
    issuer: Issuer
    preds: tuple[int, ...]
    op: Op = field(compare=False, repr=False)
    span: Span | None = field(compare=False, repr=False)
    group: int = 0
    peer: int | None = None
    queue: int | None = None
    dst: RegionInst | None = None
    src: RegionInst | None = None
    signal: SignalKind = SignalKind.NONE
    aggregate: bool = False
    signal_per_copy: bool = False
    mode: Mode = Mode.AUTO
    counter: str | None = None
    expected: int | None = None
    lanes_in_group: int = 1
    epoch: int = 0  # the launch it belongs to in a back-to-back instance (`launches`)
    srcs: tuple[RegionInst, ...] = ()
    reduce_op: ReduceOp | None = None
    weights: tuple[int | float, ...] = ()
    dtype: DType | None = None
    # a run-time `expected=` of `wait_count` (an `ccogen.ir.runtime.Rt`); `expected` is
    # then None
    expected_rt: object = field(default=None, compare=False)
    # run-time weights of a `reduce` (`Rt`s and numbers; `weights` then holds 1.0 in
    # their place), for code generation
    weights_rt: tuple[object, ...] = field(default=(), compare=False)
    # the loads its issuer runs after its predecessors and before it (their read event
    # is this op's issue: nothing but program order leads to an issue)
    loads: tuple[LoadInst, ...] = field(default=(), compare=False)
    # in a loop checked on three iterations (docs/checker.md), the second stands for
    # `repeat` iterations, the k-th `k * stride` bytes further (dst, src): the rules that
    # count ops (W100, W101) count them all (`expanded`)
    repeat: int = field(default=1, compare=False)
    stride: tuple[int, int] = field(default=(0, 0), compare=False)
    # in such a loop: (the loop's execution on this rank, iteration, trips) -- the
    # execution is (id of the `For`, kernel, iterations of the enclosing loops): code
    # generation folds the three iterations into one device loop (codegen.loops)
    trip: tuple[tuple[object, ...], int, int] | None = field(default=None, compare=False)
    # a candidate of a `put` to a run-time peer (`RtPeer`); None for a static peer
    rt_peer: RtPeer | None = field(default=None, compare=False)

    def expanded(self) -> tuple[OpInst, ...]:
        """This op, and the iterations it stands for (`repeat`), regions shifted."""
        if self.repeat == 1:
            return (self,)
        ds, ss = self.stride
        return tuple(replace(self, dst=_shift(self.dst, k * ds), src=_shift(self.src, k * ss),
                             repeat=1) for k in range(self.repeat))


def _shift(r: RegionInst | None, by: int) -> RegionInst | None:
    return r if r is None or by == 0 else replace(r, start=r.start + by, stop=r.stop + by)


@dataclass(frozen=True, slots=True)
class LoopNote:
    """How one `for` loop was instantiated, for `ccogen lint --verbose`: on three of its
    `trips` iterations (`reason` empty: docs/checker.md, "Loops checked on three
    iterations"), or unrolled, and why."""

    span: Span | None
    trips: int
    reason: str = ""

    @property
    def sampled(self) -> bool:
        return not self.reason


@dataclass(frozen=True, slots=True)
class KernelInst:
    """One kernel: `blocks` CTAs of `threads` threads.

    `logical_blocks` counts the blocks the protocol names: the longest `blocks` range
    it runs (1 without one).  With `blocks=B` and no `blocks` statement the kernel's
    top level is one block-collective program that all B CTAs run together (a CTA
    group): a `barrier()` there is met once per rank, not once per CTA.
    """

    name: str
    index: int
    threads: int
    blocks: int
    span: Span | None = field(compare=False, repr=False)
    logical_blocks: int = 1


@dataclass(frozen=True, slots=True)
class ReductionInst:
    """`sum/max/min` of `terms` (in order; `init[i]`: term i is `init(...)`),
    weighted by `weights` (empty: unweighted), computed in `dtype`."""

    op: ReduceOp
    terms: tuple[RegionInst, ...]
    init: tuple[bool, ...]
    weights: tuple[int | float, ...]
    dtype: DType


@dataclass(frozen=True, slots=True)
class CheckInst:
    """One evaluated postcondition on rank `rank`: `left op right`.

    Region against region compares bytes; region against a reduction
    (`right` None, `reduction` set) compares values of the left's dtype: bit-exact
    for integers, within a tolerance for floats (`ccogen.ir.values`).
    """

    rank: int
    op: str
    left: RegionInst
    left_init: bool
    right: RegionInst | None
    right_init: bool
    check: Check = field(compare=False, repr=False)
    span: Span | None = field(compare=False, repr=False)
    reduction: ReductionInst | None = None
    # run-time bounds or weights in a symbolic instance: the regions are footprints (what
    # `ensure` reads, for the race checks); the values are the simulator's to compare
    runtime: bool = False
    # the elements it reads as run-time values (`got[p]` in a bound): its caller's reads
    loads: tuple[LoadInst, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class Instance:
    """The protocol bound to `nranks` and `params`, unrolled per rank.

    `params` holds the integer parameters (`int`, `bytes`), `dtype_params` the
    `dtype` ones.  `window_sizes` are the symmetric windows in bytes,
    `buffer_sizes` the local buffers in bytes (handed in at each launch, not in
    the symmetric heap), `dtypes` the element type of every typed window and
    buffer (an untyped window is u8 and may be absent).
    """

    protocol: Protocol = field(repr=False)
    nranks: int
    params: tuple[tuple[str, int], ...]
    queues: int
    window_sizes: tuple[tuple[str, int], ...]
    kernels: tuple[KernelInst, ...]
    ranks: tuple[tuple[OpInst, ...], ...] = field(repr=False)
    checks: tuple[CheckInst, ...] = field(repr=False)
    launches: int = 1  # >1: every rank's ops of that many back-to-back launches, in order

    def launch_len(self, rank: int) -> int:
        """How many op instances one launch has on `rank`."""
        return len(self.ranks[rank]) // self.launches
    dtypes: tuple[tuple[str, DType], ...] = ()
    buffer_sizes: tuple[tuple[str, int], ...] = ()
    dtype_params: tuple[tuple[str, DType], ...] = ()
    # run-time values: "symbolic" (footprints, for the checker), "concrete" (one drawn
    # contents, for the simulator) or "" (none); `unchecked` counts `ensure` lines with
    # run-time bounds that a symbolic instance leaves to the simulator
    runtime: str = ""
    unchecked: int = 0
    # (line, why) of every `ensure` line the checker leaves to the simulator (N001)
    unproved: tuple[tuple[Span | None, str], ...] = field(default=(), compare=False)
    contents_label: str = ""
    # how the loops of at least `sampling.MIN_TRIPS` iterations were instantiated (a
    # checker's instance, `instantiate(sample=True)`): on three iterations, or unrolled
    loops: tuple[LoopNote, ...] = field(default=(), compare=False, repr=False)
    # `launch % K` (language reference section 8): this instance is of launch `launch`;
    # launches `e` and `e + period` have the same regions; `rotation` holds the instances
    # of the other launches of one period (same ops, other regions), see `at_launch`
    launch: int = 0
    period: int = 1
    rotation: tuple[Instance, ...] = field(default=(), compare=False, repr=False)

    def at_launch(self, launch: int) -> Instance:
        """The single-launch instance of launch `launch` (itself without a rotation)."""
        if self.period == 1 or (launch - self.launch) % self.period == 0:
            return self
        for other in self.rotation:
            if (launch - other.launch) % self.period == 0:
                return other
        raise KeyError(launch)

    def checks_at(self, launch: int) -> tuple[CheckInst, ...]:
        """The postconditions of launch `launch` (their regions may rotate)."""
        return self.at_launch(launch).checks

    @property
    def param_dict(self) -> dict[str, int]:
        return dict(self.params)

    def window_size(self, name: str) -> int:
        """Bytes of window (or local buffer) `name` on each rank."""
        for n, size in self.window_sizes:
            if n == name:
                return size
        return dict(self.buffer_sizes)[name]

    def dtype(self, name: str) -> DType:
        """The element type of window or buffer `name` (u8 for an untyped window)."""
        for n, d in self.dtypes:
            if n == name:
                return d
        return DType.U8

    def is_buffer(self, name: str) -> bool:
        """Whether `name` is a local, non-symmetric `buffer` (not a window)."""
        return any(n == name for n, _ in self.buffer_sizes)

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ranks)

    def label(self) -> str:
        """`nranks=4, block=1048576, T=bf16` — how findings name the instance."""
        parts = [f"nranks={self.nranks}"] + [f"{k}={v}" for k, v in self.params]
        parts += [f"{k}={v}" for k, v in self.dtype_params]
        return ", ".join(parts)
