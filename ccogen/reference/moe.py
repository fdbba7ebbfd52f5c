"""MoE dispatch and combine on the CPU (numpy): what `protocols/moe_dispatch.cco` and
`protocols/moe_combine.cco` compute, for any routing.

Shapes (per rank r of `nranks`): tokens `x[r]` of `[tokens, hidden]`, the routing table
`topk_rank[r]` of `[tokens, k]` (the rank of each of a token's k experts) and its
weights `topk_weight[r]` of `[tokens, k]`.

* `rank_counts(topk_rank, nranks)`: how many tokens each rank sends to each rank (a
  token counts once per distinct rank among its top-k).
* `dispatch(x, topk_rank)`: per receiver, `[nranks, tokens, hidden]` rows (row `t` of
  source `s` is token t of s) and the mask of the rows that are written; the rows a
  mask leaves out are whatever the receiver held.
* `combine(expert_out, topk_rank, topk_weight)`: per source rank, `y[t] = sum over ranks
  p of w(t, p) * expert_out[p][src, t]`, `w(t, p)` the sum of the token's weights
  whose expert is on p, accumulated in float32 in rank order (as the protocol's one
  `reduce` per token does), then rounded once to the element type by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def routed(topk_rank: np.ndarray, nranks: int) -> np.ndarray:
    """`[tokens, nranks]` booleans: whether token t goes to rank p."""
    tokens = topk_rank.shape[0]
    out = np.zeros((tokens, nranks), dtype=bool)
    for j in range(topk_rank.shape[1]):
        out[np.arange(tokens), topk_rank[:, j]] = True
    return out


def rank_counts(topk_rank: np.ndarray, nranks: int) -> np.ndarray:
    """How many tokens go to each rank (int32, `[nranks]`)."""
    return routed(topk_rank, nranks).sum(axis=0).astype(np.int32)


def dispatch(x: Sequence[np.ndarray], topk_rank: Sequence[np.ndarray]
             ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """(rows, mask, got) per receiver: `rows[r][s, t]` is token t of rank s where
    `mask[r][s, t]`; `got[r][s]` counts the rows rank s sent to r."""
    nranks = len(x)
    tokens, hidden = x[0].shape
    rows, masks, got = [], [], []
    for r in range(nranks):
        out = np.zeros((nranks, tokens, hidden), dtype=x[0].dtype)
        mask = np.zeros((nranks, tokens), dtype=bool)
        for s in range(nranks):
            goes = routed(topk_rank[s], nranks)[:, r]
            out[s][goes] = x[s][goes]
            mask[s] = goes
        rows.append(out)
        masks.append(mask)
        got.append(np.array([rank_counts(topk_rank[s], nranks)[r] for s in range(nranks)],
                            dtype=np.int32))
    return rows, masks, got


def rank_weights(topk_rank: np.ndarray, topk_weight: np.ndarray, nranks: int) -> np.ndarray:
    """`[tokens, nranks]` float32: the sum of a token's weights whose expert is on p."""
    tokens = topk_rank.shape[0]
    w = np.zeros((tokens, nranks), dtype=np.float32)
    for j in range(topk_rank.shape[1]):
        np.add.at(w, (np.arange(tokens), topk_rank[:, j]), topk_weight[:, j].astype(np.float32))
    return w


def combine(expert_out: Sequence[np.ndarray], topk_rank: Sequence[np.ndarray],
            topk_weight: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`y` per source rank (float32 `[tokens, hidden]`); `expert_out[p]` is rank p's
    `[nranks, tokens, hidden]` outputs in dispatch's layout (rows of tokens not routed
    to p are not read: their weight is 0 and the protocol clears them first)."""
    nranks = len(expert_out)
    ys = []
    for src in range(nranks):
        w = rank_weights(topk_rank[src], topk_weight[src], nranks)
        goes = routed(topk_rank[src], nranks)
        acc = np.zeros(expert_out[0].shape[1:], dtype=np.float32)
        for p in range(nranks):
            row = np.where(goes[:, p:p + 1], expert_out[p][src].astype(np.float32), 0.0)
            acc = acc + w[:, p:p + 1] * row
        ys.append(acc)
    return ys


def skewed_routing(rng: np.random.Generator, tokens: int, k: int, nranks: int,
                   hot: int = 0, share: float = 0.9) -> np.ndarray:
    """A routing table where rank `hot` takes about `share` of the top-k slots and the
    last rank none (when there are more than two ranks)."""
    cold = nranks - 1 if nranks > 2 else None
    others = [p for p in range(nranks) if p != hot and p != cold] or [hot]
    table = np.where(rng.random((tokens, k)) < share, hot,
                     rng.choice(others, size=(tokens, k)))
    return table.astype(np.int32)


__all__ = ["combine", "dispatch", "rank_counts", "rank_weights", "routed", "skewed_routing"]
