"""`nvshmem`: NVSHMEM ≥ 3.4 device API on one symmetric heap.

Transfers are `nvshmemx_putmem[_signal]_nbi_{block,warp}` / `nvshmem_putmem[_signal]_nbi`
by issuer scope (block-collective calls split over the CTA group for large copies,
each CTA completing its slice with `nvshmem_quiet`), gets `..._getmem_nbi_...`, signals
`nvshmemx_signal_op(..., NVSHMEM_SIGNAL_ADD, pe)`, waits acquire-spin with `>=` on the
local slot, `barrier()` is `nvshmemx_barrier_all_block`.  Counted writes are emulated
on sm_90 by adding the byte count to the peer's counter after the data (the native
counted path belongs to the sm_100 target work).  A copy followed by one signal to the
same peer, on a one-CTA group, is fused into `putmem_signal_nbi`.
"""

from __future__ import annotations

from dataclasses import replace

from ccogen.codegen.backends.sm import SmBackend
from ccogen.codegen.model import Branch, Segment, Step


def fuse(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """[copy to peer P, sync, one signal to P] -> [putsig]."""
    out: list[Step] = []
    i = 0
    while i < len(steps):
        window = steps[i : i + 4]
        if (len(window) >= 3 and window[0].kind == "copy" and window[0].dst_peer >= 0
                and window[1].kind == "sync" and window[2].kind == "signal"
                and window[2].peer == window[0].dst_peer
                and (len(window) == 3 or window[3].kind != "signal")):
            c, s = window[0], window[2]
            out.append(replace(c, kind="putsig", off=s.off, value=s.value))
            i += 3
            continue
        out.append(steps[i])
        i += 1
    return tuple(out)


class Nvshmem(SmBackend):
    name = "nvshmem"
    template = "nvshmem/kernels.cu.j2"
    kernel_params = ("heap", "epoch", "debug")

    def refine(self, segments: list[Segment], ctas: int) -> list[Segment]:
        if ctas != 1:
            return segments
        return [replace(seg, steps=fuse(seg.steps),
                        branches=tuple(Branch(b.scope, b.index, fuse(b.steps)) for b in seg.branches))
                for seg in segments]
