"""`nvshmem`: NVSHMEM >= 3.4 (CUDA), one node or many.

Sources: docs/reference/apis.md, NVSHMEM.
Counted writes are emulated (put-with-signal `NVSHMEM_SIGNAL_ADD` of the byte count,
verified on 2 x H200); the native `nvshmemx_putmem_signal_counted_nbi_block` needs
sm_100 + CFT + NVSHMEM built with `NVSHMEM_CFT_HANDLES_SUPPORT` and keeps CFT's
alignment rules, which the emulation keeps too so that one protocol serves both.
"""

from __future__ import annotations

from ccogen.ir.instance import IssuerLevel
from ccogen.ir.nodes import TeamKind
from ccogen.targets.base import (
    Alignment,
    Barriers,
    Capabilities,
    Language,
    QueueKind,
    RankSpace,
    SignalStorage,
    Support,
)
from ccogen.targets.hardware import H200_NVLINK
from ccogen.targets.libraries import NVSHMEM
from ccogen.targets.target import EngineSpec, HeapRule, Target, Toolchain

CAPABILITIES = Capabilities(
    name="nvshmem",
    vendor_api="NVSHMEM >= 3.4",
    language=Language.CUDA,
    runs_on="H200 (sm_90) and later, one node or many",
    put_lowering="nvshmemx_putmem[_signal]_nbi_{thread,warp,block}(dst, src, bytes, "
                 "[sig, 1, NVSHMEM_SIGNAL_ADD,] pe)",
    team_kinds=frozenset({TeamKind.LSA, TeamKind.WORLD}),  # NVSHMEMX_TEAM_NODE / TEAM_WORLD
    rank_space=RankSpace.WORLD,  # PEs
    queue_kind=QueueKind.EMULATED,
    queue_cap=None,  # a queue is a signal-window column + ordering domain; nothing caps it
    issuer_scopes=((IssuerLevel.LANE, ""), (IssuerLevel.WARP, "_warp"),
                   (IssuerLevel.BLOCK, "_block")),
    thread_modes=False,
    get=Support.NATIVE,  # nvshmemx_getmem_nbi_*
    counted_writes=Support.EMULATED,
    counted_writes_lowering="sm_90: nvshmemx_putmem_signal_nbi_*(dst, src, bytes, counter, "
                            "bytes, NVSHMEM_SIGNAL_ADD, pe) + nvshmem_signal_wait_until(GE); "
                            "sm_100 + CFT: nvshmemx_putmem_signal_counted_nbi_block (native)",
    aggregate=Support.EMULATED,  # the batch's puts are issued at the commit (codegen/plan.py)
    signal_per_copy=Support.EMULATED,
    signal_storage=SignalStorage.SIGNAL_WINDOW,
    signal_after_data=True,  # put-with-signal: data, __threadfence_system, then the signal op
    completion_sender_side=True,  # nvshmem_quiet
    alignment=Alignment(),
    # the real counted API's validation: dest/source 16-B aligned, bytes % 16 == 0, the
    # signal's heap offset 256-B aligned; the emulation keeps them (docs/reference/apis.md)
    counted_alignment=Alignment(operand=16, length=16, counter=256),
    window_align=256,  # codegen/layout.py: every heap offset is 256-byte aligned
    counter_stride=256,
    barriers=Barriers(lowering="nvshmemx_barrier_all_block() (cooperative launch)"),
    cost=H200_NVLINK,
    peer_reads=Support.NATIVE,
    peer_reads_lowering="loads through nvshmem_ptr (NVLink peers)",
    credits=Support.NATIVE,
    credits_lowering="nvshmemx_signal_op(slot, 1, NVSHMEM_SIGNAL_ADD, peer)",
)

TARGET = Target(
    name="nvshmem",
    capabilities=CAPABILITIES,
    codegen="ccogen.codegen.backends.nvshmem:Nvshmem",
    # relocatable device code linked with libnvshmem_device.a; at sm_100 a CUDA >= 13.3
    # nvcc and, where the headers declare it, the native counted-write API
    toolchain=Toolchain(builder="ccogen.toolchains.cuda:build_nvshmem", library=NVSHMEM),
    engine=EngineSpec(shim="nvshmem_host.cu", kernel_params=frozenset({"heap", "epoch", "debug"}),
                      registers_modules=True, ranks_share_gpu=True,
                      # NVSHMEM reserves 1 GiB by default; a larger heap must be asked for
                      heap=HeapRule(env="NVSHMEM_SYMMETRIC_SIZE", above=900 << 20,
                                    headroom=256 << 20)),
)
