"""All-to-all of run-time amounts on the CPU: what `protocols/alltoallv.cco` computes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def alltoallv(send: Sequence[np.ndarray], counts: Sequence[np.ndarray], cap: int
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(recv, got) per rank: `recv[r][s * cap : s * cap + counts[s][r]]` is
    `send[s][r * cap : r * cap + counts[s][r]]`; the rest of `recv` is untouched (zero
    here); `got[r][s] = counts[s][r]`."""
    nranks = len(send)
    recv, got = [], []
    for r in range(nranks):
        out = np.zeros(nranks * cap, dtype=send[0].dtype)
        for s in range(nranks):
            n = int(counts[s][r])
            out[s * cap:s * cap + n] = send[s][r * cap:r * cap + n]
        recv.append(out)
        got.append(np.array([counts[s][r] for s in range(nranks)], dtype=np.int32))
    return recv, got


__all__ = ["alltoallv"]
