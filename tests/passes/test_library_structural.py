"""The protocol library against the structural, capability and performance rules.

Only the codes of these passes are looked at (the other checks have their own
tests).  Known findings are listed with the reason they are right.
"""

from __future__ import annotations

import pytest

from ccogen.driver import CheckOptions, check_file
from ccogen.passes.check_capabilities import CheckCapabilities
from ccogen.passes.check_queues import CheckQueues
from ccogen.passes.check_ranks import CheckRanks
from ccogen.passes.warn_aggregate_batch import WarnAggregateBatch
from ccogen.passes.warn_independent_mode import WarnIndependentMode
from ccogen.passes.warn_lanes_over_queues import WarnLanesOverQueues
from ccogen.passes.warn_shared_queue import WarnSharedQueue
from ccogen.passes.warn_signal_per_copy import WarnSignalPerCopy
from ccogen.passes.warn_small_copies import WarnSmallCopies
from ccogen.passes.warn_split_transfer import WarnSplitTransfer
from ccogen.passes.warn_unused_queues import WarnUnusedQueues
from ccogen.targets import TARGETS
from tests.helpers import REPO_ROOT, library_params

OURS = {code for check in (CheckRanks, CheckQueues, CheckCapabilities, WarnSmallCopies,
                           WarnSplitTransfer, WarnSharedQueue, WarnLanesOverQueues,
                           WarnSignalPerCopy, WarnAggregateBatch, WarnIndependentMode,
                           WarnUnusedQueues) for code in check.codes}
PROTOCOLS = sorted((REPO_ROOT / "protocols").glob("*.cco"))

# (protocol, target) -> codes; target None is plain `ccogen lint`
KNOWN: dict[tuple[str, str | None], set[str]] = {
    # one aggregate put per commit per peer: doorbells are per (peer, queue), so the
    # aggregation amortises nothing (W105 is right; reported to the protocol's owner)
    ("counted_broadcast", None): {"W105"},
    ("counted_broadcast", "mori-sdma"): {"W105"},  # counted writes: per-queue signals
    ("pingpong", "nccl-cft"): {"E040"},  # 8-byte messages: CFT moves multiples of 16
    # a `reduce` cannot load a peer's window through the SDMA engines
    ("allreduce_oneshot", "mori-sdma"): {"E042"},
    ("allreduce_twoshot", "mori-sdma"): {"E042"},
    # run-time counts travel as one i32 (4 bytes): CFT moves multiples of 16
    ("alltoallv", "nccl-cft"): {"E040"},
    ("moe_dispatch", "nccl-cft"): {"E040"},
    # nor through CFT's fabric engine (the SMs have no pointer into a peer's window)
    ("allreduce_oneshot", "nccl-cft"): {"E042"},
    ("alltoall_rotating", "mori-sdma"): {"E042"},  # local buffers (the capability table)
    # `launch % K` is generated on nccl-lsa and nvshmem only (the capability table, #32)
    ("alltoall_rotating", "nccl-cft"): {"E042"},
    ("allreduce_oneshot_rotating", "mori-sdma"): {"E042"},
    ("allreduce_oneshot_rotating", "nccl-cft"): {"E042"},
    ("allreduce_twoshot", "nccl-cft"): {"E042"},
    # `ccoSdma` has no signal-only op: the credits of these two cannot be sent
    ("reduce_scatter_ring", "mori-sdma"): {"E042"},
    ("broadcast_pipelined", "mori-sdma"): {"E042"},
    ("moe_dispatch", "mori-sdma"): {"E042"},
    ("moe_combine", "mori-sdma"): {"E042"},
    # its credit carries the 4-byte count: CFT's fabric engine moves multiples of 16 bytes
    ("moe_combine", "nccl-cft"): {"E040"},
    ("moe_dispatch_ll", "mori-sdma"): {"E042"},  # a run-time peer (and local buffers, signal)
    ("moe_dispatch_ll", "nccl-cft"): {"E042"},  # a run-time peer
    # local buffers, a converting `reduce` and `signal` (#32)
    ("allreduce_ring_bf16", "mori-sdma"): {"E042"},
    # the HIP kernels take no buffer parameters: its `send` and `counts` are local buffers
    # (compile refused them before lint did, #32)
    ("alltoallv", "mori-sdma"): {"E042"},
}


@pytest.mark.parametrize("target", [None, *TARGETS])
@pytest.mark.parametrize("path", PROTOCOLS, ids=[p.stem for p in PROTOCOLS])
def test_library_protocol(path: object, target: str | None) -> None:
    result = check_file(path, CheckOptions(target=target,  # type: ignore[arg-type]
                                           params=library_params(path)))  # type: ignore[arg-type]
    found = {d.code for d in result.diagnostics if d.code in OURS}
    assert found == KNOWN.get((path.stem, target), set())  # type: ignore[attr-defined]
