"""`nccl-cft`: NCCL >= 2.31 device API, Compute Fabric Transport (CUDA, sm_100).

Sources: docs/reference/apis.md, NCCL CFT.  No CFT hardware is available to us, so
the cost model has no figures and the performance warnings stay silent here.
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
from ccogen.targets.libraries import NCCL_CFT
from ccogen.targets.target import Target, Toolchain

# "CFT source and destination shared memory pointers must be 16-byte aligned, and the
# byte count must be a multiple of 16" (the PTX is .b128); "the user-managed counter ...
# should be 256-byte aligned".
CFT_ALIGNMENT = Alignment(operand=16, length=16, counter=256)

CAPABILITIES = Capabilities(
    name="nccl-cft",
    vendor_api="NCCL >= 2.31 device API, Compute Fabric Transport (ncclCft)",
    language=Language.CUDA,
    runs_on="sm_100 with fabric logical endpoints (CUDA >= 13.3)",
    put_lowering="stage in shared memory, cft.put / cft.putCounted(coop, leId, leOffset, "
                 "[counterOffset,] smem, bytes), cft.submit, cft.flush",
    # The CFT team spans the fabric: peers are CFT-team ranks (ncclGetCftLeInfo) or
    # world ranks (ncclGetPeerLeInfo), on one node or across an NVLink fabric.
    team_kinds=frozenset({TeamKind.LSA, TeamKind.WORLD}),
    rank_space=RankSpace.WORLD,
    queue_kind=QueueKind.EMULATED,
    queue_cap=None,  # a queue is a signal-window column + ordering domain; nothing caps it
    issuer_scopes=((IssuerLevel.LANE, "ncclCoopThread"), (IssuerLevel.WARP, "ncclCoopWarp"),
                   (IssuerLevel.BLOCK, "ncclCoopCta")),
    thread_modes=False,
    get=Support.NATIVE,  # cft.get into shared memory, then a local store
    counted_writes=Support.NATIVE,  # cft.putCounted + cft.waitCounted
    counted_writes_lowering="cft.putCounted(coop, leId, dataOffset, counterOffset, smem, bytes); "
                            "receiver cft.waitCounted(coop, acquire, Generic, counter, bytes)",
    # the SM targets' plan: a batch's puts are issued at the commit, each staged and
    # submitted like a plain put (no CFT batching of its own)
    aggregate=Support.EMULATED,
    signal_per_copy=Support.EMULATED,
    signal_storage=SignalStorage.SIGNAL_WINDOW,
    signal_after_data=True,  # generated: data, ncclMemFence(release, Fabric->Generic), flag
    completion_sender_side=True,  # cft.flush: the sender's ops are done, not observed
    alignment=CFT_ALIGNMENT,
    counted_alignment=CFT_ALIGNMENT,
    window_align=256,  # codegen/layout.py: every heap offset is 256-byte aligned
    counter_stride=256,
    barriers=Barriers(lowering="ncclCftBarrierSession<ncclCoopCta>{coop, dc, blockIdx.x}"
                               ".sync(coop, acq_rel, Generic, Fabric)",
                      slots_per_block=1, requirement="reqs.cftBarrierCount"),
    cost=CostModel(source="none: no CFT (sm_100) hardware has been measured"),
    peer_reads=Support.NONE,
    peer_reads_lowering="none: CFT gives the SMs no load/store pointer into a peer's window "
                        "(a `cft.get` into shared memory and a local combine is not generated)",
    credits=Support.EMULATED,
    credits_lowering="the fenced flag update of a signalled put, without data: cft.flush, "
                     "ncclMemFence(release, Fabric -> Generic), a 16-byte cft.red on the slot",
    launch_rotation=Support.NONE,
    runtime_peers=Support.NONE,
    unsupported=(
        (Feature.RUNTIME_PEERS, "ccogen's CFT code generator plans each `cft.put` for a peer "
                                "known at instantiation: a peer read on the device is "
                                "generated for `nccl-lsa` and `nvshmem` only"),
        (Feature.LAUNCH_ROTATION, "ccogen's CFT code generator has no program per launch "
                                  "index yet: `launch % K` is generated for `nccl-lsa` and "
                                  "`nvshmem` only"),
        (Feature.PEER_READS, "CFT reaches a peer's window only through the fabric engine "
                             "(`cft.put`/`cft.get`): the SMs cannot load from it, and ccogen "
                             "does not stage a peer's source through `cft.get` for a `reduce`"),
    ),
)

TARGET = Target(
    name="nccl-cft",
    capabilities=CAPABILITIES,
    codegen="ccogen.codegen.backends.nccl_cft:NcclCft",
    # nvcc >= 13.3 for sm_100 against NCCL >= 2.31; no CFT hardware to run on here
    toolchain=Toolchain(builder="ccogen.toolchains.cuda:build_cft", library=NCCL_CFT),
)
