"""`mori-sdma`: AMD MORI CCO `ccoSdma`, the SDMA copy engines driven from a kernel (HIP).

Sources: docs/reference/apis.md, MORI (every figure below, measured on MI355X / gfx950,
two ranks over intra-node xGMI: "shape, not a spec"; API as of `ROCm/mori` 624002c8,
wheel 1.2.4).
"""

from __future__ import annotations

from ccogen.ir.instance import IssuerLevel
from ccogen.ir.nodes import TeamKind
from ccogen.targets.base import (
    Alignment,
    Barriers,
    Capabilities,
    CostModel,
    Feature,
    Language,
    QueueKind,
    RankSpace,
    SignalStorage,
    Support,
)
from ccogen.targets.target import Target, Toolchain

KiB, MiB = 1 << 10, 1 << 20

COST = CostModel(
    source="MI355X, MORI ccoSdma seed",  # gfx950, two ranks over intra-node xGMI
    # "Bandwidth is a function of bytes per op and nothing else"
    bandwidth=((64 * KiB, 17.0), (128 * KiB, 26.0), (256 * KiB, 36.0), (512 * KiB, 46.0),
               (1 * MiB, 52.0), (2 * MiB, 56.0), (4 * MiB, 59.0), (8 * MiB, 60.0)),
    peak_gbps=60.0,
    dispatch_us=6.0,  # "below ~256 KB the fixed ~6 µs dispatch cost dominates"
    per_packet_us=2.0,  # "about 2 µs per packet, near enough the same for 64 B as for 4 KB"
    signal_us=(248.0 - 132.0) / 64,  # 64 signalled copies 248 µs instead of 132 µs
    small_op_bytes=256 * KiB,
    local_gather_gbps=7000.0,  # "a local gather runs at ~7 TB/s"
    shared_queue_slowdown=(8, 3.2),  # 8 warps on one queue ~3.2x 8 warps on 8 queues
    doorbell_batch=(8, 16),  # Aggregate: "sweet spot around N = 8-16"
    trigger_cycles_same_queue=((1, 2244), (2, 2508), (4, 2624), (8, 2652), (16, 2796),
                               (32, 2916), (64, 3220)),
    trigger_cycles_spread=((1, 2330), (2, 3009), (4, 3379), (8, 3377)),
    sgpr_same_queue=5,
    sgpr_independent=14,
    quiet_idle_queue_reads=1,  # quiet(peer): "each idle queue still costs one uncached read"
)

# The SDMA ring of one (peer, queue): CCO_SDMA_QUEUE_SIZE bytes in 32-byte units, one per
# packet (a COPY, or an ATOMIC for each signal): mori/cco/cco.hpp (amd-mori 1.2.4).
SDMA_QUEUE_BYTES = 256 * 1024
SDMA_UNIT_BYTES = 32
SDMA_RING_UNITS = SDMA_QUEUE_BYTES // SDMA_UNIT_BYTES

CAPABILITIES = Capabilities(
    name="mori-sdma",
    vendor_api="MORI CCO ccoSdma (SDMA copy engines)",
    language=Language.HIP,
    runs_on="AMD MI300X (gfx942) / MI355X (gfx950), one node",
    put_lowering="sdma.put<Coop, localSignal, remoteSignal, optFlags, mode>"
                 "(peer, dstWin, dstOff, srcWin, srcOff, bytes, q)",
    team_kinds=frozenset({TeamKind.LSA}),
    rank_space=RankSpace.LSA,  # "All indices are LSA ranks (devComm.lsaRank), never world ranks"
    queue_kind=QueueKind.HARDWARE,
    queue_cap=8,  # reqs.sdmaQueueCount: "hardware cap 8 (clamped with a warning above that)"
    issuer_scopes=((IssuerLevel.LANE, "ccoCoopThread"), (IssuerLevel.WARP, "ccoCoopWarp"),
                   (IssuerLevel.BLOCK, "ccoCoopBlock")),
    thread_modes=True,  # ccoSdmaThreadSameQueue / ccoSdmaThreadIndependent, thread scope only
    sdma_ring_units=SDMA_RING_UNITS,
    get=Support.NATIVE,
    # ccoSdma has no counted writes; a counted put is a `remoteSignal` put, and a
    # `wait_count` waits for every (sender, queue) slot that the epoch's counted puts
    # signal, each for its static number of puts (codegen/backends/mori_sdma.py)
    counted_writes=Support.EMULATED,
    counted_writes_lowering="sdma.put<Coop, false, true, ...>(...) per counted put; "
                            "wait_count: sdma.waitSignal(sender, q, puts) per (sender, queue)",
    aggregate=Support.NATIVE,  # ccoSdmaOptFlagsAggregate + commit<Coop>(peer, q)
    signal_per_copy=Support.NATIVE,  # ccoSdmaOptFlagsSignalPerCopy
    signal_storage=SignalStorage.QUEUE_SLOTS,  # signalBuf[senderLsaRank * n + q]
    signal_after_data=True,  # "the ATOMIC follows the COPY on the same queue over the same link"
    completion_sender_side=True,  # quiet/quietQueue/localSignal: "the engine consumed the command"
    alignment=Alignment(),
    counted_alignment=Alignment(operand=1, length=1, counter=256),
    window_align=256,  # codegen/layout.py: every heap offset is 256-byte aligned
    counter_stride=256,
    barriers=Barriers(lowering="ccoLsaBarrierSession<Coop>(coop, dc, ccoTeamLsa(dc), "
                               "dc->lsaBarrier, index).sync(coop)"),
    cost=COST,
    # gfx942/gfx950 run wave64 (mori/cco/cco.hpp sets CCO_WAVE32 only for gfx1250): IR warp
    # w is wave w, threads 64w..64w+63; a workgroup has at most 1024 threads
    warp_threads=64,
    max_block_threads=1024,
    peer_reads=Support.NONE,
    peer_reads_lowering="none: the SDMA engines copy, they cannot combine; the compute "
                        "units reach only local windows through ccoSdma",
    credits=Support.NONE,
    credits_lowering="none: `ccoSdma` has no signal-only op (only `put` with a remote signal, "
                     "whose zero-byte form the API does not document)",
    local_buffers=Support.NONE,
    counter_reset=Support.NONE,
    converting_reduce=Support.NONE,
    launch_rotation=Support.NONE,
    runtime_peers=Support.NONE,
    converting_reduce_lowering="none: the HIP kernels' `reduce` combines one element type",
    unsupported=(
        (Feature.RUNTIME_PEERS, "each `ccoSdma` put is lowered onto the SDMA queue of a peer "
                                "known at instantiation (its ring, doorbell and signal "
                                "slots): a peer read on the device is generated for "
                                "`nccl-lsa` and `nvshmem` only"),
        (Feature.TEAM_WORLD, "the SDMA copy engines reach only peers on the same node "
                             "(cross-node traffic goes through `ccoGda`, not a v1 target)"),
        (Feature.CREDITS, "`ccoSdma` has no signal-only operation: a signal travels only with "
                          "a `put` (`remoteSignal`), and a zero-byte put is not documented to "
                          "signal"),
        (Feature.COUNTER_RESET, "a counter is its (sender, queue) signal slots here, which "
                                "are never reset: the generated waits already count per "
                                "epoch"),
        (Feature.LOCAL_BUFFERS, "the HIP kernels take no buffer parameters yet: the SDMA "
                                "engines copy between registered windows, and ccogen does not "
                                "register the caller's tensors"),
        (Feature.PEER_READS, "the SDMA engines only copy, and `ccoSdma` gives the compute "
                             "units no pointer into a peer's window: a `reduce` can only read "
                             "local memory"),
        (Feature.LAUNCH_ROTATION, "ccogen's HIP code generator has no program per launch "
                                  "index yet: `launch % K` is generated for `nccl-lsa` and "
                                  "`nvshmem` only"),
        (Feature.CONVERTING_REDUCE, "the HIP kernels' `reduce` is generated for one element "
                                    "type (its `dst`'s): ccogen has no converting variant for "
                                    "the compute units of this target yet"),
    ),
)

TARGET = Target(
    name="mori-sdma",
    capabilities=CAPABILITIES,
    codegen="ccogen.codegen.backends.mori_sdma:MoriSdma",
    # clang-22 and the MORI headers (ccogen.toolchains.locate); no AMD GPU to run on here
    toolchain=Toolchain(builder="ccogen.toolchains.hip:build_hip"),
)
