"""What benchmarks/b2b/b2b_graph.py times (no torch here: prebuild.py reads it too)."""

from __future__ import annotations

from pathlib import Path

CALLS = 100
HERE = Path(__file__).resolve().parent
# family -> variant -> protocol.  "old": the protocol before issue 30 (alltoall: host_sync,
# so the binding's launch-barrier kernel before each call; allreduce_oneshot: barriers on
# each side of its peer loads); "barrier": the library `alltoall` between issue 30 and its
# credit form (a leading barrier, every target; kept here as alltoall_barrier.cco);
# "credit": today's library `alltoall` (a credit per pair instead of the barrier, every
# target, LL puts at 2 ranks); "new": the rotating one (one launch, no barrier).
PROTOCOLS = {
    "alltoall": {"old": str(HERE / "alltoall_host_sync.cco"),
                 "barrier": str(HERE / "alltoall_barrier.cco"),
                 "credit": "alltoall.cco", "new": "alltoall_rotating.cco"},
    "allreduce": {"old": "allreduce_oneshot.cco", "new": "allreduce_oneshot_rotating.cco"},
}
A2A_SIZES = (8, 4096, 65536)
AR_SIZES = (8, 64, 512, 4096, 32768, 65536)
