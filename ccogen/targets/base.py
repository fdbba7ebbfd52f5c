"""The capability model: what one backend can lower, as frozen data.

Each target module (`mori_sdma`, `nccl_cft`, `nvshmem`, `nccl_lsa`) exports one
`Capabilities` instance; the checks (E011, E012, E040-E042, W100-W107), the code
generators and the simulator's cost model all read the facts from there, so a
backend fact lives in exactly one place.  Nothing here knows about passes or
templates: the helpers below only compute from the data.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import Enum

from ccogen.ir.instance import Issuer, IssuerLevel
from ccogen.ir.nodes import TeamKind

BUFFER_ALIGN = 16
"""What a local buffer's base must be aligned to, on every target: the generated kernels
move local buffers in 16-byte vectors (and CFT stages them in 16-byte units).  The checks
assume it (E040); the PyTorch binding and `ccogen run` refuse a buffer that breaks it
(a view such as `t[1:]`), naming the buffer and its offset."""


class Language(str, Enum):
    HIP = "hip"
    CUDA = "cuda"


class Support(str, Enum):
    """How a target provides a feature."""

    NATIVE = "native"  # one device API call does it
    EMULATED = "emulated"  # the generated code builds it from other calls
    NONE = "none"  # the target cannot lower it (E042)

    @property
    def available(self) -> bool:
        return self is not Support.NONE


class SignalStorage(str, Enum):
    """Where the `[sender, queue]` signal slots live."""

    QUEUE_SLOTS = "queue-slots"  # the engine's own per-(sender, queue) slots (MORI signalBuf)
    SIGNAL_WINDOW = "signal-window"  # 64-bit words in a runtime-allocated window, nranks x queues


class QueueKind(str, Enum):
    """What a `.cco` queue is on the target."""

    HARDWARE = "hardware"  # an engine queue with its own ring, doorbell and commit chain
    EMULATED = "emulated"  # an ordering domain plus a column of signal slots in generated code


class RankSpace(str, Enum):
    """Which rank numbering the target's device calls take for peers and signal sources."""

    LSA = "lsa"  # node-local (load/store or copy-engine reachable) ranks only
    WORLD = "world"  # any rank of the communicator


class Feature(str, Enum):
    """A protocol feature a target may lack; E042 names the targets that have it."""

    TEAM_LSA = "team lsa"
    TEAM_WORLD = "team world"
    COUNTED_WRITES = "counted writes"
    GET = "get"
    PEER_READS = "peer reads"  # `reduce` with a peer's source (`x@p` in `srcs`)
    CREDITS = "signal"  # the data-less `signal(peer, queue=)`
    LOCAL_BUFFERS = "local buffers"  # `buffer NAME: T[n]`: the caller's tensors as parameters
    COUNTER_RESET = "reset_count"  # setting a counted-write counter back to zero
    # a `reduce` whose sources' float types differ from `dst`'s (f32 accumulate, bf16 wire)
    CONVERTING_REDUCE = "converting reduce"
    LAUNCH_ROTATION = "launch % K"  # regions that depend on the launch's index (`launch % K`)
    RUNTIME_PEERS = "run-time peers"  # `put(load(...), ...)`: the peer read on the device


@dataclass(frozen=True, slots=True, kw_only=True)
class Alignment:
    """Byte alignment an op's operands need (1: none).

    `operand`: every `src`/`dst` address (window base + offset) a multiple of it;
    `length`: the byte count a multiple of it; `counter`: a counted-write counter's
    address a multiple of it.
    """

    operand: int = 1
    length: int = 1
    counter: int = 8

    @property
    def unconstrained(self) -> bool:
        return self.operand == 1 and self.length == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Barriers:
    """How `barrier()` is lowered and what resource it needs.

    `slots_per_block` is set where each barrier session needs its own slot,
    requested once per block (`requirement` names the host field, e.g.
    `reqs.cftBarrierCount = blocks`) and indexed by `blockIdx.x`: a block has that
    many slots, so at most that many concurrent barrier issuers (E041).  None: the
    lowering needs no per-issuer resource (`nvshmemx_barrier_all_block`) or the code
    generator may request one slot per issuer.
    """

    lowering: str
    slots_per_block: int | None = None
    requirement: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CostModel:
    """The figures performance warnings and the simulator rest on.

    Times in microseconds, bandwidth in GB/s (10**9 bytes per second).  A `None`
    figure is unknown or not applicable; a warning whose figure is `None` for the
    target stays silent rather than guess.  `source` says where the figures come from.
    """

    source: str
    bandwidth: tuple[tuple[int, float], ...] = ()  # (bytes per op, GB/s), ascending
    peak_gbps: float | None = None
    dispatch_us: float | None = None  # fixed per-op cost before any byte moves
    per_packet_us: float | None = None  # engine cost per packet (copy or signal)
    signal_us: float | None = None  # extra cost of one signal packet / flag update
    flag_latency_us: float | None = None  # a flag store seen by the peer
    launch_us: float | None = None
    small_op_bytes: int | None = None  # below this an op is latency-bound
    local_gather_gbps: float | None = None  # a local pack (`copy`) on the compute units
    shared_queue_slowdown: tuple[int, float] | None = None  # (issuers, x slower) on one queue
    doorbell_batch: tuple[int, int] | None = None  # sweet spot of aggregate ops per commit
    trigger_cycles_same_queue: tuple[tuple[int, int], ...] = ()  # (lanes, cycles) one queue
    trigger_cycles_spread: tuple[tuple[int, int], ...] = ()  # (lanes, cycles) one queue each
    sgpr_same_queue: int | None = None
    sgpr_independent: int | None = None
    quiet_idle_queue_reads: int | None = None  # uncached reads per idle queue in `quiet(peer)`

    def bandwidth_at(self, nbytes: int) -> float | None:
        """GB/s for one op of `nbytes`: the table's step at or below it (its first row below)."""
        if not self.bandwidth:
            return self.peak_gbps
        sizes = [size for size, _ in self.bandwidth]
        i = max(0, bisect.bisect_right(sizes, nbytes) - 1)
        return self.bandwidth[i][1]

    def op_time_us(self, nbytes: int) -> float | None:
        """Estimated engine time of one op of `nbytes`: at least one packet's cost."""
        gbps = self.bandwidth_at(nbytes)
        if gbps is None:
            return None
        time = nbytes / (gbps * 1e3)
        return max(time, self.per_packet_us or 0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """Everything the compiler may assume about one target.  See docs/checker.md."""

    name: str
    vendor_api: str
    language: Language
    runs_on: str
    put_lowering: str
    # ranks and teams
    team_kinds: frozenset[TeamKind]
    rank_space: RankSpace
    # queues and issuers
    queue_kind: QueueKind
    queue_cap: int | None  # most queues per peer; None: no cap (emulated queues)
    issuer_scopes: tuple[tuple[IssuerLevel, str], ...]  # scope -> the API's cooperative group
    thread_modes: bool  # `mode=` changes the lowering (MORI ccoSdmaThreadMode)
    # ops
    get: Support
    counted_writes: Support
    counted_writes_lowering: str
    aggregate: Support  # `aggregate=True` + `commit`
    signal_per_copy: Support
    # signals and completion
    signal_storage: SignalStorage
    signal_after_data: bool  # a signal on a queue lands after that queue's earlier data
    completion_sender_side: bool  # quiet/flush tell the sender, never that the peer observed
    # memory
    alignment: Alignment  # every put/get
    counted_alignment: Alignment  # counted puts (at least `alignment`)
    window_align: int  # least base alignment of a window in the heap (raised by `align=`)
    counter_stride: int  # bytes between counters in the heap
    barriers: Barriers
    cost: CostModel
    unsupported: tuple[tuple[Feature, str], ...] = field(default=())  # why a feature is missing
    # threads: an IR warp is one hardware warp (wave) of `warp_threads` threads; lanes
    # inside `warps w` run on that warp's first threads; a block has at most
    # `max_block_threads` (E005 with a target)
    warp_threads: int = 32
    max_block_threads: int = 1024

    def hw_thread(self, issuer: Issuer) -> int:
        """The hardware thread that runs a lane or leads a warp (0 for a block leader)."""
        if issuer.lane is None:
            return self.warp_threads * (issuer.warp or 0)
        if issuer.warp is not None:
            return self.warp_threads * issuer.warp + (issuer.lane - 32 * issuer.warp)
        return issuer.lane

    def threads_needed(self, issuer: Issuer) -> int:
        """Threads a block needs for `issuer` to exist: a whole warp for a warp issuer."""
        if issuer.level is IssuerLevel.WARP:
            return self.hw_thread(issuer) + self.warp_threads
        return self.hw_thread(issuer) + 1

    # language v2: loads from a peer's window in `reduce` (`x@p`); a local `reduce` runs on
    # the compute units everywhere.  `signal` (a credit without data)
    peer_reads: Support = Support.NATIVE
    peer_reads_lowering: str = ""
    credits: Support = Support.NATIVE
    credits_lowering: str = ""
    # 32-byte units of each queue's SDMA ring (amd-mori 1.2.4: a commit batch past it never
    # rings, E029; its reservations also deadlock independent lanes of two waves, E015);
    # None: the target has no SDMA rings
    sdma_ring_units: int | None = None
    # `buffer` declarations: kernel parameters the caller's tensors are passed in
    local_buffers: Support = Support.NATIVE
    counter_reset: Support = Support.NATIVE  # `reset_count` (where counted writes exist)
    # a `reduce` converting between f16, bf16 and f32 (sources widened, rounded once)
    converting_reduce: Support = Support.NATIVE
    converting_reduce_lowering: str = "compute units: each source widened to f32, rounded once"
    # `launch % K` (rotating landing slots): the kernels count their launches on the device
    launch_rotation: Support = Support.NATIVE
    # a `put` whose peer is read on the device (`put(load(table[i]), ...)`)
    runtime_peers: Support = Support.NATIVE

    def supports(self, feature: Feature) -> Support:
        """How this target provides `feature` (`Support.NONE`: E042)."""
        if feature is Feature.TEAM_LSA:
            return Support.NATIVE if TeamKind.LSA in self.team_kinds else Support.NONE
        if feature is Feature.TEAM_WORLD:
            return Support.NATIVE if TeamKind.WORLD in self.team_kinds else Support.NONE
        if feature is Feature.COUNTED_WRITES:
            return self.counted_writes
        if feature is Feature.PEER_READS:
            return self.peer_reads
        if feature is Feature.CREDITS:
            return self.credits
        if feature is Feature.LOCAL_BUFFERS:
            return self.local_buffers
        if feature is Feature.COUNTER_RESET:
            return self.counter_reset
        if feature is Feature.CONVERTING_REDUCE:
            return self.converting_reduce
        if feature is Feature.LAUNCH_ROTATION:
            return self.launch_rotation
        if feature is Feature.RUNTIME_PEERS:
            return self.runtime_peers
        return self.get

    def reason(self, feature: Feature) -> str | None:
        """Why `feature` is missing here (None when it is supported)."""
        return dict(self.unsupported).get(feature)

    @property
    def hardware_queues(self) -> bool:
        return self.queue_kind is QueueKind.HARDWARE

    def coop(self, level: IssuerLevel) -> str:
        """The API's cooperative-group spelling for an issuer scope."""
        return dict(self.issuer_scopes)[level]




def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment

__all__ = [
    "Alignment",
    "Barriers",
    "Capabilities",
    "CostModel",
    "Feature",
    "Language",
    "QueueKind",
    "RankSpace",
    "SignalStorage",
    "Support",
    "align_up",
]
