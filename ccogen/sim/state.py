"""The simulated machine's state: control state (cheap to clone) and memory (real bytes).

Control state, per schedule: each issuer's position in its ops, which op instances
of this epoch have been issued, signal slots per `(holder, sender, queue)`,
counters, barrier arrivals, the FIFO of every engine queue with how far it has been
rung and executed, and the vector clocks of the race detector (`race.HB`).

Memory: every window of every rank as a numpy `uint8` array, filled with seeded
random bytes in 1..255 (never zero, so that a byte that was never written cannot
pass for one that was).  Windows that nothing writes are shared with the initial
image instead of copied.

Sparse backing: when the windows of an instance hold more than `DENSE_MAX` bytes,
only the bytes some op or `ensure` touches are filled and copied (`Image.touched`);
the arrays are allocated zeroed, which the OS backs lazily, so an 8 GiB window of
which a protocol moves 64 KiB costs 64 KiB.  Untouched bytes are never read, so the
results are those of the dense run; the summary says the backing was sparse.
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
    """Control state of one schedule (see the module docstring)."""

    epoch: int
    pcs: list[int]
    phase: list[int]
    done: list[bytearray]
    queues: list[QState]
    slots: dict[SlotKey, int] = field(default_factory=dict)
    counters: dict[CounterKey, int] = field(default_factory=dict)
    barrier: dict[int, int] = field(default_factory=dict)  # generation -> arrivals
    xfers: list[Xfer] = field(default_factory=list)
    landed: dict[object, list[tuple[int, int]]] = field(default_factory=dict)  # (value, xid)
    finished: int = 0  # issuers at the end of this epoch
    over: bool = False  # the host ended the last epoch

    @classmethod
    def initial(cls, plan: Plan) -> State:
        n = plan.nissuers
        return cls(epoch=0, pcs=[0] * n, phase=[0] * n,
                   done=[bytearray(len(ops)) for ops in plan.instance.ranks],
                   queues=[QState() for _ in plan.queues],
                   finished=sum(1 for ip in plan.issuers if not ip.ops))

    def copy(self) -> State:
        return State(self.epoch, list(self.pcs), list(self.phase),
                     [bytearray(d) for d in self.done], [q.copy() for q in self.queues],
                     dict(self.slots), dict(self.counters), dict(self.barrier),
                     list(self.xfers), {k: list(v) for k, v in self.landed.items()},
                     self.finished, self.over)

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


DENSE_MAX = 256 << 20  # window bytes of an instance up to which every byte is backed

Intervals = list[tuple[int, int]]


class Image(dict[WindowKey, np.ndarray]):
    """The initial bytes of every window; `touched` (sparse backing) lists, per window,
    the merged byte intervals that ops and checks touch (None: every byte is backed)."""

    touched: dict[WindowKey, Intervals] | None = None

    def materialised(self) -> int:
        """Bytes really backed: every byte, or only the touched ones."""
        if self.touched is None:
            return sum(a.size for a in self.values())
        return sum(e - s for spans in self.touched.values() for s, e in spans)

    def chunks(self) -> list[tuple[WindowKey, int, np.ndarray]]:
        """(window, offset, bytes) of every backed range, in order."""
        if self.touched is None:
            return [(k, 0, a) for k, a in sorted(self.items())]
        return [(k, s, self[k][s:e]) for k in sorted(self) for s, e in self.touched.get(k, [])]


def _copy(a: np.ndarray, spans: Intervals | None) -> np.ndarray:
    if spans is None:
        return a.copy()
    out = np.zeros(a.shape, a.dtype)  # calloc: zero pages backed only where written
    for s, e in spans:
        out[s:e] = a[s:e]
    return out


class Memory:
    """Every window of every rank as real bytes (only the touched ones when sparse)."""

    def __init__(self, arrays: dict[WindowKey, np.ndarray], written: frozenset[WindowKey],
                 touched: dict[WindowKey, Intervals] | None = None) -> None:
        self.arrays = arrays
        self.written = written
        self.touched = touched

    def _spans(self, key: WindowKey) -> Intervals | None:
        return None if self.touched is None else self.touched.get(key, [])

    @classmethod
    def fresh(cls, image: dict[WindowKey, np.ndarray], written: frozenset[WindowKey]) -> Memory:
        touched = image.touched if isinstance(image, Image) else None
        spans = (lambda k: None) if touched is None else (lambda k: touched.get(k, []))
        return cls({k: (_copy(a, spans(k)) if k in written else a) for k, a in image.items()},
                   written, touched)

    def copy(self) -> Memory:
        return Memory({k: (_copy(a, self._spans(k)) if k in self.written else a)
                       for k, a in self.arrays.items()}, self.written, self.touched)

    def view(self, region: RegionInst) -> np.ndarray:
        return self.arrays[(region.rank, region.window)][region.start:region.stop]

    def snapshot(self, keys: frozenset[WindowKey]) -> dict[WindowKey, np.ndarray]:
        """Copies of the windows `keys` (shared where nothing ever writes them)."""
        return {k: _copy(self.arrays[k], self._spans(k)) if k in self.written
                else self.arrays[k] for k in keys}

    def digest(self) -> str:
        """A hash of every window that something writes (the others never change)."""
        h = hashlib.blake2b(digest_size=16)
        for key in sorted(self.written):
            h.update(repr(key).encode())
            spans = self._spans(key)
            if spans is None:
                h.update(self.arrays[key].data)
            for s, e in spans or ():
                h.update(self.arrays[key][s:e].data)
        return h.hexdigest()

    def to_bytes(self) -> dict[WindowKey, bytes]:
        return {k: a.tobytes() for k, a in sorted(self.arrays.items())}


def random_image(plan: Plan, seed: int, dense_max: int = DENSE_MAX) -> Image:
    """Seeded random bytes in 1..255 for every window of every rank; past `dense_max`
    bytes in all, only for the touched bytes (sparse backing, see the module doc)."""
    rng = np.random.default_rng(seed)
    image = Image()
    total = plan.instance.nranks * sum(size for _, size in plan.windows)
    if total > dense_max:
        image.touched = touched_intervals(plan)
    for rank in range(plan.instance.nranks):
        for name, size in plan.windows:
            if image.touched is None:
                image[(rank, name)] = rng.integers(1, 256, size=size, dtype=np.uint8)
                continue
            a = image[(rank, name)] = np.zeros(size, dtype=np.uint8)
            for s, e in image.touched.get((rank, name), []):
                a[s:e] = rng.integers(1, 256, size=e - s, dtype=np.uint8)
    return image


def touched_intervals(plan: Plan) -> dict[WindowKey, Intervals]:
    """Per window, the merged byte intervals any op or check of the instance touches."""
    found: dict[WindowKey, Intervals] = {}
    regions: list[RegionInst] = [r for ops in plan.instance.ranks for op in ops
                                 for r in (op.dst, op.src) if r is not None]
    regions += [r for c in plan.instance.checks for r in (c.left, c.right)]
    for r in regions:
        found.setdefault((r.rank, r.window), []).append((r.start, r.stop))
    return {k: _merged(v) for k, v in found.items()}


def _merged(spans: Intervals) -> Intervals:
    out: Intervals = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def written_windows(plan: Plan) -> frozenset[WindowKey]:
    """Windows that some op writes (the others never change and are shared)."""
    out: set[WindowKey] = set()
    for ops in plan.instance.ranks:
        for op in ops:
            if op.dst is not None:
                out.add((op.dst.rank, op.dst.window))
    return frozenset(out)
