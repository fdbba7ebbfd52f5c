"""Reachability for the happens-before graph: one topological sweep with vector clocks.

Events are grouped into chains by a key that the graph builder gives them (one per
issuer, one per `(issuer, peer, queue, kind)` of in-flight events...): events of a
key are totally ordered by construction, so a chain is a sequence.  The sweep
visits events in topological order (Kahn) and gives each event a row: for every
chain, the position of the latest event of that chain that happens before or is
the event.  Then `a` happens before `b` iff `row(b)[chain(a)] >= pos(a)`, in O(1).

An event whose chain's last event does not happen before it (the keys were not a
chain after all) opens a new chain, so the answer stays exact.  The rows are one
numpy array (an elementwise max per event: pure Python lists were 20x slower).
Events the sweep cannot reach (on or behind a cycle, or behind a blocked event)
never happen: `executes` is False and they are ordered with nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.int32]


@dataclass(slots=True)
class Clock:
    """The result of one sweep: topological order, chains, positions and rows.

    Events share rows: the row of event `e` is `rows[slot[e]]` with its own chain's
    entry replaced by `pos[e]` (an event with one predecessor reuses that
    predecessor's row when nothing else changes, so a chain of single steps costs one
    row).
    """

    order: list[int]
    topo: list[int]  # index in `order`, -1 for an event that never happens
    chain: list[int]
    pos: list[int]
    slot: list[int]  # the row of `rows` that `e` reads (its own chain's entry aside)
    rows: Rows  # rows[slot[e], c]: position of the latest event of chain c at or before e

    def executes(self, e: int) -> bool:
        return self.topo[e] >= 0

    def hb(self, a: int, b: int) -> bool:
        """`a` happens strictly before `b` (False when either never happens)."""
        if a == b or self.topo[a] < 0 or self.topo[b] < 0:
            return False
        c = self.chain[a]
        if c == self.chain[b]:
            return self.pos[a] < self.pos[b]
        return self.rows.item(self.slot[b], c) >= self.pos[a]

    @property
    def stuck(self) -> list[int]:
        return [e for e, t in enumerate(self.topo) if t < 0]


def sweep(preds: Sequence[Sequence[int]], succs: Sequence[Sequence[int]],
          keys: Sequence[int], nkeys: int, blocked: Iterable[int] = (),
          max_bytes: int | None = None) -> Clock:
    """Topologically sort and clock the graph given by `preds`/`succs`.

    `keys[e]` names the chain event `e` should join; `blocked` events never happen.
    `max_bytes` bounds the rows while they are made: growing them for new chains past
    it (the old and the new matrix together) raises `LimitExceeded` (analysis-bytes).
    """
    n = len(preds)
    indeg = [len(p) for p in preds]
    for b in blocked:
        indeg[b] += 1
    st = _State(n, nkeys, max_bytes)
    rows, chain_of_key, tail = st.rows, st.chain_of_key, st.tail
    chain, pos, slot, own, order, topo = st.chain, st.pos, st.slot, st.own, st.order, st.topo
    maximum = np.maximum
    used = 0  # rows of `rows` filled so far
    ready = deque(i for i in range(n) if indeg[i] == 0)
    pop, push = ready.popleft, ready.append
    while ready:
        e = pop()
        ps = preds[e]
        c = chain_of_key[keys[e]]
        if len(ps) == 1:
            p = ps[0]
            cp = chain[p]
            if cp == c:
                if pos[p] != tail[c]:
                    c = st.new_chain(keys[e])
                    rows = st.rows
            elif rows.item(slot[p], c) != tail[c]:
                c = st.new_chain(keys[e])
                rows = st.rows
            if cp == c or own[p]:  # e's row is p's, but for e's own entry
                t = tail[c] = tail[c] + 1
                chain[e] = c
                pos[e] = t
                slot[e] = slot[p]
            else:
                s, used = used, used + 1
                rows[s] = rows[slot[p]]
                rows[s, cp] = pos[p]
                t = tail[c] = tail[c] + 1
                rows[s, c] = t
                chain[e], pos[e], slot[e], own[e] = c, t, s, True
        else:
            s, used = used, used + 1
            if len(ps) == 2:
                p, q = ps
                maximum(rows[slot[p]], rows[slot[q]], out=rows[s])
            elif ps:
                rows[s] = rows[[slot[p] for p in ps]].max(axis=0)
            else:
                rows[s] = -1
            for p in ps:
                if rows.item(s, chain[p]) < pos[p]:
                    rows[s, chain[p]] = pos[p]
            if rows.item(s, c) != tail[c]:
                c = st.new_chain(keys[e])
                rows = st.rows
            t = tail[c] = tail[c] + 1
            rows[s, c] = t
            chain[e], pos[e], slot[e], own[e] = c, t, s, True
        topo[e] = len(order)
        order.append(e)
        for x in succs[e]:
            indeg[x] -= 1
            if indeg[x] == 0:
                push(x)
    return st.clock()


class _State:
    """The mutable part of a sweep."""

    def __init__(self, n: int, nkeys: int, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.rows: Rows = np.empty((n, max(nkeys, 1)), dtype=np.int32)  # filled as used
        # the sweep (`sweep`) runs on local names of these
        self.chain_of_key = list(range(nkeys))
        self.tail = [-1] * nkeys
        self.chain = [-1] * n
        self.pos = [-1] * n
        self.slot = [-1] * n
        self.own = [False] * n  # rows[slot[e], chain[e]] == pos[e] (e wrote its row)
        self.order: list[int] = []
        self.topo = [-1] * n

    def new_chain(self, key: int) -> int:
        c = len(self.tail)
        if c >= self.rows.shape[1]:
            more = max(8, c // 4)
            need = 2 * self.rows.nbytes + 2 * 4 * self.rows.shape[0] * more  # while copying
            if self.max_bytes is not None and need > self.max_bytes:
                from ccogen.limits import LimitExceeded

                raise LimitExceeded(
                    f"the happens-before analysis would need at least {need:,} bytes to grow "
                    f"its clocks to {c + more:,} chains of {self.rows.shape[0]:,} events, over "
                    f"the {self.max_bytes:,} bytes the limit leaves", "analysis-bytes", need)
            grow = np.full((self.rows.shape[0], more), -1, dtype=np.int32)
            self.rows = np.concatenate([self.rows, grow], axis=1)
        self.chain_of_key[key] = c
        self.tail.append(-1)
        return c

    def clock(self) -> Clock:
        return Clock(order=self.order, topo=self.topo, chain=self.chain, pos=self.pos,
                     slot=self.slot, rows=self.rows)


__all__ = ["Clock", "sweep"]
