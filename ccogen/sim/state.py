"""The simulated machine's state: control state (cheap to clone) and memory (real bytes).

Control state, per schedule: each issuer's position in its ops, which op instances
of this epoch have been issued, signal slots per `(holder, sender, queue)`,
counters, barrier arrivals, the FIFO of every engine queue with how far it has been
rung and executed, and the vector clocks of the race detector (`race.HB`).

Memory: every window of every rank as a numpy `uint8` array, filled with seeded
random bytes in 1..255 (never zero, so that a byte that was never written cannot
pass for one that was).  Windows that nothing writes are shared with the initial
image instead of copied.

Sparse backing: when the windows of an instance hold more than `DENSE_MAX` bytes
(and `simulate` finds it worth it), only the bytes some op or `ensure` touches are
backed, packed interval after interval (`Layout`): an 8 GiB window of which a protocol
moves 64 KiB costs 64 KiB.  Untouched bytes are never read, so the results are those
of a dense run; the summary says the backing was sparse.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field

import numpy as np

from ccogen.ir import values
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance, RegionInst
from ccogen.ir.values import random_values
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
    # per issuer: its current op's `load`s ran in a step of their own (`Machine.loads_first`)
    loaded: bytearray = field(default_factory=bytearray)

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
                             for r in range(nranks)], loaded=bytearray(n))

    def copy(self) -> State:
        return State(list(self.epochs), list(self.pcs), list(self.phase),
                     [bytearray(d) for d in self.done], [q.copy() for q in self.queues],
                     dict(self.slots), dict(self.counters), dict(self.barrier),
                     list(self.xfers), {k: list(v) for k, v in self.landed.items()},
                     list(self.finished), self.over, bytearray(self.loaded))

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


def sub(region: RegionInst, a: int, b: int) -> RegionInst:
    """Bytes `[a, b)` of `region` (a piece of a transfer)."""
    return RegionInst(region.window, region.start + a, region.start + b, region.rank)


def counter_cell(key: CounterKey) -> RegionInst:
    """A counter as a one-byte region, so that a reset and counted adds can race."""
    return RegionInst(f"counter {key[1]}", 0, 1, key[0])


DENSE_MAX = 256 << 20  # window bytes of an instance up to which every byte is backed

Intervals = list[tuple[int, int]]


class Layout:
    """Where a window's bytes live in its array: at their own offsets (dense), or, with
    `touched` intervals (sparse), packed one interval after the other.  Every region an
    op or a check names lies inside one touched interval."""

    def __init__(self, touched: dict[WindowKey, Intervals] | None = None) -> None:
        self.touched = touched
        self._starts: dict[WindowKey, list[int]] = {}
        self._bases: dict[WindowKey, list[int]] = {}
        for key, spans in (touched or {}).items():
            self._starts[key] = [a for a, _ in spans]
            bases, at = [], 0
            for a, b in spans:
                bases.append(at)
                at += b - a
            self._bases[key] = bases

    @property
    def sparse(self) -> bool:
        return self.touched is not None

    def size(self, key: WindowKey, full: int) -> int:
        """Length of the array that backs window `key` of `full` bytes."""
        if self.touched is None:
            return full
        return sum(b - a for a, b in self.touched.get(key, []))

    def locate(self, key: WindowKey, start: int, stop: int) -> slice:
        """The array slice holding bytes [start, stop) of window `key`."""
        if self.touched is None or stop <= start:
            return slice(start, stop) if self.touched is None else slice(0, 0)
        i = bisect.bisect_right(self._starts[key], start) - 1
        a, b = self.touched[key][i]
        assert a <= start and stop <= b, (key, start, stop)
        base = self._bases[key][i] + start - a
        return slice(base, base + stop - start)

    def chunks(self, key: WindowKey, full: int) -> list[tuple[int, slice]]:
        """(window offset, array slice) of every backed range of window `key`."""
        if self.touched is None:
            return [(0, slice(0, full))]
        return [(a, self.locate(key, a, b)) for a, b in self.touched.get(key, [])]


class Image(dict[WindowKey, np.ndarray]):
    """The initial bytes of every window, laid out by `layout`; `sizes` are the windows'
    full sizes."""

    layout: Layout = Layout()
    sizes: dict[WindowKey, int]

    def view(self, region: RegionInst) -> np.ndarray:
        key = (region.rank, region.window)
        return self[key][self.layout.locate(key, region.start, region.stop)]

    def chunks(self) -> list[tuple[WindowKey, int, np.ndarray]]:
        """(window, offset, bytes) of every backed range, in order."""
        return [(k, at, self[k][where]) for k in sorted(self)
                for at, where in self.layout.chunks(k, self.sizes[k])]


class Memory:
    """Every window of every rank as real bytes (only the touched ones when sparse)."""

    def __init__(self, arrays: dict[WindowKey, np.ndarray], written: frozenset[WindowKey],
                 layout: Layout | None = None) -> None:
        self.arrays = arrays
        self.written = written
        self.layout = layout or Layout()

    @classmethod
    def fresh(cls, image: dict[WindowKey, np.ndarray], written: frozenset[WindowKey]) -> Memory:
        layout = image.layout if isinstance(image, Image) else None
        return cls({k: (a.copy() if k in written else a) for k, a in image.items()}, written,
                   layout)

    def copy(self) -> Memory:
        return Memory({k: (a.copy() if k in self.written else a) for k, a in self.arrays.items()},
                      self.written, self.layout)

    def view(self, region: RegionInst) -> np.ndarray:
        return self.view_in(self.arrays, region)

    def view_in(self, arrays: dict[WindowKey, np.ndarray], region: RegionInst) -> np.ndarray:
        """The bytes of `region` in `arrays` (this memory's or a snapshot of it)."""
        key = (region.rank, region.window)
        return arrays[key][self.layout.locate(key, region.start, region.stop)]

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


def first_value(raw: np.ndarray, dtype: DType) -> int | float:
    """The first element of bytes `raw` as `values.decode` gives it (a `load`'s value),
    without converting the whole array (a load reads one element: this is every load)."""
    if dtype is DType.BF16:
        return float(values.decode(raw[:2], dtype)[0])
    got = raw[:dtype.size].view(values.storage(dtype))[0]
    return float(got) if dtype.is_float else int(got)


def random_image(plan: Plan, seed: int, dense_max: int = DENSE_MAX) -> Image:
    """Seeded random bytes in 1..255 for every window of every rank (finite values in
    ±[0.5, 2) for a float window or buffer: `values.random_values`); past `dense_max`
    bytes in all, only for the touched bytes (sparse backing, see the module doc)."""
    rng = np.random.default_rng(seed)
    image = Image()
    total = plan.instance.nranks * sum(size for _, size in plan.windows)
    if total > dense_max:
        image.layout = Layout(touched_intervals(plan))
    image.sizes = {}
    for rank in range(plan.instance.nranks):
        for name, size in plan.windows:
            key = (rank, name)
            image.sizes[key] = size
            image[key] = fill(rng, plan, name, image.layout.size(key, size))
    return image


def fill(rng: np.random.Generator, plan: Plan, name: str, size: int) -> np.ndarray:
    """A caller's contents for `size` bytes of window or buffer `name` (element-aligned:
    regions of a typed window count whole elements, and so do touched intervals)."""
    dtype = plan.instance.dtype(name)
    if not dtype.is_float:
        return rng.integers(1, 256, size=size, dtype=np.uint8)
    return random_values(rng, size // dtype.size, dtype)


def touched_intervals(plan: Plan) -> dict[WindowKey, Intervals]:
    """Per window, the merged byte intervals any op or check of the instance touches."""
    found: dict[WindowKey, Intervals] = {}
    every = _every_launch(plan)
    regions: list[RegionInst] = [r for inst in every for ops in inst.ranks for op in ops
                                 for r in (op.dst, op.src, *op.srcs) if r is not None]
    for c in [c for inst in every for c in inst.checks]:
        regions += [r for r in (c.left, c.right) if r is not None]
        if c.reduction is not None:
            regions += c.reduction.terms
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
    """Windows that some op writes, and the buffers the caller refills at each launch
    (the others never change and are shared)."""
    out: set[WindowKey] = set()
    for inst in _every_launch(plan):
        for ops in inst.ranks:
            for op in ops:
                if op.dst is not None:
                    out.add((op.dst.rank, op.dst.window))
    out.update((rank, name) for rank in range(plan.instance.nranks) for name in plan.buffers)
    if plan.launch_inputs:  # the caller writes each launch's run-time inputs
        out.update(plan.runtime_windows)
    return frozenset(out)


def _every_launch(plan: Plan) -> tuple[Instance, ...]:
    """The instances of every launch: `launch % K` rotates the regions, drawn contents
    per launch give them other lengths."""
    return tuple(i for base in (plan.launches or (plan.instance,))
                 for i in (base, *base.rotation))
