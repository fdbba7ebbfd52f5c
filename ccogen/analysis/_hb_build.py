"""The structural part of the happens-before graph: events, and the edges that need no ordering.

See `ccogen.analysis.hb_graph` for the model.  This module creates every event and
the edges that follow from the program text alone: program order, the life of a
transfer (issue -> read -> land -> signals), queue order between transfers of one
issuer, `fence`, barriers and the end of each rank's program.  Edges that need
happens-before facts to be placed (rings, quiets, waits, queue order across
issuers) are added by `_hb_derive`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ccogen.analysis.events import EdgeKind, Event, EventKind
from ccogen.analysis.matching import Matching
from ccogen.ir.instance import Instance, Issuer, OpInst
from ccogen.ir.nodes import LaunchOrder
from ccogen.ir.opkind import OpKind

QueueKey = tuple[int, int, int]  # (rank, peer, queue)


@dataclass(slots=True)
class QueueOps:
    """The ops of one rank on one `(peer, queue)`, per issuer, in program order."""

    transfers: dict[Issuer, list[int]] = field(default_factory=dict)
    ringers: dict[Issuer, list[int]] = field(default_factory=dict)  # commits: the only doorbell


@dataclass(slots=True)
class BarrierMismatch:
    """`barrier()` reached `counts[(rank, block)]` times in kernel `kernel`."""

    kernel: int
    counts: dict[tuple[int, int], int]
    extra: list[tuple[int, int]]  # (rank, op) of the barriers beyond the common count


@dataclass
class Skeleton:
    """Events and edges under construction (the mutable half of `HBGraph`)."""

    instance: Instance
    matching: Matching
    kinds: list[EventKind] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    opidx: list[int] = field(default_factory=list)
    wheres: list[int] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    key_ids: dict[object, int] = field(default_factory=dict)
    ids: dict[tuple[EventKind, int, int], int] = field(default_factory=dict)
    preds: list[list[int]] = field(default_factory=list)
    succs: list[list[int]] = field(default_factory=list)
    edge_kind: dict[tuple[int, int], EdgeKind] = field(default_factory=dict)
    blocked: set[int] = field(default_factory=set)
    # (rank, plain op, aggregate op): a plain op posted behind an uncommitted batch spins
    behind: list[tuple[int, int, int]] = field(default_factory=list)
    queues: dict[QueueKey, QueueOps] = field(default_factory=dict)
    mismatches: list[BarrierMismatch] = field(default_factory=list)
    _by_rank: dict[int, list[tuple[QueueKey, QueueOps]]] | None = None
    # (rank, op) -> the events after its `land`: signals (rsig, lsig) and count
    _signals: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    # per rank, by op index: its `issue` event, and the event program order continues from
    issues: list[list[int]] = field(default_factory=list)
    completions: list[list[int]] = field(default_factory=list)
    whos: list[list[int]] = field(default_factory=list)  # per rank, by op: its issuer's number
    # slot or counter -> its increment events, weights, edge kind (`_hb_derive._key_events`)
    key_events: dict[object, tuple[list[int], list[int], EdgeKind]] = field(default_factory=dict)

    def rank_queues(self, rank: int) -> list[tuple[QueueKey, QueueOps]]:
        """The queues of one rank (built once the skeleton is complete)."""
        if self._by_rank is None:
            self._by_rank = {}
            for key, qo in self.queues.items():
                self._by_rank.setdefault(key[0], []).append((key, qo))
        return self._by_rank.get(rank, [])

    # ------------------------------------------------------------------ primitives
    def add_event(self, kind: EventKind, rank: int, op: int, where: int, key: object) -> int:
        e = len(self.kinds)
        self.kinds.append(kind)
        self.ranks.append(rank)
        self.opidx.append(op)
        self.wheres.append(where)
        key_ids = self.key_ids
        kid = key_ids.get(key)
        if kid is None:
            kid = key_ids[key] = len(key_ids)
        self.keys.append(kid)
        self.ids[(kind, rank, op)] = e
        self.preds.append([])
        self.succs.append([])
        return e

    def event(self, e: int) -> Event:
        return Event(self.kinds[e], self.ranks[e], self.opidx[e], self.wheres[e])

    def __len__(self) -> int:
        return len(self.kinds)

    def add_edge(self, u: int, v: int, kind: EdgeKind) -> bool:
        uv = (u, v)
        edge_kind = self.edge_kind
        if uv in edge_kind or u == v:
            return False
        edge_kind[uv] = kind
        self.preds[v].append(u)
        self.succs[u].append(v)
        return True

    def id(self, kind: EventKind, rank: int, op: int) -> int | None:
        return self.ids.get((kind, rank, op))

    def op(self, rank: int, index: int) -> OpInst:
        return self.instance.ranks[rank][index]

    def launch_end(self, rank: int, epoch: int) -> int:
        """Where launch `epoch` of `rank` ends: its boundary event, or the program's end."""
        if epoch < self.instance.launches - 1:
            return self.ids[(EventKind.BOUNDARY, rank, -1 - epoch)]
        return self.ids[(EventKind.END, rank, -1)]

    def completion(self, rank: int, index: int) -> int:
        """The event after which program order continues: `done` of a blocking op, else `issue`."""
        return self.completions[rank][index]

    def terminal(self, rank: int, index: int) -> list[int]:
        """The last events of a transfer: its signals and count, or its land."""
        return self.signals(rank, index) or [self.ids[(EventKind.LAND, rank, index)]]

    def signals(self, rank: int, index: int) -> list[int]:
        """The events after a transfer's land: its rsig, lsig and count (the events
        exist once the skeleton's events are made; remembered per op)."""
        found = self._signals.get((rank, index))
        if found is None:
            found = self._signals[(rank, index)] = [
                e for k in (EventKind.RSIG, EventKind.LSIG, EventKind.COUNT)
                if (e := self._signal_event(k, rank, index)) is not None]
        return found

    def _signal_event(self, kind: EventKind, rank: int, index: int) -> int | None:
        if kind is EventKind.COUNT:
            return self.ids.get((kind, rank, index))
        inc = self.matching.signal_of.get((rank, index, kind is EventKind.LSIG))
        return None if inc is None else self.ids.get((kind, rank, inc.first))


# ============================================================================= events


def build_skeleton(instance: Instance, matching: Matching) -> Skeleton:
    sk = Skeleton(instance, matching)
    for rank, ops in enumerate(instance.ranks):
        _rank_events(sk, rank, ops)
        for e in range(instance.launches - 1):
            sk.add_event(EventKind.BOUNDARY, rank, -1 - e, rank, ("end", rank))
        sk.add_event(EventKind.END, rank, -1, rank, ("end", rank))
    for rank, ops in enumerate(instance.ranks):
        _program_edges(sk, rank, ops)
        _transfer_edges(sk, rank, ops)
        _queue_edges(sk, rank, ops)
        _fence_edges(sk, rank, ops)
    _host_sync(sk)
    _barriers(sk)
    return sk


def _rank_events(sk: Skeleton, r: int, ops: tuple[OpInst, ...]) -> None:
    """The events of every op of rank `r`, in op order (see `Skeleton.add_event`).

    Chain keys: the issuer's program (issue, done); per issuer and queue, the data
    events and the first signal event of each transfer (the queue runs them in
    order); a second signal kind of the same transfer gets a key of its own.  The
    signal events an op takes part in (its own, or its posting group's first op's,
    made before it) are noted for `Skeleton.signals`.
    """
    kinds, ranks, opidx, wheres, keys = sk.kinds, sk.ranks, sk.opidx, sk.wheres, sk.keys
    key_ids, ids, preds, succs = sk.key_ids, sk.ids, sk.preds, sk.succs
    signal_of, signals = sk.matching.signal_of, sk._signals
    issues: list[int] = []
    completions: list[int] = []
    whos: list[int] = []
    sk.issues.append(issues)
    sk.completions.append(completions)
    sk.whos.append(whos)

    def add(kind: EventKind, i: int, where: int, key: object) -> int:
        # (`ranks`, `preds` and `succs` are filled for all of them at the end)
        e = len(kinds)
        kinds.append(kind)
        opidx.append(i)
        wheres.append(where)
        kid = key_ids.get(key)
        if kid is None:
            kid = key_ids[key] = len(key_ids)
        keys.append(kid)
        ids[(kind, r, i)] = e
        return e

    n = len(ops)
    inst = sk.instance
    if inst.launches > 1 and inst.period == 1 and _copied(ops, inst.launch_len(r)):
        n = inst.launch_len(r)  # the later launches' events are copies of the first's
    e0 = len(kinds)
    who: dict[Issuer, int] = {}
    by_id: dict[int, int] = {}  # the same issuer object again (most ops): no hashing
    for op in ops[:n]:
        i = op.index
        w = by_id.get(id(op.issuer))
        if w is None:
            w = who.get(op.issuer)
            if w is None:
                w = who[op.issuer] = len(who)
            by_id[id(op.issuer)] = w
        whos.append(w)
        traits = op.kind.traits
        prog = (r, w)
        issue = add(EventKind.ISSUE, i, r, prog)
        issues.append(issue)
        completions.append(add(EventKind.DONE, i, r, prog) if traits.blocking else issue)
        if not traits.queued or op.peer is None:
            continue
        queue = (r, w, op.peer, op.queue)
        # a `signal` carries no data: its read and land are the queue reaching it
        add(EventKind.READ, i, op.src.rank if op.src is not None else r, queue)
        add(EventKind.LAND, i, op.dst.rank if op.dst is not None else op.peer, queue)
        first = True
        sigs: list[int] = []
        for local, kind in ((False, EventKind.RSIG), (True, EventKind.LSIG)):
            inc = signal_of.get((r, i, local))
            if inc is None:
                continue
            if inc.first == i:
                sigs.append(add(kind, i, inc.slot[0], queue if first else (*queue, kind)))
                first = False
            elif (e := ids.get((kind, r, inc.first))) is not None:
                sigs.append(e)
        if op.kind is OpKind.PUT and op.counter is not None:
            sigs.append(add(EventKind.COUNT, i, op.peer,
                            queue if first else (*queue, EventKind.COUNT)))
        signals[(r, i)] = sigs
    if n < len(ops):
        _copy_launches(sk, r, n, e0)
    made = len(kinds) - len(ranks)
    ranks.extend([r] * made)
    preds.extend([[] for _ in range(made)])
    succs.extend([[] for _ in range(made)])


def _copied(ops: tuple[OpInst, ...], n: int) -> bool:
    """Every later launch's ops are the first launch's, shifted (`launches._relaunched`:
    the same issuer, regions and targets)."""
    if n == 0 or len(ops) % n:
        return False
    for k in range(n, len(ops)):
        op, op0 = ops[k], ops[k % n]
        if not (op.issuer is op0.issuer and op.src is op0.src and op.dst is op0.dst
                and op.kind is op0.kind and op.peer == op0.peer and op.queue == op0.queue
                and op.counter == op0.counter and op.signal is op0.signal
                and op.index == op0.index + k - k % n):
            return False
    return True


def _copy_launches(sk: Skeleton, r: int, n: int, e0: int) -> None:
    """The events of rank `r`'s later launches, copied from its first launch's (events
    `e0` on, of its first `n` ops): the same kinds, places and chain keys, op indices
    shifted by `n` per launch, event ids by the first launch's count (what the loop of
    `_rank_events` makes for relaunched ops, whose increments are shifted alike)."""
    kinds, opidx, wheres, keys, ids = sk.kinds, sk.opidx, sk.wheres, sk.keys, sk.ids
    issues, completions, whos = sk.issues[r], sk.completions[r], sk.whos[r]
    signals = sk._signals
    e1 = len(kinds)
    count = e1 - e0
    first_signals = [(j, signals[(r, j)]) for j in range(n) if (r, j) in signals]
    for launch in range(1, len(sk.instance.ranks[r]) // n):
        shift, delta = launch * n, launch * count
        kinds.extend(kinds[e0:e1])
        opidx.extend([i + shift for i in opidx[e0:e1]])
        wheres.extend(wheres[e0:e1])
        keys.extend(keys[e0:e1])
        for x in range(e0, e1):
            ids[(kinds[x], r, opidx[x] + shift)] = x + delta
        issues.extend([x + delta for x in issues[:n]])
        completions.extend([x + delta for x in completions[:n]])
        whos.extend(whos[:n])
        for j, sigs in first_signals:
            signals[(r, j + shift)] = [x + delta for x in sigs]


# ============================================================================= edges


def _program_edges(sk: Skeleton, rank: int, ops: tuple[OpInst, ...]) -> None:
    """Program order; a launch's last ops precede its end, which precedes the next launch."""
    has_succ = [False] * len(ops)
    issues, completions, add_edge = sk.issues[rank], sk.completions[rank], sk.add_edge
    for op in ops:
        issue = issues[op.index]
        for p in op.preds:
            has_succ[p] = True
            add_edge(completions[p], issue, EdgeKind.PROGRAM)
        if not op.preds and op.epoch > 0:
            add_edge(sk.launch_end(rank, op.epoch - 1), issue, EdgeKind.LAUNCH)
        if completions[op.index] != issue:  # a blocking op: issue -> done
            add_edge(issue, completions[op.index], EdgeKind.PROGRAM)
    for op in ops:
        if not has_succ[op.index]:
            add_edge(completions[op.index], sk.launch_end(rank, op.epoch), EdgeKind.PROGRAM)
    for e in range(sk.instance.launches - 1):
        sk.add_edge(sk.launch_end(rank, e), sk.launch_end(rank, e + 1), EdgeKind.LAUNCH)


def _host_sync(sk: Skeleton) -> None:
    """`between_launches: host_sync`: a host barrier after every rank's launch, then every
    rank's caller step, then a host barrier before any next launch (what `ccogen run`
    does around its callers)."""
    inst = sk.instance
    if inst.launches == 1 or inst.protocol.between_launches is not LaunchOrder.HOST_SYNC:
        return
    for e in range(inst.launches - 1):
        ended = sk.add_event(EventKind.JOIN, -1, -2 - 2 * e, -1, ("host", e, 0))
        start = sk.add_event(EventKind.JOIN, -1, -3 - 2 * e, -1, ("host", e, 1))
        for rank, ops in enumerate(inst.ranks):
            has_succ = {p for op in ops for p in op.preds}
            for op in ops:
                if op.epoch == e and op.index not in has_succ:
                    sk.add_edge(sk.completion(rank, op.index), ended, EdgeKind.LAUNCH)
                if op.epoch == e + 1 and not op.preds:
                    sk.add_edge(start, sk.ids[(EventKind.ISSUE, rank, op.index)],
                                EdgeKind.LAUNCH)
            sk.add_edge(ended, sk.launch_end(rank, e), EdgeKind.LAUNCH)
            sk.add_edge(sk.launch_end(rank, e), start, EdgeKind.LAUNCH)


def _transfer_edges(sk: Skeleton, r: int, ops: tuple[OpInst, ...]) -> None:
    """A transfer's life: issue -> read -> land -> each signal (and count)."""
    issues, completions, kinds, add_edge = sk.issues[r], sk.completions[r], sk.kinds, sk.add_edge
    queued = {k for k in OpKind if k.traits.queued}
    for op in ops:
        if op.kind not in queued:
            continue
        i = op.index
        read = completions[i] + 1  # an op's read and land follow its issue (and done)
        if kinds[read] is not EventKind.READ:
            continue
        land = read + 1
        add_edge(issues[i], read, EdgeKind.TRANSFER)
        add_edge(read, land, EdgeKind.TRANSFER)
        for sig in sk.signals(r, i):
            add_edge(land, sig, EdgeKind.TRANSFER)


def _queue_edges(sk: Skeleton, rank: int, ops: tuple[OpInst, ...]) -> None:
    """Transfers of one issuer on one queue: each reads after the previous one finished."""
    # per issuer of the rank (by its number) and (peer, queue): its list of transfers
    listed: dict[tuple[int, int, int], list[int]] = {}
    queues, whos = sk.queues, sk.whos[rank]
    for op in ops:
        traits = op.kind.traits
        if op.peer is None or op.queue is None or not traits.rings:
            continue
        q = queues.get((rank, op.peer, op.queue))
        if q is None:
            q = queues[(rank, op.peer, op.queue)] = QueueOps()
        if op.kind is OpKind.COMMIT:
            q.ringers.setdefault(op.issuer, []).append(op.index)
        if not traits.queued:
            continue
        key = (whos[op.index], op.peer, op.queue)
        seq = listed.get(key)
        if seq is None:
            seq = listed[key] = q.transfers.setdefault(op.issuer, [])
        elif seq:
            read = sk.completions[rank][op.index] + 1  # (its read follows its issue)
            for t in sk.terminal(rank, seq[-1]):
                sk.add_edge(t, read, EdgeKind.QUEUE)
        seq.append(op.index)


def _fence_edges(sk: Skeleton, rank: int, ops: tuple[OpInst, ...]) -> None:
    """`fence()`: the issuer's earlier transfers land before its later ones land."""
    if not any(op.kind is OpKind.FENCE for op in ops):
        return
    by_issuer: dict[int, list[OpInst]] = {}  # by issuer number, in order of first op
    whos = sk.whos[rank]
    for op in ops:
        if op.kind is OpKind.FENCE or (op.kind.traits.queued and op.peer is not None):
            by_issuer.setdefault(whos[op.index], []).append(op)
    for seq in by_issuer.values():
        if any(op.kind is OpKind.FENCE for op in seq):
            _fence_issuer(sk, rank, seq)


def _fence_issuer(sk: Skeleton, rank: int, seq: list[OpInst]) -> None:
    last_land: dict[tuple[int | None, int | None], int] = {}
    sources: dict[tuple[int | None, int | None], int] = {}
    fenced: set[tuple[int | None, int | None]] = set()
    for op in seq:
        if op.kind is OpKind.FENCE:
            sources, fenced = dict(last_land), set()
            continue
        where = (op.peer, op.queue)
        land = sk.ids[(EventKind.LAND, rank, op.index)]
        if where not in fenced:
            fenced.add(where)
            for q, src in sources.items():
                if q != where:
                    sk.add_edge(src, land, EdgeKind.FENCE)
        last_land[where] = land


# ============================================================================= barriers


def _barrier_ops(instance: Instance, epoch: int, kernel: int
                 ) -> dict[tuple[int, int], list[int]]:
    # the blocks the protocol names: with `blocks=B` and no `blocks` statement the top
    # level is one program run by every CTA together (`KernelInst.logical_blocks`)
    grid = instance.kernels[kernel].logical_blocks if kernel < len(instance.kernels) else 1
    found: dict[tuple[int, int], list[int]] = {
        (r, b): [] for r in range(instance.nranks) for b in range(grid)}
    for rank, ops in enumerate(instance.ranks):
        for op in ops:
            if op.kind is OpKind.BARRIER and op.kernel == kernel and op.epoch == epoch:
                found.setdefault((rank, op.issuer.block), []).append(op.index)
    return found


def _barriers(sk: Skeleton) -> None:
    """The k-th barrier of every (rank, block) of a kernel's launch joins; extra ones never
    return."""
    serial = 0
    for epoch, kernel in _kernels_with_barriers(sk.instance):
        found = _barrier_ops(sk.instance, epoch, kernel)
        common = min(len(v) for v in found.values())
        for k in range(common):
            join = sk.add_event(EventKind.JOIN, -1, serial, -1, ("barrier",))
            serial += 1
            for (rank, _), idx in found.items():
                sk.add_edge(sk.ids[(EventKind.ISSUE, rank, idx[k])], join, EdgeKind.BARRIER)
                sk.add_edge(join, sk.ids[(EventKind.DONE, rank, idx[k])], EdgeKind.BARRIER)
        extra = [(rank, i) for (rank, _), idx in found.items() for i in idx[common:]]
        for rank, i in extra:
            sk.blocked.add(sk.ids[(EventKind.DONE, rank, i)])
        if extra and epoch == 0:  # every launch has the same mismatch: report one
            counts = {k: len(v) for k, v in found.items()}
            sk.mismatches.append(BarrierMismatch(kernel, counts, extra))


def _kernels_with_barriers(instance: Instance) -> Iterator[tuple[int, int]]:
    kernels = {(op.epoch, op.kernel) for ops in instance.ranks for op in ops
               if op.kind is OpKind.BARRIER}
    yield from sorted(kernels)


__all__ = ["BarrierMismatch", "QueueKey", "QueueOps", "Skeleton", "build_skeleton"]
