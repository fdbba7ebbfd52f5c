"""`nccl-lsa`: NCCL ≥ 2.28 device API, load/store access to LSA peers.

Puts and gets are vectorised copies through `ncclGetLsaPointer`; signals are release
adds at system scope on the heap's signal slots; waits acquire-spin with `>=`;
`barrier()` is `ncclLsaBarrierSession` on slot 0 (`reqs.lsaBarrierCount = 1`, never
multimem, never `barrierCount`, which needs GIN).  Counted writes are emulated: an add
of the byte count on the peer's counter after the data.
"""

from __future__ import annotations

from ccogen.codegen.backends.sm import SmBackend
from ccogen.codegen.model import ProtocolModel


class NcclLsa(SmBackend):
    name = "nccl-lsa"
    template = "nccl_lsa/kernels.cu.j2"
    kernel_params = ("devcomm", "window", "epoch", "debug")
    split_ctas = True
    ll_path = True
    add_primitives = True

    def requirements(self, model: ProtocolModel) -> dict[str, object]:
        barriers = any(k.rank_syncs for k in model.kernels)
        return {"nccl": {"lsa_barrier_count": 1 if barriers else 0}}
