"""`nccl-lsa`: NCCL >= 2.28 device API over load/store accessible peers (CUDA, NVLink).

Sources: docs/reference/apis.md, NCCL LSA (verified on 2 x H200, NCCL 2.28.9)
and the H200 NVLink ceilings measured on the lent machines.  Puts are vectorised SM
copies into `ncclGetLsaPointer(win, off, peer)`; signals are release atomics into a
runtime signal window; counted writes are emulated by an atomic add of the byte
count after the data.
"""

from __future__ import annotations

from ccogen.ir.instance import IssuerLevel
from ccogen.ir.nodes import TeamKind
from ccogen.targets.base import (
    Alignment,
    Barriers,
    Capabilities,
    Feature,
    Language,
    QueueKind,
    RankSpace,
    SignalStorage,
    Support,
)
from ccogen.targets.hardware import H200_NVLINK
from ccogen.targets.libraries import NCCL
from ccogen.targets.target import EngineSpec, Target, Toolchain

CAPABILITIES = Capabilities(
    name="nccl-lsa",
    vendor_api="NCCL >= 2.28 device API, load/store accessible peers (LSA)",
    language=Language.CUDA,
    runs_on="H200 (sm_90) and later over NVLink, one node",
    put_lowering="vectorised SM copy into ncclGetLsaPointer(win, off, lsaPeer); "
                 "release atomic add on the peer's signal slot",
    team_kinds=frozenset({TeamKind.LSA}),
    rank_space=RankSpace.LSA,  # ncclGetLsaPointer takes an LSA rank, 0..dc.lsaSize-1
    queue_kind=QueueKind.EMULATED,
    queue_cap=None,  # a queue is a signal-window column + ordering domain; nothing caps it
    issuer_scopes=((IssuerLevel.LANE, "ncclCoopThread"), (IssuerLevel.WARP, "ncclCoopWarp"),
                   (IssuerLevel.BLOCK, "ncclCoopCta")),
    thread_modes=False,
    get=Support.NATIVE,  # SM loads from ncclGetLsaPointer
    counted_writes=Support.EMULATED,
    counted_writes_lowering="SM copy, then a release atomicAdd_system of the byte count on "
                            "the peer's counter",
    aggregate=Support.EMULATED,  # the batch's copies are made at the commit (codegen/plan.py)
    signal_per_copy=Support.EMULATED,
    signal_storage=SignalStorage.SIGNAL_WINDOW,
    signal_after_data=True,  # release ordering at system scope after the copy
    completion_sender_side=True,  # quiet = a fence after the copy
    alignment=Alignment(),  # the copy loop handles any alignment (vector body, scalar edges)
    counted_alignment=Alignment(operand=1, length=1, counter=256),
    window_align=256,  # codegen/layout.py: every heap offset is 256-byte aligned
    counter_stride=256,
    barriers=Barriers(lowering="ncclLsaBarrierSession<ncclCoopCta>{coop, dc, ncclTeamTagLsa(), "
                               "index}.sync(coop, acq_rel)"),
    cost=H200_NVLINK,
    peer_reads=Support.NATIVE,
    peer_reads_lowering="loads through ncclGetLsaPointer (LSA load/store reach)",
    credits=Support.NATIVE,
    credits_lowering="a release red/store on the peer's signal slot",
    unsupported=(
        (Feature.TEAM_WORLD, "LSA peers are the load/store accessible GPUs of one node; other "
                             "nodes need GIN, not a v1 target"),
    ),
)

TARGET = Target(
    name="nccl-lsa",
    capabilities=CAPABILITIES,
    codegen="ccogen.codegen.backends.nccl_lsa:NcclLsa",
    # the device API is header-only: one plain cubin; NCCL's reduce/copy helpers are
    # extended lambdas
    toolchain=Toolchain(
        builder="ccogen.toolchains.cuda:build_runtime_cubin", library=NCCL,
        flags_when=((r"\bncclLsa(?:ReduceSum|Copy|ReduceSumCopy)\b", "--extended-lambda"),)),
    engine=EngineSpec(shim="nccl_host.cu",
                      kernel_params=frozenset({"devcomm", "window", "heap", "epoch", "debug"}),
                      devcomm=True),
)
