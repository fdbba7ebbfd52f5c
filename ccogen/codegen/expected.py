"""Expected values of waits for code generation: (value in epoch 0, added per epoch).

Spec §6: the k-th `wait_signal(src, queue=q)` of `me` with `expected` omitted waits for
the k-th increment `src` sends `me` on `q` (in `src`'s program order); the last such
wait expects the epoch's total.  Increments: one per posting subgroup (the lanes of one
warp and call site that target one `(peer, queue)`), or one per lane with
`signal_per_copy`.  A `wait_count` without `expected` waits for every byte counted to
`me` this epoch.  The generated code adds `epoch * per_epoch_total`.
"""

from __future__ import annotations

from collections import defaultdict

from ccogen.ir.instance import Instance, OpInst

SlotKey = tuple[int, int, int]  # (receiver, sender, queue)


def _increments(instance: Instance) -> dict[SlotKey, int]:
    counts: dict[SlotKey, int] = defaultdict(int)
    seen: set[tuple[object, ...]] = set()
    for ops in instance.ranks:
        for o in ops:
            if o.kind not in ("put", "get") or o.queue is None or o.peer is None:
                continue
            key = (o.rank, o.group, o.peer, o.queue) if not o.signal_per_copy else (o.rank, o.index)
            if o.signal.remote and ("r", *key) not in seen:
                seen.add(("r", *key))
                counts[(o.peer, o.rank, o.queue)] += 1
            if o.signal.local and ("l", *key) not in seen:
                seen.add(("l", *key))
                counts[(o.rank, o.rank, o.queue)] += 1
    return counts


def _bytes(instance: Instance) -> dict[tuple[int, str], int]:
    totals: dict[tuple[int, str], int] = defaultdict(int)
    for ops in instance.ranks:
        for o in ops:
            if o.kind == "put" and o.counter is not None and o.peer is not None and o.dst:
                totals[(o.peer, o.counter)] += o.dst.size
    return totals


def expected_values(instance: Instance) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, op index) of every wait -> (expected in epoch 0, per-epoch total)."""
    increments, counted = _increments(instance), _bytes(instance)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for ops in instance.ranks:
        waits: dict[tuple[int, int], list[OpInst]] = defaultdict(list)
        for o in ops:
            if o.kind == "wait_signal" and o.peer is not None and o.queue is not None:
                waits[(o.peer, o.queue)].append(o)
            elif o.kind == "wait_count" and o.counter is not None:
                total = counted[(o.rank, o.counter)]
                out[(o.rank, o.index)] = (o.expected if o.expected is not None else total, total)
        for (src, q), pair in waits.items():
            total = increments[(pair[0].rank, src, q)]
            for k, o in enumerate(pair, start=1):
                auto = total if k == len(pair) else k
                out[(o.rank, o.index)] = (o.expected if o.expected is not None else auto, total)
    return out
