"""What the simulator derives once from an instance, before any schedule runs.

* Processes: one per issuer `(rank, Issuer)` (its op instances in order), one per
  engine queue `(rank, peer, queue)` and one host process per rank that ends each of
  that rank's launches (its caller's step between two launches).
* Posting groups: the lanes of one warp that call one `put`/`get` together post in
  one step; their copies toward one `(peer, queue)` signal once, after the last
  copy, unless `signal_per_copy` (MORI's `SameQueue` grouping, per destination).
* Expected values, computed here from the instance by the pairing rule of the
  language spec (section 6), independently of the checker: the k-th wait of `me`
  on `(src, q)` expects k and the last one the epoch's total; a wait with nothing
  left to pair never passes.  `wait_count` without `expected` waits for every byte
  counted to `me` in the epoch.  Each launch adds the epoch's total, except on a
  counter its rank resets with `reset_count` (it starts from zero again).
* Barrier generations: the g-th `barrier()` of a kernel of every issuer that calls it
  meets the g-th of every other; every rank and every block of the kernel's grid takes
  part (a block that never calls it never arrives: the others wait forever).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from ccogen.instantiate.runtime import runtime_inputs
from ccogen.ir.instance import Instance, Issuer, OpInst, RegionInst
from ccogen.ir.nodes import LaunchOrder
from ccogen.ir.opkind import OpKind
from ccogen.ir.postcondition import check_regions
from ccogen.source import Span

QueueKey = tuple[int, int, int]  # (issuing rank, peer, queue)
SlotKey = tuple[int, int, int]  # (holding rank, sending rank, queue)
CounterKey = tuple[int, str]  # (holding rank, counter name)
OpKey = tuple[int, int]  # (rank, op index)


@dataclass(frozen=True, slots=True)
class TransferSpec:
    """One copy an engine performs: read `src`, write `dst`, then signal/count.

    `op` is the op instance (a lane's own `put` in a posting group) that posted it.
    A `signal` op (a credit) is a transfer without data: `src` and `dst` are None and
    it only signals, in queue order.
    """

    op: OpInst
    queue: QueueKey
    src: RegionInst | None
    dst: RegionInst | None
    remote_slot: SlotKey | None = None
    local_slot: SlotKey | None = None
    counter: CounterKey | None = None

    @property
    def size(self) -> int:
        return self.src.size if self.src is not None else 0

    @property
    def signals(self) -> int:
        """How many atomics follow the copy (signals and the counted add)."""
        return sum(x is not None for x in (self.remote_slot, self.local_slot, self.counter))


@dataclass(frozen=True, slots=True)
class Wait:
    """The condition of one `wait_signal`/`wait_count`: `value(key) >= base + epoch*total`.

    `base` is None when the wait has nothing to pair with: it never passes.
    """

    kind: str  # "slot" or "counter"
    key: SlotKey | CounterKey
    base: int | None
    total: int
    hand: bool  # `expected=` written by hand
    ordinal: int  # this is the k-th wait of its rank on its key (1-based)
    waits: int  # how many waits of its rank on its key
    reset: bool = False  # a counter its rank resets: no epoch offset
    # drawn run-time contents per launch (`Plan.launches`, `_launch_waits`): per launch,
    # its base and total (a counter's bytes follow the launch's counts), the value the
    # wait needs (`levels`) and the increments that have come by the end of it (`arrived`);
    # empty: `base` and `total` every launch
    bases: tuple[int | None, ...] = ()
    totals: tuple[int, ...] = ()
    levels: tuple[int | None, ...] = ()
    arrived: tuple[int, ...] = ()

    def expected(self, epoch: int) -> int | None:
        if self.levels:
            return self.levels[min(epoch, len(self.levels) - 1)]
        if self.base is None:
            return None
        return self.base if self.reset else self.base + epoch * self.total

    def never(self, epoch: int) -> bool:
        """Whether the wait of launch `epoch` needs more than all that comes by its end."""
        need = self.expected(epoch)
        if need is None:
            return True
        if self.arrived:
            return need > self.arrived[min(epoch, len(self.arrived) - 1)]
        return need > (self.total if self.reset else (epoch + 1) * self.total)

    def at(self, epoch: int) -> Wait:
        """The wait with launch `epoch`'s base and total (for messages)."""
        if not self.bases:
            return self
        e = min(epoch, len(self.bases) - 1)
        return replace(self, base=self.bases[e], total=self.totals[e])

    @property
    def source(self) -> tuple[int, int]:
        """The sending rank and queue of a slot (`wait_signal`)."""
        assert self.kind == "slot"
        _, src, queue = cast(SlotKey, self.key)
        return src, queue

    def what(self) -> str:
        if self.kind == "slot":
            src, queue = self.source
            return f"slot [from {src}, queue {queue}]"
        return f"counter `{cast(CounterKey, self.key)[1]}`"


@dataclass(frozen=True, slots=True)
class IssuerProc:
    rank: int
    issuer: Issuer
    ops: tuple[int, ...]  # op indices on `rank`, in program order


@dataclass
class Plan:
    """Static facts for one instance (see the module docstring)."""

    instance: Instance
    issuers: list[IssuerProc]
    queues: list[QueueKey]
    proc_of_op: dict[OpKey, tuple[int, int]]  # -> (process, position in its ops)
    members: dict[OpKey, tuple[int, ...]]  # group leader -> member op indices (leader first)
    leader_of: dict[OpKey, int]  # member -> leader op index
    posts: dict[OpKey, tuple[TransferSpec, ...]]  # group leader -> what it posts
    waits: dict[OpKey, Wait]
    barrier_gen: dict[OpKey, tuple[int, int]]  # barrier op -> (kernel, generation from 1)
    # kernel -> (rank, issuer, barriers per launch): every (rank, block) of its grid takes
    # part, a block that never calls `barrier()` with a count of 0 (it never arrives)
    barrier_parties: dict[int, list[tuple[int, Issuer, int]]]
    queue_index: dict[QueueKey, int] = field(default_factory=dict)
    rank_issuers: list[list[int]] = field(default_factory=list)
    watchers: list[set[int]] = field(default_factory=list)  # proc -> procs its progress may enable
    windows: tuple[tuple[str, int], ...] = ()  # windows and local buffers, in bytes
    init_windows: frozenset[tuple[int, str]] = frozenset()
    buffers: frozenset[str] = frozenset()  # refilled by the caller at every launch
    # a concrete run-time instance: the buffers holding its run-time values, refilled at
    # every launch with that launch's contents (`launch_inputs`; without them the same
    # contents come again, the initial image's)
    runtime_inputs: frozenset[str] = frozenset()
    # the windows holding run-time values that the caller writes before each launch (its
    # `init(...)` inputs, such as a routing table)
    runtime_windows: frozenset[tuple[int, str]] = frozenset()
    # drawn contents per launch: the concrete instance of each launch (same ops, other
    # regions, `expected` values and loaded values; `launches[0]` is `instance`) and the
    # caller's run-time inputs for it (`runtime_inputs` and `runtime_windows` keys)
    launches: tuple[Instance, ...] = ()
    launch_inputs: tuple[Mapping[tuple[int, str], np.ndarray], ...] = ()
    loads: bool = False  # some op runs `load`s before it (`OpInst.loads`)
    counters: tuple[str, ...] = ()
    multi_source: frozenset[tuple[str, object]] = frozenset()  # fed by several queues

    @property
    def nissuers(self) -> int:
        return len(self.issuers)

    host_sync: bool = False  # `between_launches: host_sync`: launches end together
    rank_windows: dict[int, frozenset[str]] = field(default_factory=dict)  # inputs per rank

    @property
    def host(self) -> int:
        """The first host process (rank r's is `host + r`)."""
        return len(self.issuers) + len(self.queues)

    def host_of(self, rank: int) -> int:
        return self.host + rank

    @property
    def nprocs(self) -> int:
        return self.host + self.instance.nranks

    def queue_proc(self, key: QueueKey) -> int:
        return self.nissuers + self.queue_index[key]

    def op(self, key: OpKey) -> OpInst:
        return self.instance.ranks[key[0]][key[1]]

    # the transfers of every other launch (`launch % K`, language reference section 8:
    # the regions rotate; drawn contents per launch: their lengths follow the counts), by
    # the `id` of that launch's instance (`posts` is launch 0's)
    rotated_posts: dict[int, dict[OpKey, tuple[TransferSpec, ...]]] = field(
        default_factory=dict)

    # launch -> its single-launch instance (`at`), filled as launches are asked for
    _at: dict[int, Instance] = field(default_factory=dict, repr=False, compare=False)

    def at(self, epoch: int) -> Instance:
        """The single-launch instance of launch `epoch`: its drawn contents' (`launches`),
        rotated by `launch % K` (looked up once per launch: every step asks)."""
        found = self._at.get(epoch)
        if found is None:
            base = self.launches[min(epoch, len(self.launches) - 1)] if self.launches else \
                self.instance
            found = self._at[epoch] = base.at_launch(epoch)
        return found

    def op_at(self, key: OpKey, epoch: int) -> OpInst:
        """Op `key` as launch `epoch` runs it (its regions, `expected` and loaded values)."""
        return self.at(epoch).ranks[key[0]][key[1]]

    def posts_at(self, key: OpKey, epoch: int) -> tuple[TransferSpec, ...]:
        """The transfers of posting group `key` in launch `epoch`."""
        other = self.at(epoch)
        if other is self.instance:
            return self.posts[key]
        found = self.rotated_posts.get(id(other))
        if found is None:
            found = self.rotated_posts[id(other)] = {
                k: _transfers(other, k, m) for k, m in self.members.items() if k in self.posts}
        return found[key]

    def span(self, key: OpKey) -> Span | None:
        return self.op(key).span


def build_plan(instance: Instance,
               generated: Mapping[OpKey, tuple[int, int]] | None = None,
               launches: Sequence[Instance] = (),
               takes_off: frozenset[OpKey] = frozenset()) -> Plan:
    """The plan of `instance`; `generated` overrides what some waits wait for (a drawn
    instance's static `wait_count`s on run-time counters: `generated_counter_waits`).
    `launches`: the concrete instances of launches 1, 2, ... (drawn contents per launch,
    with the same ops as `instance`, `shape_mismatch`: ValueError otherwise);
    `takes_off`: the waits with a run-time `expected=` (`runtime_expected_waits`)."""
    for other in launches:
        if (where := shape_mismatch(instance, other)) is not None:
            raise ValueError(f"launches of drawn contents differ in their ops: {where}")
    issuers, proc_of_op = _issuer_procs(instance)
    members, leader_of = _groups(instance)
    posts = {k: _transfers(instance, k, m) for k, m in members.items()
             if instance.ranks[k[0]][k[1]].kind.traits.queued}
    queues = sorted({t.queue for specs in posts.values() for t in specs})
    gens, parties = _barriers(instance, issuers)
    plan = Plan(instance=instance, issuers=issuers, queues=queues, proc_of_op=proc_of_op,
                members=members, leader_of=leader_of, posts=posts,
                waits=_waits(instance, posts, generated or {}), barrier_gen=gens,
                barrier_parties=parties)
    plan.queue_index = {q: i for i, q in enumerate(queues)}
    plan.rank_issuers = [[p for p, ip in enumerate(issuers) if ip.rank == r]
                         for r in range(instance.nranks)]
    plan.watchers = _watchers(plan)
    plan.windows = instance.window_sizes + instance.buffer_sizes
    plan.buffers = frozenset(name for name, _ in instance.buffer_sizes)
    plan.loads = any(op.loads for ops in instance.ranks for op in ops)
    plan.init_windows = init_keys((instance, *launches))
    plan.counters = tuple(c.name for c in instance.protocol.counters)
    plan.multi_source = _multi_source(posts)
    plan.host_sync = instance.protocol.between_launches is LaunchOrder.HOST_SYNC
    if launches:
        plan.launches = (instance, *launches)
        plan.waits = _launch_waits(plan, generated or {}, takes_off)
    if instance.runtime == "concrete":
        names = runtime_inputs(instance.protocol)
        plan.runtime_inputs = names & plan.buffers
        plan.runtime_windows = frozenset(k for k in plan.init_windows
                                         if k[1] in names and k[1] not in plan.buffers)
    return plan


def init_keys(instances: Sequence[Instance]) -> frozenset[tuple[int, str]]:
    """The windows and buffers `ensure` reads as the caller's inputs (`init(...)`), in every
    launch of `instances` (`launch % K` included): the caller writes them before a launch."""
    checks = [c for base in instances for i in (base, *base.rotation) for c in i.checks]
    return frozenset((r.rank, r.window) for c in checks
                     for r, init in check_regions(c) if init) | frozenset(
        (x.region.rank, x.region.window) for c in checks for x in c.loads if x.init)


def shape_mismatch(a: Instance, b: Instance) -> str | None:
    """Where the ops of two launches' instances differ in more than their regions,
    `expected` values and loaded values (None: the same ops)."""
    if len(a.checks) != len(b.checks):
        return f"{len(a.checks)} and {len(b.checks)} postconditions"
    for rank, (ops_a, ops_b) in enumerate(zip(a.ranks, b.ranks, strict=True)):
        if len(ops_a) != len(ops_b):
            return f"{len(ops_a)} and {len(ops_b)} op instances on rank {rank}"
        for x, y in zip(ops_a, ops_b, strict=True):
            if _shape(x) != _shape(y):
                return f"op {x.index} of rank {rank} (`{x.kind}`, `{y.kind}`)"
    return None


def _shape(op: OpInst) -> tuple[object, ...]:
    return (op.kind, op.issuer, op.preds, op.peer, op.queue, op.signal, op.group,
            op.counter, op.kernel, op.aggregate, op.lanes_in_group, op.signal_per_copy,
            len(op.loads), len(op.srcs), op.src is None, op.dst is None)


def runtime_expected_waits(symbolic: Instance) -> frozenset[OpKey]:
    """The `wait_count`s with a run-time `expected=` (of the footprint instance of drawn
    ones: the same op indices): the generated code waits for that many bytes and takes
    them off the counter (language reference, "Counted writes with a run-time total")."""
    return frozenset((op.rank, op.index) for ops in symbolic.ranks for op in ops
                     if op.kind is OpKind.WAIT_COUNT and op.expected_rt is not None)


def _launch_waits(plan: Plan, generated: Mapping[OpKey, tuple[int, int]],
                  takes_off: frozenset[OpKey]) -> dict[OpKey, Wait]:
    """Every wait with what it needs in each launch of `plan.launches`.  A wait counts
    every increment of the earlier launches (a counter's bytes of each launch follow its
    counts), but a run-time `expected=` (`takes_off`), whose generated code takes the
    bytes it waited for off the counter: it needs what every earlier such wait on the
    counter took, then its own."""
    per_launch = [plan.waits] + [
        _waits(inst, {k: _transfers(inst, k, plan.members[k]) for k in plan.posts}, generated)
        for inst in plan.launches[1:]]
    out: dict[OpKey, Wait] = {}
    for key, w in plan.waits.items():
        bases = tuple(ws[key].base for ws in per_launch)
        totals = tuple(ws[key].total for ws in per_launch)
        arrived = tuple(t if w.reset else sum(totals[:e + 1]) for e, t in enumerate(totals))
        if key in takes_off:
            levels = _taken_levels(key, w, per_launch, takes_off)
        else:
            levels = tuple(None if b is None else b if w.reset else b + sum(totals[:e])
                           for e, b in enumerate(bases))
        out[key] = replace(w, bases=bases, totals=totals, levels=levels, arrived=arrived)
    return out


def _taken_levels(key: OpKey, w: Wait, per_launch: Sequence[Mapping[OpKey, Wait]],
                  takes_off: frozenset[OpKey]) -> tuple[int | None, ...]:
    """What run-time wait `key` needs in each launch: the bytes every earlier run-time
    wait of its rank on the counter took off (earlier launches, then earlier in program
    order; from zero again after a reset), then its own `expected`."""
    rank = key[0]
    mine = sorted(k for k in takes_off if k[0] == rank and per_launch[0][k].key == w.key)
    levels: list[int | None] = []
    before = 0
    for ws in per_launch:
        if w.reset:
            before = 0
        level: int | None = None
        for k in mine:
            base = ws[k].base
            if k == key:
                level = None if base is None else before + base
            before += base or 0
        levels.append(level)
    return tuple(levels)


# ----------------------------------------------------------------------------- processes


def _issuer_procs(instance: Instance) -> tuple[list[IssuerProc], dict[OpKey, tuple[int, int]]]:
    procs: list[IssuerProc] = []
    proc_of_op: dict[OpKey, tuple[int, int]] = {}
    for rank, ops in enumerate(instance.ranks):
        by_issuer: dict[Issuer, list[int]] = {}
        for op in ops:
            by_issuer.setdefault(op.issuer, []).append(op.index)
        for issuer, indices in by_issuer.items():
            pid = len(procs)
            procs.append(IssuerProc(rank, issuer, tuple(indices)))
            for pos, index in enumerate(indices):
                proc_of_op[(rank, index)] = (pid, pos)
    return procs, proc_of_op


def _watchers(plan: Plan) -> list[set[int]]:
    """For each issuer: the issuers whose next op may become ready when it advances."""
    watchers: list[set[int]] = [set() for _ in range(plan.nprocs)]
    for (rank, index), (proc, _) in plan.proc_of_op.items():
        op = plan.instance.ranks[rank][index]
        for pred in op.preds:
            other = plan.proc_of_op[(rank, pred)][0]
            if other != proc:
                watchers[other].add(proc)
        leader = plan.leader_of.get((rank, index))
        if leader is not None and leader != index:
            watchers[proc].add(plan.proc_of_op[(rank, leader)][0])
    return watchers


# ----------------------------------------------------------------------------- posting groups


def _groups(instance: Instance) -> tuple[dict[OpKey, tuple[int, ...]], dict[OpKey, int]]:
    """Posting groups of `put`/`get` run together; every other op instance runs alone."""
    members: dict[OpKey, tuple[int, ...]] = {}
    leader_of: dict[OpKey, int] = {}
    for rank, ops in enumerate(instance.ranks):
        by_group: dict[int, list[int]] = defaultdict(list)
        for op in ops:
            by_group[op.group].append(op.index)
        for indices in by_group.values():
            together = ops[indices[0]].kind.traits.queued
            for chunk in [indices] if together else [[i] for i in indices]:
                members[(rank, chunk[0])] = tuple(chunk)
                for index in chunk:
                    leader_of[(rank, index)] = chunk[0]
    return members, leader_of


def _transfers(instance: Instance, leader: OpKey, member_ops: tuple[int, ...]
               ) -> tuple[TransferSpec, ...]:
    rank = leader[0]
    ops = [instance.ranks[rank][i] for i in member_ops]
    last_of_partition: dict[tuple[int | None, int | None], int] = {}
    for op in ops:
        last_of_partition[(op.peer, op.queue)] = op.index
    return tuple(_spec(op, op.signal_per_copy or last_of_partition[(op.peer, op.queue)]
                       == op.index) for op in ops)


def _spec(op: OpInst, signals: bool) -> TransferSpec:
    assert op.peer is not None and op.queue is not None
    assert (op.src is not None and op.dst is not None) or not op.kind.traits.transfer
    queue = (op.rank, op.peer, op.queue)
    remote = (op.peer, op.rank, op.queue) if signals and op.signal.remote else None
    local = (op.rank, op.rank, op.queue) if signals and op.signal.local else None
    counter = (op.dst.rank, op.counter) if op.counter is not None and op.dst else None
    return TransferSpec(op=op, queue=queue, src=op.src, dst=op.dst, remote_slot=remote,
                        local_slot=local, counter=counter)




# ----------------------------------------------------------------------------- expected values


def generated_counter_waits(symbolic: Instance) -> dict[OpKey, tuple[int, int]]:
    """(base, added per epoch) of every hand-written static `wait_count(expected=)` on a
    counter that receives run-time bytes, as the generated code waits for it: the static
    footprint stands for the epoch's bytes in the epoch offset (none when the rank resets
    the counter).  An omitted `expected=` keeps the language's meaning, every byte counted
    in the epoch (what `mori-sdma` generates; the byte-total targets refuse it, E035).
    The checker refuses the hand-written ones (E035); the simulator runs what the
    generated code would do, so a drawn contents that brings fewer bytes hangs here too.
    `symbolic` is the footprint instance of the drawn ones (the same op indices)."""
    varying: dict[CounterKey, int] = defaultdict(int)
    footprint: dict[CounterKey, int] = defaultdict(int)
    for ops in symbolic.ranks:
        for op in ops:
            if op.kind is OpKind.PUT and op.counter is not None and op.dst is not None:
                key = (op.dst.rank, op.counter)
                footprint[key] += op.dst.size
                bounds = op.dst.runtime
                if bounds is not None and not isinstance(bounds[1] - bounds[0], int):  # type: ignore[operator]
                    varying[key] += 1
    out: dict[OpKey, tuple[int, int]] = {}
    for rank, ops in enumerate(symbolic.ranks):
        resets = {op.counter for op in ops if op.kind is OpKind.RESET_COUNT}
        for op in ops:
            if op.kind is not OpKind.WAIT_COUNT or op.expected_rt is not None:
                continue
            key = (rank, op.counter or "")
            if varying.get(key) and op.expected is not None:
                out[(rank, op.index)] = (op.expected,
                                         0 if op.counter in resets else footprint[key])
    return out


def _waits(instance: Instance, posts: dict[OpKey, tuple[TransferSpec, ...]],
           generated: Mapping[OpKey, tuple[int, int]]) -> dict[OpKey, Wait]:
    totals: dict[tuple[str, SlotKey | CounterKey], int] = defaultdict(int)
    for specs in posts.values():
        for t in specs:
            for slot in (t.remote_slot, t.local_slot):
                if slot is not None:
                    totals[("slot", slot)] += 1
            if t.counter is not None:
                totals[("counter", t.counter)] += t.size
    waits: dict[OpKey, Wait] = {}
    for rank, ops in enumerate(instance.ranks):
        waits.update(_rank_waits(rank, ops, totals))
    for key, (base, per_epoch) in generated.items():
        w = waits.get(key)
        if w is not None and w.kind == "counter":
            waits[key] = Wait(w.kind, w.key, base, per_epoch, w.hand, w.ordinal, w.waits)
    return waits


def _rank_waits(rank: int, ops: tuple[OpInst, ...],
                totals: dict[tuple[str, SlotKey | CounterKey], int]) -> dict[OpKey, Wait]:
    keyed: dict[tuple[str, SlotKey | CounterKey], list[OpInst]] = defaultdict(list)
    for op in ops:
        if op.kind is OpKind.WAIT_SIGNAL:
            assert op.peer is not None and op.queue is not None
            keyed[("slot", (rank, op.peer, op.queue))].append(op)
        elif op.kind is OpKind.WAIT_COUNT:
            assert op.counter is not None
            keyed[("counter", (rank, op.counter))].append(op)
    resets = {(rank, op.counter) for op in ops if op.kind is OpKind.RESET_COUNT}
    out: dict[OpKey, Wait] = {}
    for (kind, key), waits in keyed.items():
        total = totals.get((kind, key), 0)
        for k, op in enumerate(waits, start=1):
            base = op.expected if op.expected is not None else _paired(kind, k, len(waits), total)
            out[(rank, op.index)] = Wait(kind, key, base, total, op.expected is not None, k,
                                         len(waits), key in resets)
    return out


def _paired(kind: str, k: int, n: int, total: int) -> int | None:
    """Spec section 6: the k-th wait expects k, the last the total; none left: never."""
    if kind == "counter":
        return total
    if k > total:
        return None
    return total if k == n else k


def _multi_source(posts: dict[OpKey, tuple[TransferSpec, ...]]) -> frozenset[tuple[str, object]]:
    """Slots and counters that increments from several queues feed."""
    sources: dict[tuple[str, object], set[QueueKey]] = defaultdict(set)
    for specs in posts.values():
        for t in specs:
            for kind, key in (("slot", t.remote_slot), ("slot", t.local_slot),
                              ("counter", t.counter)):
                if key is not None:
                    sources[(kind, key)].add(t.queue)
    return frozenset(k for k, queues in sources.items() if len(queues) > 1)


# ----------------------------------------------------------------------------- barriers


def _barriers(instance: Instance, issuers: list[IssuerProc]
              ) -> tuple[dict[OpKey, tuple[int, int]], dict[int, list[tuple[int, Issuer, int]]]]:
    gens: dict[OpKey, tuple[int, int]] = {}
    parties: dict[int, list[tuple[int, Issuer, int]]] = {}
    for ip in issuers:
        by_kernel: dict[int, list[int]] = defaultdict(list)
        for i in ip.ops:
            op = instance.ranks[ip.rank][i]
            if op.kind is OpKind.BARRIER:
                by_kernel[op.kernel].append(i)
        for kernel, barriers in by_kernel.items():
            for g, index in enumerate(barriers, start=1):
                gens[(ip.rank, index)] = (kernel, g)
            parties.setdefault(kernel, []).append((ip.rank, ip.issuer, len(barriers)))
    for kernel, found in parties.items():
        present = {(rank, issuer.block) for rank, issuer, _ in found}
        grid = instance.kernels[kernel].logical_blocks  # the blocks the protocol names
        found += [(r, Issuer(block=b), 0) for r in range(instance.nranks) for b in range(grid)
                  if (r, b) not in present]
    return gens, parties
