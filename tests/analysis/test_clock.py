"""`_clock.sweep` against plain reachability on random graphs.

The sweep shares one row between an event and its single predecessor when nothing else
changes (`Clock.slot`); these graphs mix such runs with joins, keys that are chains
and keys that are not (new chains open), blocked events and cycles."""

from __future__ import annotations

import random

import pytest

from ccogen.analysis._clock import sweep


def _graph(rng: random.Random, n: int) -> tuple[list[list[int]], list[list[int]], list[int],
                                                 int, set[int]]:
    preds: list[list[int]] = [[] for _ in range(n)]
    nkeys = rng.randint(1, 5)
    keys = [rng.randrange(nkeys) for _ in range(n)]
    for v in range(1, n):
        shape = rng.random()
        if shape < 0.5:  # a run of single steps, mostly along the previous event
            preds[v] = [v - 1 if rng.random() < 0.8 else rng.randrange(v)]
            if rng.random() < 0.7:
                keys[v] = keys[v - 1]
        elif shape < 0.9:
            preds[v] = sorted(set(rng.sample(range(v), min(v, rng.randint(2, 4)))))
    if rng.random() < 0.3:  # a back edge: a cycle nothing behind it reaches
        a, b = sorted(rng.sample(range(n), 2))
        preds[a].append(b)
    blocked = {rng.randrange(n)} if rng.random() < 0.3 else set()
    succs: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succs[p].append(v)
    return preds, succs, keys, nkeys, blocked


def _reach(preds: list[list[int]]) -> list[set[int]]:
    """For every event, the events with a path to it."""
    out: list[set[int]] = []
    for v in range(len(preds)):
        seen: set[int] = set()
        todo = list(preds[v])
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo += preds[p]
        out.append(seen)
    return out


@pytest.mark.parametrize("seed", range(300))
def test_sweep_agrees_with_reachability(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    preds, succs, keys, nkeys, blocked = _graph(rng, n)
    clock = sweep(preds, succs, keys, nkeys, blocked)
    anc = _reach(preds)
    # what never happens: blocked events, cycles and everything behind them
    bad = blocked | {v for v in range(n) if v in anc[v]}
    happens = [v not in bad and not anc[v] & bad for v in range(n)]
    assert [clock.executes(e) for e in range(n)] == happens
    for b in range(n):
        for a in range(n):
            want = happens[a] and happens[b] and a in anc[b] and a != b
            assert clock.hb(a, b) == want, (seed, a, b)


def test_a_chain_of_single_steps_shares_one_row() -> None:
    n = 1000
    preds = [[]] + [[v - 1] for v in range(1, n)]
    succs = [[v + 1] for v in range(n - 1)] + [[]]
    clock = sweep(preds, succs, [0] * n, 1)
    assert set(clock.slot) == {0}
    assert clock.hb(0, n - 1) and not clock.hb(n - 1, 0) and clock.hb(10, 11)
