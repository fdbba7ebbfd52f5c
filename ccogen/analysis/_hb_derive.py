"""The edges of the happens-before graph that need ordering facts to be placed.

Given a sweep (`Clock`) of the graph so far, these add: the doorbell edge of each
aggregate op (`ring`), the sources a quiet drains (`quiet`), the increments a wait
needs (`signal`, `count`) and queue order between transfers of different issuers
whose issues are ordered (`queue`).  `HBGraph` repeats sweep + derive until nothing
is added; every rule only adds edges as it learns more order, so this terminates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ccogen.analysis._clock import Clock
from ccogen.analysis._hb_build import QueueKey, QueueOps, Skeleton
from ccogen.analysis.events import EdgeKind, EventKind
from ccogen.analysis.matching import CounterKey, SlotKey
from ccogen.ir.instance import Issuer
from ccogen.ir.opkind import OpKind

HB = Callable[[int, int], bool]
T = TypeVar("T")


def oracle(clock: Clock, fallback: Clock) -> HB:
    """`clock.hb`, or `fallback.hb` for events that never happen under `clock`."""

    def hb(a: int, b: int) -> bool:
        if clock.topo[a] >= 0 and clock.topo[b] >= 0:
            return clock.hb(a, b)
        return fallback.hb(a, b)

    return hb


def prefix_len(seq: Sequence[T], pred: Callable[[T], bool]) -> int:
    """The length of the prefix of `seq` where `pred` holds (it must hold on a prefix)."""
    lo, hi = 0, len(seq)
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(seq[mid]):
            lo = mid + 1
        else:
            hi = mid
    return lo


# ============================================================================= static blocks


def block_unsatisfiable(sk: Skeleton) -> None:
    """A wait expecting more than its key ever receives never returns (E021/E026)."""
    for (rank, index), w in sk.matching.waits.items():
        if w.expected is None or w.expected > w.total:
            sk.blocked.add(sk.ids[(EventKind.DONE, rank, index)])


# ======================================================================= plain ops behind a batch


def block_behind_batch(sk: Skeleton, hb: HB) -> int:
    """A plain transfer posted after an aggregate op of its queue, no commit between, spins.

    MORI (mori/cco/cco.hpp, `submitPacket`): a plain op reserves its slot, then spins
    until the queue's committed pointer reaches it; only `commit` moves that pointer
    past reserved aggregate ops, so a plain op behind an uncommitted batch never
    returns (and a commit after it would move the pointer past it: it still spins).
    Its issue never completes: it is blocked.  Judged on the structural order.
    """
    found = 0
    for (rank, _, _), qo in sk.queues.items():
        aggs = {who: [i for i in seq if sk.op(rank, i).aggregate]
                for who, seq in qo.transfers.items()}
        if not any(aggs.values()):
            continue
        for seq in qo.transfers.values():
            for p in seq:
                if sk.op(rank, p).aggregate:
                    continue
                g = _uncommitted_before(sk, rank, qo, aggs, p, hb)
                if g is not None:
                    sk.behind.append((rank, p, g))
                    sk.blocked.add(_issue(sk, rank, p))
                    found += 1
    return found


def _uncommitted_before(sk: Skeleton, rank: int, qo: QueueOps, aggs: dict[Issuer, list[int]],
                        p: int, hb: HB) -> int | None:
    """An aggregate op issued before `p` with no commit between them, if any.

    Per issuer only its last aggregate op before `p` matters (a commit after it is
    after the earlier ones too), and per committing issuer only its first commit
    after that op (later ones are after it).
    """
    ip = _issue(sk, rank, p)
    for seq in aggs.values():
        k = prefix_len(seq, lambda a: hb(_issue(sk, rank, a), ip))
        if k == 0:
            continue
        g = seq[k - 1]
        ig = _issue(sk, rank, g)
        committed = False
        for commits in qo.ringers.values():
            c = _first_after(sk, rank, commits, ig, hb)
            if c is not None and hb(_issue(sk, rank, c), ip):
                committed = True
                break
        if not committed:
            return g
    return None


def block_unrung(sk: Skeleton, hb: HB) -> int:
    """An aggregate op that no `commit` on its queue follows is never rung: it never starts."""
    found = 0
    for (rank, _, _), qo in sk.queues.items():
        for seq in qo.transfers.values():
            for i in seq:
                if sk.op(rank, i).aggregate and not sure_ringers(sk, rank, qo, i, hb):
                    sk.blocked.add(sk.ids[(EventKind.READ, rank, i)])
                    found += 1
    return found


# ============================================================================= rings


def _issue(sk: Skeleton, rank: int, index: int) -> int:
    return sk.ids[(EventKind.ISSUE, rank, index)]


def ring_edges(sk: Skeleton, hb: HB) -> int:
    """Each aggregate op is read after the one doorbell that surely rings it first."""
    added = 0
    for (rank, _, _), qo in sk.queues.items():
        for seq in qo.transfers.values():
            for i in seq:
                if sk.op(rank, i).aggregate:
                    c = first_ringer(sk, rank, qo, i, hb)
                    if c is not None:
                        read = sk.ids[(EventKind.READ, rank, i)]
                        added += sk.add_edge(_issue(sk, rank, c), read, EdgeKind.RING)
    return added


def first_ringer(sk: Skeleton, rank: int, qo: QueueOps, index: int, hb: HB) -> int | None:
    """The doorbell that every possible ringer of op `index` follows, if there is one.

    A doorbell rings every packet posted before it; the possible ringers of an
    aggregate op are the commits on its queue not issued before it (a plain op does
    not ring it: it spins behind it, `block_behind_batch`).  Only when one of them
    comes first in every schedule is there an edge.
    """
    a = _issue(sk, rank, index)
    firsts = []
    for seq in qo.ringers.values():
        k = prefix_len(seq, lambda c: hb(_issue(sk, rank, c), a))
        if k < len(seq):
            firsts.append(seq[k])
    for m in firsts:
        mi = _issue(sk, rank, m)
        if all(c == m or hb(mi, _issue(sk, rank, c)) for c in firsts):
            return m
    return None


def sure_ringers(sk: Skeleton, rank: int, qo: QueueOps, index: int, hb: HB) -> list[int]:
    """Per issuer, the first commit on the queue issued after op `index`."""
    a = _issue(sk, rank, index)
    return [c for seq in qo.ringers.values()
            if (c := _first_after(sk, rank, seq, a, hb)) is not None]


def _first_after(sk: Skeleton, rank: int, seq: list[int], event: int, hb: HB) -> int | None:
    """The first of one issuer's ops `seq` issued surely after `event`.  Those issued
    before it are a prefix (one that never happens ends it: `not hb(event, c)` is no
    prefix, as a later launch's op may never happen); after them, another issuer's op
    may be unordered with `event` before one is surely after it."""
    for c in seq[prefix_len(seq, lambda c: hb(_issue(sk, rank, c), event)):]:
        if hb(event, _issue(sk, rank, c)):
            return c
    return None


def rung_before(sk: Skeleton, rank: int, qo: QueueOps, index: int, event: int, hb: HB) -> bool:
    """Op `index` is surely rung before `event` (plain ops always are)."""
    if not sk.op(rank, index).aggregate:
        return True
    return any(hb(_issue(sk, rank, c), event) for c in sure_ringers(sk, rank, qo, index, hb))


# ============================================================================= quiets


def _quiet_queues(sk: Skeleton, rank: int, peer: int | None,
                  queue: int | None) -> list[tuple[QueueKey, QueueOps]]:
    return [(k, qo) for k, qo in sk.rank_queues(rank)
            if (peer is None or k[1] == peer) and (queue is None or k[2] == queue)]


def quiet_edges(sk: Skeleton, hb: HB, again: bool = False) -> int:
    """`quiet` returns after the read of every rung op issued before it on its queues.

    `again`: a later round, where the quiet's own issuer's ops need no second look
    (their order is program order, known from the first round).
    """
    added = 0
    for ops in sk.instance.ranks:
        for op in ops:
            if op.kind is OpKind.QUIET:
                for read in drained(sk, op.rank, op.index, hb, again):
                    added += sk.add_edge(read, sk.ids[(EventKind.DONE, op.rank, op.index)],
                                         EdgeKind.QUIET)
    return added


def drained(sk: Skeleton, rank: int, index: int, hb: HB, again: bool = False) -> list[int]:
    """The read events of the last rung op per issuer and queue that quiet `index` drains."""
    q = sk.op(rank, index)
    issue = _issue(sk, rank, index)
    reads = []
    for _, qo in _quiet_queues(sk, rank, q.peer, q.queue):
        for who, seq in qo.transfers.items():
            if again and who == q.issuer:
                continue
            k = prefix_len(seq, lambda a: hb(_issue(sk, rank, a), issue))
            while k > 0 and not rung_before(sk, rank, qo, seq[k - 1], issue, hb):
                k -= 1
            if k > 0:
                reads.append(sk.ids[(EventKind.READ, rank, seq[k - 1])])
    return reads


# ============================================================================= waits


def wait_edges(sk: Skeleton, clock: Clock, clock0: Clock, again: bool = False) -> int:
    """Each wait returns after the increments that are among its first `expected` ones.

    `again`: a later round, where keys whose increments are one chain already in the
    structural order (`clock0`) need no second look.
    """
    added = 0
    by_key: dict[SlotKey | CounterKey, list[tuple[int, int]]] = {}
    for (_, index), w in sk.matching.waits.items():
        if w.expected is not None and 0 < w.expected <= w.total:
            by_key.setdefault(w.key, []).append((index, w.expected))
    resets = _resets(sk)
    for key, waits in by_key.items():
        events, weights, kind = _key_events(sk, key)
        if again and _one_chain(events, clock0) and key not in resets:
            continue
        finder = _Needed(events, weights, clock, clock0)
        rank = key[0]
        for index, expected in waits:
            done = sk.ids[(EventKind.DONE, rank, index)]
            found = finder
            if key in resets:
                found = _after_resets(sk, events, weights, rank, resets[key], index, clock,
                                      clock0)
            for e in found.lasts(expected, done):
                added += sk.add_edge(e, done, kind)
    return added


def _resets(sk: Skeleton) -> dict[CounterKey, list[int]]:
    """The `reset_count` ops of each `(rank, counter)`, by op index."""
    out: dict[CounterKey, list[int]] = {}
    for ops in sk.instance.ranks:
        for op in ops:
            if op.kind is OpKind.RESET_COUNT and op.counter is not None:
                out.setdefault((op.rank, op.counter), []).append(op.index)
    return out


def _after_resets(sk: Skeleton, events: list[int], weights: list[int], rank: int,
                  resets: list[int], wait: int, clock: Clock, clock0: Clock) -> _Needed:
    """The counted writes a wait after a `reset_count` can still see.

    A write whose count happens before a reset that happens before the wait was erased
    by it: the wait's bytes come from the others only.
    """
    hb = oracle(clock, clock0)
    issue = sk.ids[(EventKind.ISSUE, rank, wait)]
    before = [ri for r in resets if hb(ri := sk.ids[(EventKind.ISSUE, rank, r)], issue)]
    kept = [(e, w) for e, w in zip(events, weights, strict=True)
            if not any(hb(e, ri) for ri in before)]
    return _Needed([e for e, _ in kept], [w for _, w in kept], clock, clock0)


def _one_chain(events: list[int], clock: Clock) -> bool:
    chains = {clock.chain[e] for e in events}
    return len(chains) == 1 and all(clock.executes(e) for e in events)


def _key_events(sk: Skeleton, key: SlotKey | CounterKey) -> tuple[list[int], list[int],
                                                                   EdgeKind]:
    """The increment (or counted write) events of a key, their weights and edge kind
    (made once per graph: every round of the fixpoint asks; never changed by a caller)."""
    found = sk.key_events.get(key)
    if found is None:
        found = sk.key_events[key] = _make_key_events(sk, key)
    return found


def _make_key_events(sk: Skeleton, key: SlotKey | CounterKey) -> tuple[list[int], list[int],
                                                                        EdgeKind]:
    m = sk.matching
    if isinstance(key[1], str):
        writes = m.counted.get(key, ())
        return ([sk.ids[(EventKind.COUNT, c.sender, c.op)] for c in writes],
                [c.nbytes for c in writes], EdgeKind.COUNT)
    incs = m.increments.get(key, ())
    events = [sk.ids[(EventKind.LSIG if i.local else EventKind.RSIG, i.sender, i.first)]
              for i in incs]
    return events, [1] * len(events), EdgeKind.SIGNAL


def needed(events: list[int], weights: list[int], expected: int, clock: Clock,
           clock0: Clock) -> list[int]:
    """The increments surely among those that bring the key to `expected`.

    `s` is needed when the weight of the other increments that may come before it
    (those not after it) is below `expected`.  Along a chain this holds on a prefix,
    so only the last needed event of each chain is returned.
    """
    return _Needed(events, weights, clock, clock0).lasts(expected)


class _Needed:
    """`needed` for one key, over the chains of one clock.

    The current clock when every increment happens in it, else the structural one
    (`clock0`); increments that never happen there are unrelated to all others.
    """

    def __init__(self, events: list[int], weights: list[int], clock: Clock,
                 clock0: Clock) -> None:
        if not all(clock.executes(e) for e in events):
            clock = clock0
        self.clock = clock
        self.total = sum(weights)
        self.weight = dict(zip(events, weights, strict=True))
        self.loose = [e for e in events if not clock.executes(e)]
        groups: dict[int, list[int]] = {}
        for e in events:
            if clock.executes(e):
                groups.setdefault(clock.chain[e], []).append(e)
        self.groups = [sorted(g, key=lambda e: clock.pos[e]) for g in groups.values()]
        self.suffix = [_suffix_sums([self.weight[e] for e in g]) for g in self.groups]

    def others_before(self, s: int, cuts: list[int], total: int) -> int:
        after = 0
        for g, suf, cut in zip(self.groups, self.suffix, cuts, strict=True):
            start = prefix_len(g, lambda t: not self.clock.hb(s, t))
            after += suf[start] - suf[cut] if start < cut else 0
        return total - self.weight[s] - after

    def lasts(self, expected: int, horizon: int | None = None) -> list[int]:
        """The needed increments' last per chain, for a wait for `expected`.

        `horizon`: the wait's return; increments that surely come after it cannot be
        among those it waits for (a later launch's, say).  When too few remain, the
        wait cannot return before them: all are kept (the cycle is a deadlock).  So are
        increments that never happen (behind a deadlock) when the others are too few:
        the wait then never returns either.
        """
        cuts = [len(g) for g in self.groups]
        loose = self.loose
        if horizon is not None and self.clock.executes(horizon):
            cut = [prefix_len(g, lambda t: not self.clock.hb(horizon, t)) for g in self.groups]
            kept = sum(suf[0] - suf[c] for suf, c in zip(self.suffix, cut, strict=True))
            kept += sum(self.weight[e] for e in loose)
            if kept >= expected:
                cuts = cut
        total = sum(suf[0] - suf[c] for suf, c in zip(self.suffix, cuts, strict=True))
        if total >= expected:
            loose = []  # increments that never happen cannot be among the first ones
        elif loose:  # it needs one that never happens: it never returns (one edge says so;
            # the earliest made, its own launch's, so no cycle through a later one appears)
            return [g[c - 1] for g, c in zip(self.groups, cuts, strict=True) if c] + loose[:1]
        if expected >= total:
            return [g[c - 1] for g, c in zip(self.groups, cuts, strict=True) if c] + loose
        if len(self.groups) == 1 and not loose:
            return self._one_chain(expected, cuts[0])
        out = []
        for g, upto in zip(self.groups, cuts, strict=True):
            k = prefix_len(g[:upto], lambda s: self.others_before(s, cuts, total) < expected)
            if k:
                out.append(g[k - 1])
        out += [e for e in loose if total - self.weight[e] < expected]
        return out

    def _one_chain(self, expected: int, cut: int) -> list[int]:
        """One chain: what may precede the k-th increment is exactly the k-1 before it."""
        g, suf = self.groups[0], self.suffix[0]
        k = prefix_len(range(cut), lambda i: suf[0] - suf[i] < expected)
        return [g[k - 1]] if k else []


def _suffix_sums(ws: list[int]) -> list[int]:
    out = [0] * (len(ws) + 1)
    for i in range(len(ws) - 1, -1, -1):
        out[i] = out[i + 1] + ws[i]
    return out


# ============================================================================= queue order


def cross_queue_edges(sk: Skeleton, hb: HB) -> int:
    """Transfers of different issuers on one queue complete in the order they were issued."""
    added = 0
    for (rank, _, _), qo in sk.queues.items():
        if len(qo.transfers) > 1:
            added += _cross_queue(sk, rank, qo, hb)
    return added


def _issued_before(sk: Skeleton, rank: int, event: int, hb: HB) -> Callable[[int], bool]:
    return lambda a: hb(_issue(sk, rank, a), event)


def _cross_queue(sk: Skeleton, rank: int, qo: QueueOps, hb: HB) -> int:
    added = 0
    for x, seq in qo.transfers.items():
        seen: dict[Issuer, int] = {}
        for b in seq:
            issue_b = _issue(sk, rank, b)
            read_b = sk.ids[(EventKind.READ, rank, b)]
            for y, other in qo.transfers.items():
                if y == x:
                    continue
                k = prefix_len(other, _issued_before(sk, rank, issue_b, hb))
                if k and seen.get(y) != other[k - 1]:
                    seen[y] = other[k - 1]
                    for t in sk.terminal(rank, other[k - 1]):
                        added += sk.add_edge(t, read_b, EdgeKind.QUEUE)
    return added


__all__ = ["block_behind_batch", "block_unrung", "block_unsatisfiable", "cross_queue_edges",
           "drained", "first_ringer", "needed", "oracle", "prefix_len", "quiet_edges",
           "ring_edges", "rung_before", "sure_ringers", "wait_edges"]
