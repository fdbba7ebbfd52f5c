"""MORI SDMA ring and queue limits of amd-mori 1.2.4 (E015, E029): only with `--target mori-sdma`.

Requires: an instance (queues assigned).  Guarantees, when it reports nothing on
`mori-sdma`:

* E029: no `commit` batch (the `aggregate=True` puts/gets one rank posts to one
  `(peer, queue)` since the previous `commit` there) reserves more of the SDMA ring than
  it holds.  The ring is `CCO_SDMA_QUEUE_SIZE` bytes in 32-byte units; a put takes one
  unit for its copy and one per signal (both signals: 3), a group of lanes on one
  queue one per lane and one per signal of the group (`ccoSdmaGroupBytes`).
  `ReserveSlot` spins while the reserved bytes exceed the ring past the engine's read
  pointer, and the engine cannot read past packets nobody rang: the op that crosses
  the ring size spins forever.
* E015: no queue has an issuer with lanes in `ccoSdmaThreadIndependent` mode (lanes of
  one wave posting to several queues) while another wave posts on one of those queues
  at the same time.  The wave's lanes reserve on their queues in one step and spin in
  lockstep on each queue's in-order commit chain: when another wave's reservation on a
  second queue interleaves, each wave waits for the other's commit (amd-mori 1.2.4;
  fixed after it).  Two waves committing one queue at once is E028.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import IssuerLevel, OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._shared import Findings, ProgramOrder, plural, target_caps
from ccogen.passes._transfers import PerfIssuer, perf_issuer
from ccogen.passes.base import Pass, PassContext
from ccogen.targets.mori_sdma import SDMA_RING_UNITS, SDMA_UNIT_BYTES

_MAX_PROBES = 64  # ops of the other wave probed for concurrency (bounds the cost)


@dataclass(frozen=True)
class CheckSdmaQueues(Pass):
    """SDMA ring overflow by one commit batch (E029); independent lanes on shared queues (E015)."""

    name: ClassVar[str] = "check-sdma-queues"
    codes: ClassVar[tuple[str, ...]] = ("E015", "E029")

    def run(self, ctx: PassContext) -> None:
        if ring_units(ctx) is None:
            return
        findings = Findings(ctx)
        for ops in ctx.instance.ranks:
            _ring(ops, findings)
            _independent(ops, findings)
        findings.flush()


# ============================================================================= E029


def units(op: OpInst, grouped_with: int) -> int:
    """Ring units one op reserves: its copy, plus its group's signals once (`grouped_with`
    is its position in its posting group on its queue, 0 for the first)."""
    signals = int(op.signal.local) + int(op.signal.remote or op.counter is not None)
    if op.issuer.level is IssuerLevel.LANE and op.lanes_in_group > 1 and not op.signal_per_copy:
        return 1 + (signals if grouped_with == 0 else 0)
    return 1 + signals


def batch_units(batch: Sequence[OpInst]) -> int:
    """The ring units one batch of aggregate ops on one queue reserves."""
    groups: set[int] = set()
    total = 0
    for op in batch:
        total += units(op, 1 if op.group in groups else 0)
        groups.add(op.group)
    return total


def ring_units(ctx: PassContext) -> int | None:
    """The SDMA ring's units on `mori-sdma`, None elsewhere."""
    caps = target_caps(ctx)
    return None if caps is None else caps.sdma_ring_units


def _ring(ops: Sequence[OpInst], findings: Findings) -> None:
    pending: dict[tuple[int | None, int | None], list[OpInst]] = defaultdict(list)
    used: dict[tuple[int | None, int | None], int] = defaultdict(int)
    groups: dict[tuple[int | None, int | None], set[int]] = defaultdict(set)
    reported: set[tuple[int | None, int | None]] = set()
    for op in ops:
        key = (op.peer, op.queue)
        if op.kind is OpKind.COMMIT:
            pending.pop(key, None)
            used.pop(key, None)
            groups.pop(key, None)
            reported.discard(key)
            continue
        if not (op.kind.traits.queued and op.aggregate):
            continue
        first = op.group not in groups[key]
        groups[key].add(op.group)
        used[key] += units(op, 0 if first else 1)
        pending[key].append(op)
        if used[key] > SDMA_RING_UNITS and key not in reported:
            reported.add(key)
            _report_ring(op, pending[key], used[key], findings)


def _report_ring(op: OpInst, batch: list[OpInst], used: int, findings: Findings) -> None:
    n = len(batch)
    per = units(batch[0], 0)
    findings.add(error(
        "E029", "an aggregate batch reserves more of the SDMA ring than it holds: the "
        "reservation spins forever", op.span,
        f"the {plural(n, 'aggregate op')} posted on queue {op.queue} toward rank {op.peer} "
        f"since the last `commit` take {used} of the ring's {SDMA_RING_UNITS} units here",
        secondary=[(batch[0].span, f"the batch starts here ({per} units an op)")]
        if batch[0].span != op.span else [],
        notes=(f"the ring holds {SDMA_RING_UNITS * SDMA_UNIT_BYTES // 1024} KiB in "
               f"{SDMA_UNIT_BYTES}-byte units (CCO_SDMA_QUEUE_SIZE, mori/cco/cco.hpp): a copy "
               "takes one unit, each signal one more; a reservation past the ring waits for "
               "the engine to read, and the engine reads nothing nobody rang",),
        help="`commit` the batch before it fills the ring (every 8-16 ops is the doorbell "
             "sweet spot, W105), or post fewer signals per op"), op.rank)


# ============================================================================= E015


def independent_conflicts(ops: Sequence[OpInst]) -> list[tuple[OpInst, OpInst]]:
    """(lane op posting to several queues, another wave's concurrent op on its queue)."""
    order = ProgramOrder(ops)
    by_queue: dict[tuple[int, int | None, int | None], dict[PerfIssuer, list[OpInst]]] = \
        defaultdict(lambda: defaultdict(list))
    spread: dict[tuple[int, int], set[tuple[int | None, int | None]]] = defaultdict(set)
    for op in ops:
        if not op.kind.traits.queued or op.queue is None:
            continue
        by_queue[(op.kernel, op.peer, op.queue)][perf_issuer(op.issuer)].append(op)
        if op.issuer.level is IssuerLevel.LANE:
            spread[(op.rank, op.group)].add((op.peer, op.queue))
    seen: set[tuple[object, ...]] = set()
    out: list[tuple[OpInst, OpInst]] = []
    for op in ops:
        if (op.issuer.level is not IssuerLevel.LANE or op.queue is None
                or len(spread[(op.rank, op.group)]) < 2):
            continue  # lanes on one queue (same-queue mode)
        for who, others in by_queue[(op.kernel, op.peer, op.queue)].items():
            if who == perf_issuer(op.issuer):
                continue
            other = next((o for o in others[:_MAX_PROBES]
                          if order.concurrent(o.index, op.index)), None)
            key = (op.span, who, op.peer, op.queue)
            if other is not None and key not in seen:
                seen.add(key)
                out.append((op, other))
    return out


def _independent(ops: Sequence[OpInst], findings: Findings) -> None:
    for op, other in independent_conflicts(ops):
        _report_independent(op, other, findings)


def _report_independent(op: OpInst, other: OpInst, findings: Findings) -> None:
    findings.add(error(
        "E015", "lanes posting to several queues share a queue with another wave at the "
        "same time: the two waves can wait for each other forever", op.span,
        f"lanes of {op.issuer} post to several queues (independent mode), queue "
        f"{op.queue} toward rank {op.peer} among them",
        secondary=[(other.span, f"{other.issuer} posts on queue {other.queue} meanwhile")],
        notes=("a wave's lanes reserve on each of their queues and spin together on each "
               "queue's in-order commit chain (ccoSdmaThreadIndependent, mori/cco/cco.hpp "
               "submitPacket); when another wave's reservation on a second queue comes "
               "between, each wave waits for the other's commit (amd-mori 1.2.4, the version "
               "ccogen builds against; one issuing wave per queue avoids it)",),
        help="give each wave its own queues (`queues auto`, or `queue=` from the warp index), "
             "make the lanes of each wave post to one queue, or order the waves (a `barrier` "
             "or a wait) before they share a queue"), op.rank)


__all__ = ["CheckSdmaQueues", "batch_units", "independent_conflicts", "ring_units", "units"]
