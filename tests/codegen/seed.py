"""Shared helpers of the seed-target tests (mori-sdma, nccl-cft, nvshmem at sm_100).

A protocol is *expressible* on a target when `ccogen compile` accepts it there: the
checker (with the target's capability table) finds no error and the backend lowers it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ccogen.compiler import Compiled, compile_protocol
from ccogen.errors import DiagnosticError
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted((ROOT / "protocols").glob("*.cco"))


@dataclass(frozen=True)
class Variant:
    """A target and the options one of its golden directories uses."""

    name: str  # golden directory
    target: str
    arch: str | None = None

    def __str__(self) -> str:
        return self.name


MORI = Variant("mori-sdma", "mori-sdma")
CFT = Variant("nccl-cft", "nccl-cft")
NVSHMEM_SM100 = Variant("nvshmem-sm100", "nvshmem", "sm_100")
VARIANTS = (MORI, CFT, NVSHMEM_SM100)

# What each target cannot express among the library protocols, and the rule that says so.
# Language v2: `mori-sdma` has no `signal` and cannot load a peer's window; `nccl-cft`
# cannot load a peer's window (docs/targets.md).
# run-time sizes (language v2 §3): generated on nccl-lsa and nvshmem only
RT = {"alltoallv": "E042", "moe_dispatch": "E042", "moe_combine": "E042"}
REFUSED = {
    MORI: {"allreduce_oneshot": "E042", "allreduce_twoshot": "E042",
           "broadcast_pipelined": "E042", "reduce_scatter_ring": "E042", **RT,
           # `launch % K` is generated for nccl-lsa and nvshmem only
           "alltoall_rotating": "E042", "allreduce_oneshot_rotating": "E042",
           # local buffers, converting reduces and credits (#32)
           "allreduce_ring_bf16": "E042",
           "moe_dispatch_ll": "E042"},  # a run-time peer (and local buffers, credits)
    # nccl-cft generates run-time values, but the count exchanges put 4 bytes (E040:
    # moe_combine's count credit too, before its loads of a peer's routing table, E042)
    CFT: {"pingpong": "E040", "allreduce_oneshot": "E042", "allreduce_twoshot": "E042",
          "alltoallv": "E040", "moe_dispatch": "E040", "moe_combine": "E040",
          "alltoall_rotating": "E042", "allreduce_oneshot_rotating": "E042",
          "moe_dispatch_ll": "E042"},  # a run-time peer: generated for nccl-lsa, nvshmem
    # threads=512 with puts: NVSHMEM's put needs more registers than 512 threads leave
    NVSHMEM_SM100: {"allreduce_twoshot": "E042", "reduce_scatter_ring": "E042",
                    "moe_dispatch": "E042", "moe_combine": "E042"},
}


@functools.cache
def compiled(stem: str, variant: Variant, nranks: int = 2, debug: bool = False) -> Compiled:
    """`ccogen compile` of protocols/<stem>.cco for the variant (DiagnosticError if refused)."""
    path = ROOT / "protocols" / f"{stem}.cco"
    return compile_protocol(load_ir(path), variant.target, source=f"protocols/{stem}.cco",
                            ranks=nranks, debug=debug, arch=variant.arch,
                            params=library_params(path) or None)


def refused_codes(stem: str, variant: Variant, nranks: int = 2) -> list[str]:
    try:
        compiled(stem, variant, nranks)
    except DiagnosticError as exc:
        return sorted({d.code for d in exc.diagnostics if d.is_error})
    return []


def expressible(variant: Variant) -> list[str]:
    return [p.stem for p in PROTOCOLS if p.stem not in REFUSED[variant]]


__all__ = ["CFT", "MORI", "NVSHMEM_SM100", "PROTOCOLS", "REFUSED", "ROOT", "VARIANTS", "Variant",
           "compiled", "expressible", "refused_codes"]
