"""Signal and counter matching: which increments reach which slot, what each wait expects.

Static facts of an `Instance`, shared by the happens-before graph, the checks and
the code generators (no ordering is needed to compute them):

*Increments.*  A signal slot is `(receiver, sender, queue)`.  A `put`/`get` with
`signal="remote"` (or `"both"`) adds one to the peer's slot `[me, queue]`; with
`signal="local"` (or `"both"`) to the issuer's own slot `[me, queue]`.  Lanes of one
posting group (`OpInst.group`) signal once per `put` call and per `(peer, queue)`
they target (MORI: lanes that share a queue are grouped, one signal after all of
their copies), unless `signal_per_copy=True`, which signals once per lane.  The
local slot `[me, queue]` is one per queue, so lanes of a group sending to k peers
with `signal="local"` add k to it.  A
counted put (`count=C`) adds its payload bytes to the peer's counter `C`.

*Expected values* (docs/reference/language.md §6).  Waits of one rank on one key (slot or
counter) are numbered 1, 2, ... in the rank's program order.  A `wait_signal`
without `expected` numbered k expects k, the last one the epoch total, and a wait
numbered past the total has nothing to pair with (`expected` None: E021).  A
`wait_count` without `expected` waits for every byte counted to the rank's counter
in the epoch.  Hand-written values are kept as written (the checks judge them).
The generated code waits for `expected + epoch * total` in epoch `epoch` (slots are
never reset); a counter that the protocol resets with `reset_count` gets no epoch
offset.

*Thread modes.*  A posting group of lanes is `same_queue` when every lane of it
targets one `(peer, queue)`, else `independent` (MORI `ccoSdmaThreadSameQueue`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ccogen.ir.instance import Instance, IssuerLevel, OpInst
from ccogen.ir.nodes import Mode, SignalKind
from ccogen.ir.opkind import OpKind

SlotKey: TypeAlias = tuple[int, int, int]
"""`(receiver rank, sender rank, queue)`: the slot `[sender, queue]` on the receiver."""
CounterKey: TypeAlias = tuple[int, str]
"""`(rank, counter name)`."""
OpKey: TypeAlias = tuple[int, int]
"""`(rank, op index)`."""


@dataclass(frozen=True, slots=True)
class Increment:
    """One increment of a signal slot, made by the op(s) `ops` on rank `sender`.

    Several ops for a posting group of lanes that signals once; `local` for the
    issuer's own slot.  `per_copy` when `signal_per_copy=True` split the group.
    """

    slot: SlotKey
    sender: int
    ops: tuple[int, ...]
    local: bool
    per_copy: bool = False
    group: int = 0  # the posting group of the op(s) on `sender`

    @property
    def first(self) -> int:
        return self.ops[0]


@dataclass(frozen=True, slots=True)
class CountedWrite:
    """A counted put by `sender` (op `op`) adding `nbytes` to `counter`."""

    counter: CounterKey
    sender: int
    op: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class WaitMatch:
    """What one `wait_signal` (kind `signal`) or `wait_count` (kind `count`) expects.

    `ordinal` is k for the k-th wait of the rank on `key`; `expected` is the value
    per epoch (None: nothing left to pair with); `total` is what the epoch sends to
    `key` (increments, or bytes for a counter).
    """

    rank: int
    op: int
    kind: Literal["signal", "count"]
    key: SlotKey | CounterKey
    ordinal: int
    handwritten: bool
    expected: int | None
    total: int
    last: bool


@dataclass(frozen=True, slots=True)
class ExpectedValues:
    """The values the generated code waits for (what the code generators read)."""

    waits: Mapping[OpKey, int]
    slot_totals: Mapping[SlotKey, int]
    counter_totals: Mapping[CounterKey, int]
    reset_counters: frozenset[CounterKey]

    def of_wait(self, op: OpInst) -> tuple[int, int] | None:
        """(expected in epoch 0, added per epoch) of a wait; None if it pairs with nothing."""
        base = self.waits.get((op.rank, op.index))
        if base is None:
            return None
        if op.kind is OpKind.WAIT_COUNT:
            assert op.counter is not None
            key: CounterKey = (op.rank, op.counter)
            return base, 0 if key in self.reset_counters else self.counter_totals.get(key, 0)
        assert op.peer is not None and op.queue is not None
        return base, self.slot_totals.get((op.rank, op.peer, op.queue), 0)

    def at_epoch(self, rank: int, op: int, key: SlotKey | CounterKey, epoch: int) -> int:
        """`expected + epoch * total` for the wait `(rank, op)` on `key` in epoch `epoch`."""
        base = self.waits[(rank, op)]
        if isinstance(key[1], str):
            if key in self.reset_counters:
                return base
            return base + epoch * self.counter_totals.get(key, 0)
        return base + epoch * self.slot_totals.get(key, 0)


@dataclass(frozen=True, slots=True)
class Matching:
    """Every static signal and counter fact of one instance (see the module docstring)."""

    increments: Mapping[SlotKey, tuple[Increment, ...]]
    counted: Mapping[CounterKey, tuple[CountedWrite, ...]]
    waits: Mapping[OpKey, WaitMatch]
    expected: ExpectedValues
    modes: Mapping[tuple[int, int], Mode]
    signal_of: Mapping[tuple[int, int, bool], Increment]

    def mode_of(self, op: OpInst) -> Mode | None:
        """The inferred thread mode of a lane's put/get (None for warps and blocks)."""
        return self.modes.get((op.rank, op.group))

    def incs(self, w: WaitMatch) -> tuple[Increment, ...]:
        """The increments of the slot a `wait_signal` waits on (empty for `wait_count`)."""
        return self.increments.get(w.key, ()) if w.kind == "signal" else ()  # type: ignore[arg-type]

    def writes(self, w: WaitMatch) -> tuple[CountedWrite, ...]:
        """The counted writes to the counter a `wait_count` waits on (empty otherwise)."""
        return self.counted.get(w.key, ()) if w.kind == "count" else ()  # type: ignore[arg-type]

    def slot_total(self, slot: SlotKey) -> int:
        return len(self.increments.get(slot, ()))

    def counter_total(self, key: CounterKey) -> int:
        return sum(w.nbytes for w in self.counted.get(key, ()))

    def counts_groups(self, w: WaitMatch) -> bool:
        """The last wait on a slot fed by `signal_per_copy` lanes expects one per group.

        Such a wait returns after the first copies: E023 (the reverse of counting lanes).
        """
        incs = self.incs(w)
        if not (w.kind == "signal" and w.handwritten and w.last and w.expected is not None
                and w.expected < w.total and any(i.per_copy for i in incs)):
            return False
        return w.expected == len({(i.sender, i.group) for i in incs})


# ============================================================================= building


def match(instance: Instance) -> Matching:
    """Compute the increments, counted writes, expected values and modes of `instance`."""
    increments, signal_of = increments_of(instance)
    counted = counted_writes(instance)
    waits = _waits(instance, increments, counted)
    totals = {slot: len(incs) for slot, incs in increments.items()}
    bytes_ = {key: sum(w.nbytes for w in ws) for key, ws in counted.items()}
    expected = ExpectedValues(
        waits={k: w.expected for k, w in waits.items() if w.expected is not None},
        slot_totals=totals, counter_totals=bytes_, reset_counters=_resets(instance))
    return Matching(increments=increments, counted=counted, waits=waits, expected=expected,
                    modes=_modes(instance), signal_of=signal_of)


def _signal_targets(op: OpInst) -> Iterable[tuple[SlotKey, bool]]:
    assert op.peer is not None and op.queue is not None
    if op.signal.remote:
        yield (op.peer, op.rank, op.queue), False
    if op.signal.local:
        yield (op.rank, op.rank, op.queue), True


def _grouped(op: OpInst) -> bool:
    return (op.issuer.level is IssuerLevel.LANE and op.lanes_in_group > 1
            and not op.signal_per_copy)


def increments_of(instance: Instance) -> tuple[dict[SlotKey, tuple[Increment, ...]],
                                                dict[tuple[int, int, bool], Increment]]:
    """Every signal increment per slot, and the increment each signalling op is part of."""
    members: dict[tuple[object, ...], list[int]] = {}
    flags: dict[tuple[object, ...], tuple[SlotKey, int, bool, bool, int]] = {}
    signalling = {k for k in OpKind if k.traits.signals}
    for rank, ops in enumerate(instance.ranks):
        for op in ops:
            if op.kind not in signalling or op.signal is SignalKind.NONE or op.peer is None \
                    or op.queue is None:
                continue  # (an op without a signal has no target: `_signal_targets`)
            grouped = _grouped(op)
            for slot, local in _signal_targets(op):
                # a group signals once per `(peer, queue)` it targets, for the local
                # slot too: MORI groups lanes by queue key `peer * n + queue`
                # (mori/cco/cco.hpp, ccoSdmaDispatchPut), whatever the signal's slot
                key: tuple[object, ...] = ((rank, op.group, op.peer, slot, local)
                                           if grouped else (rank, op.index, slot, local))
                found = members.get(key)
                if found is None:
                    members[key] = [op.index]
                else:
                    found.append(op.index)
                flags[key] = (slot, rank, local, op.signal_per_copy, op.group)
    by_slot: dict[SlotKey, list[Increment]] = {}
    signal_of: dict[tuple[int, int, bool], Increment] = {}
    for key, ops_ in members.items():
        slot, sender, local, per_copy, group = flags[key]
        inc = Increment(slot=slot, sender=sender, ops=tuple(ops_), local=local,
                        per_copy=per_copy, group=group)
        by_slot.setdefault(slot, []).append(inc)
        for i in ops_:
            signal_of[(sender, i, local)] = inc
    ordered = {s: tuple(sorted(incs, key=lambda x: x.first)) for s, incs in by_slot.items()}
    return ordered, signal_of


def counted_writes(instance: Instance) -> dict[CounterKey, tuple[CountedWrite, ...]]:
    """The counted writes to every `(rank, counter)`."""
    found: dict[CounterKey, list[CountedWrite]] = {}
    for rank, ops in enumerate(instance.ranks):
        for op in ops:
            if op.kind is OpKind.PUT and op.counter is not None and op.peer is not None:
                assert op.dst is not None
                key = (op.peer, op.counter)
                found.setdefault(key, []).append(
                    CountedWrite(counter=key, sender=rank, op=op.index, nbytes=op.dst.size))
    return {k: tuple(v) for k, v in found.items()}


def _wait_key(op: OpInst) -> SlotKey | CounterKey | None:
    if op.kind is OpKind.WAIT_SIGNAL and op.peer is not None and op.queue is not None:
        return (op.rank, op.peer, op.queue)
    if op.kind is OpKind.WAIT_COUNT and op.counter is not None:
        return (op.rank, op.counter)
    return None


def _waits(instance: Instance, increments: Mapping[SlotKey, tuple[Increment, ...]],
           counted: Mapping[CounterKey, tuple[CountedWrite, ...]]) -> dict[OpKey, WaitMatch]:
    by_key: dict[SlotKey | CounterKey, list[OpInst]] = {}
    for ops in instance.ranks:
        for op in ops:
            key = _wait_key(op)
            if key is not None:
                by_key.setdefault(key, []).append(op)
    result: dict[OpKey, WaitMatch] = {}
    for key, waits in by_key.items():
        if isinstance(key[1], str):
            total = sum(w.nbytes for w in counted.get(key, ()))
        else:
            total = len(increments.get(key, ()))
        for k, op in enumerate(waits, start=1):
            result[(op.rank, op.index)] = _one_wait(op, key, k, k == len(waits), total)
    return result


def _one_wait(op: OpInst, key: SlotKey | CounterKey, k: int, last: bool,
              total: int) -> WaitMatch:
    kind: Literal["signal", "count"] = "signal" if op.kind is OpKind.WAIT_SIGNAL else "count"
    if op.expected is not None:
        expected: int | None = op.expected
    elif kind == "count":
        expected = total
    elif k > total:
        expected = None
    else:
        expected = total if last else k
    return WaitMatch(rank=op.rank, op=op.index, kind=kind, key=key, ordinal=k,
                     handwritten=op.expected is not None, expected=expected, total=total,
                     last=last)


def _resets(instance: Instance) -> frozenset[CounterKey]:
    return frozenset((op.rank, op.counter) for ops in instance.ranks for op in ops
                     if op.kind is OpKind.RESET_COUNT and op.counter is not None)


def _modes(instance: Instance) -> dict[tuple[int, int], Mode]:
    targets: dict[tuple[int, int], set[tuple[int | None, int | None]]] = {}
    for rank, ops in enumerate(instance.ranks):
        for op in ops:
            if op.kind.traits.queued and op.issuer.level is IssuerLevel.LANE:
                targets.setdefault((rank, op.group), set()).add((op.peer, op.queue))
    return {key: Mode.SAME_QUEUE if len(t) == 1 else Mode.INDEPENDENT
            for key, t in targets.items()}


__all__ = ["CountedWrite", "CounterKey", "ExpectedValues", "Increment", "Matching", "OpKey",
           "SlotKey", "WaitMatch", "counted_writes", "increments_of", "match"]
