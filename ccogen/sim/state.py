"""The simulated machine's state: control state (cheap to clone) and memory (real bytes).

Control state, per schedule: each issuer's position in its ops, which op instances
of this epoch have been issued, signal slots per `(holder, sender, queue)`,
counters, barrier arrivals, the FIFO of every engine queue with how far it has been
rung and executed, and the vector clocks of the race detector (`race.HB`).

Memory: every window of every rank as a numpy `uint8` array, filled with seeded
random bytes in 1..255 (never zero, so that a byte that was never written cannot
pass for one that was).  Windows that nothing writes are shared with the initial
image instead of copied.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ccogen.ir.instance import RegionInst
from ccogen.sim.plan import CounterKey, Plan, SlotKey, TransferSpec

WindowKey = tuple[int, str]  # (rank, window)


@dataclass(frozen=True, slots=True)
class Xfer:
    """A posted transfer: `spec` posted by process `poster` in `epoch`."""

    id: int
    spec: TransferSpec
    epoch: int
    poster: int
    pieces: tuple[tuple[int, int], ...]  # byte offsets [a, b) within the regions
    after: tuple[int, ...] = ()  # transfers a `fence` makes land before this one lands
    slot: int = 0  # its position in its queue

    @property
    def steps(self) -> int:
        """Reads, writes, then the finishing step (signals, count, completion)."""
        return 2 * len(self.pieces) + 1


@dataclass(slots=True)
class QState:
    """One engine queue: transfers in post order; `rung` of them rung; `head` running."""

    items: list[int] = field(default_factory=list)
    rung: int = 0
    head: int = 0
    phase: int = 0  # step of the head transfer

    def copy(self) -> QState:
        return QState(list(self.items), self.rung, self.head, self.phase)


@dataclass(slots=True)
class State:
    """Control state of one schedule (see the module docstring).

    Launches are per rank (`epochs[r]`): a rank starts its next launch as soon as its own
    caller's step ran, whatever its peers are doing.
    """

    epochs: list[int]
    pcs: list[int]
    phase: list[int]
    done: list[bytearray]
    queues: list[QState]
    slots: dict[SlotKey, int] = field(default_factory=dict)
    counters: dict[CounterKey, int] = field(default_factory=dict)
    # (launch, kernel, generation) -> arrivals
    barrier: dict[tuple[int, int, int], int] = field(default_factory=dict)
    xfers: list[Xfer] = field(default_factory=list)
    landed: dict[object, list[tuple[int, int]]] = field(default_factory=dict)  # (value, xid)
    finished: list[int] = field(default_factory=list)  # per rank: issuers at the end of its launch
    over: bool = False  # every rank's caller ended its last launch

    @property
    def epoch(self) -> int:
        """The launch the slowest rank is in."""
        return min(self.epochs)

    @classmethod
    def initial(cls, plan: Plan) -> State:
        n = plan.nissuers
        nranks = plan.instance.nranks
        return cls(epochs=[0] * nranks, pcs=[0] * n, phase=[0] * n,
                   done=[bytearray(len(ops)) for ops in plan.instance.ranks],
                   queues=[QState() for _ in plan.queues],
                   finished=[sum(1 for p in plan.rank_issuers[r] if not plan.issuers[p].ops)
                             for r in range(nranks)])

    def copy(self) -> State:
        return State(list(self.epochs), list(self.pcs), list(self.phase),
                     [bytearray(d) for d in self.done], [q.copy() for q in self.queues],
                     dict(self.slots), dict(self.counters), dict(self.barrier),
                     list(self.xfers), {k: list(v) for k, v in self.landed.items()},
                     list(self.finished), self.over)

    def in_flight(self) -> bool:
        """Whether some rung transfer has not finished."""
        return any(q.head < q.rung for q in self.queues)

    def unrung(self) -> list[int]:
        """Transfers posted but never rung (aggregate ops not committed)."""
        return [x for q in self.queues for x in q.items[q.rung:]]


# ----------------------------------------------------------------------------- memory


def pieces(size: int, count: int) -> tuple[tuple[int, int], ...]:
    """Split `size` bytes into at most `count` nearly equal pieces."""
    n = max(1, min(count, size))
    bounds = [size * i // n for i in range(n + 1)]
    return tuple((bounds[i], bounds[i + 1]) for i in range(n))


class Memory:
    """Every window of every rank as real bytes."""

    def __init__(self, arrays: dict[WindowKey, np.ndarray], written: frozenset[WindowKey]
                 ) -> None:
        self.arrays = arrays
        self.written = written

    @classmethod
    def fresh(cls, image: dict[WindowKey, np.ndarray], written: frozenset[WindowKey]) -> Memory:
        return cls({k: (a.copy() if k in written else a) for k, a in image.items()}, written)

    def copy(self) -> Memory:
        return Memory({k: (a.copy() if k in self.written else a) for k, a in self.arrays.items()},
                      self.written)

    def view(self, region: RegionInst) -> np.ndarray:
        return self.arrays[(region.rank, region.window)][region.start:region.stop]

    def snapshot(self, keys: frozenset[WindowKey]) -> dict[WindowKey, np.ndarray]:
        """Copies of the windows `keys` (shared where nothing ever writes them)."""
        return {k: self.arrays[k].copy() if k in self.written else self.arrays[k] for k in keys}

    def digest(self) -> str:
        """A hash of every window that something writes (the others never change)."""
        h = hashlib.blake2b(digest_size=16)
        for key in sorted(self.written):
            h.update(repr(key).encode())
            h.update(self.arrays[key].data)
        return h.hexdigest()

    def to_bytes(self) -> dict[WindowKey, bytes]:
        return {k: a.tobytes() for k, a in sorted(self.arrays.items())}


def random_image(plan: Plan, seed: int) -> dict[WindowKey, np.ndarray]:
    """Seeded random bytes in 1..255 for every window of every rank."""
    rng = np.random.default_rng(seed)
    image: dict[WindowKey, np.ndarray] = {}
    for rank in range(plan.instance.nranks):
        for name, size in plan.windows:
            image[(rank, name)] = rng.integers(1, 256, size=size, dtype=np.uint8)
    return image


def written_windows(plan: Plan) -> frozenset[WindowKey]:
    """Windows that some op writes (the others never change and are shared)."""
    out: set[WindowKey] = set()
    for ops in plan.instance.ranks:
        for op in ops:
            if op.dst is not None:
                out.add((op.dst.rank, op.dst.window))
    return frozenset(out)
