"""Schedulers: who moves next.

* `run_seeded(plan, seed)`: seeded random choice among the enabled processes.
  Even seeds pick uniformly at every step; odd seeds give each process a random
  priority and run the highest enabled one, reshuffling now and then, which
  produces lopsided schedules (one engine far behind everything else).
* `replay(plan, schedule)`: a recorded sequence of process ids, with real bytes
  (exhaustive exploration replays the schedules it finds this way).
* `run_timed(plan, cost)`: the earliest-finishing step first, with durations from
  a cost model: the schedule traces are drawn from.
* Exhaustive exploration lives in `ccogen.sim.dpor`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ccogen.sim.cost import StepCosts
from ccogen.sim.engine import Machine, StepBudget
from ccogen.sim.explain import Finding
from ccogen.sim.ops import IMPLS
from ccogen.sim.plan import Plan
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import Memory, WindowKey, written_windows

RESHUFFLE = 1 / 16


@dataclass
class Setup:
    """What every schedule of one instance shares."""

    plan: Plan
    image: dict[WindowKey, np.ndarray]
    epochs: int = 2
    pieces: int = 2
    digests: bool = True  # hash every schedule's final memory
    written: frozenset[WindowKey] = field(default_factory=frozenset)
    budget: StepBudget | None = None  # steps all schedules may take (`--limit sim-steps`)

    def __post_init__(self) -> None:
        if not self.written:
            self.written = written_windows(self.plan)

    def machine(self, memory: bool = True) -> Machine:
        mem = Memory.fresh(self.image, self.written) if memory else None
        return Machine(self.plan, epochs=self.epochs, pieces=self.pieces, memory=mem,
                       image=self.image, budget=self.budget)


@dataclass
class Run:
    """One finished schedule: what it found and what memory it left."""

    name: str
    seed: int | None
    findings: list[Finding]
    digest: str | None
    memory: dict[WindowKey, bytes] | None
    schedule: list[int]
    deadlocked: bool


def finish(machine: Machine, name: str, seed: int | None, schedule: list[int],
           keep_memory: bool = False, digest: bool = True) -> Run:
    """Explain a deadlock if the machine stopped early and package the result."""
    deadlocked = not machine.over
    if deadlocked:
        machine.explain_deadlock()
    mem = machine.memory
    return Run(name, seed, list(machine.findings), mem.digest() if mem and digest else None,
               mem.to_bytes() if mem is not None and keep_memory else None, schedule,
               deadlocked)


def run_seeded(setup: Setup, seed: int, keep_memory: bool = False) -> Run:
    machine = setup.machine()
    rng = random.Random(seed)
    choose = _uniform(rng) if seed % 2 == 0 else _priorities(rng, setup.plan.nprocs)
    schedule: list[int] = []
    while machine.enabled:
        p = choose(machine.enabled)
        machine.step(p)
        schedule.append(p)
    return finish(machine, f"seed {seed}", seed, schedule, keep_memory, setup.digests)


def _uniform(rng: random.Random) -> Callable[[list[int]], int]:
    def choose(enabled: list[int]) -> int:
        return enabled[rng.randrange(len(enabled))]
    return choose


def _priorities(rng: random.Random, nprocs: int) -> Callable[[list[int]], int]:
    prio = [rng.random() for _ in range(nprocs)]

    def choose(enabled: list[int]) -> int:
        p = max(enabled, key=prio.__getitem__)
        if rng.random() < RESHUFFLE:
            prio[p] = rng.random()
        return p
    return choose


def replay(setup: Setup, schedule: Sequence[int], name: str, keep_memory: bool = False,
           memory: bool = True) -> Run:
    machine = setup.machine(memory)
    for p in schedule:
        assert p in machine.enabled, "a replayed schedule must stay feasible"
        machine.step(p)
    return finish(machine, name, None, list(schedule), keep_memory)


# ----------------------------------------------------------------------------- timed


@dataclass(frozen=True, slots=True)
class Timed:
    record: StepRecord
    start: float  # us
    end: float  # us


def run_timed(setup: Setup, cost: StepCosts) -> tuple[Machine, list[Timed]]:
    """Earliest step first, each taking the cost model's time; effects at its end."""
    machine = setup.machine()
    clock = _Clock(machine, cost)
    out: list[Timed] = []
    while machine.enabled:
        p, end = clock.next()
        start = end - clock.duration(p)
        record = machine.step(p)
        clock.after(p, record, end)
        out.append(Timed(record, start, end))
    finish(machine, "timed", None, [])
    return machine, out


class _Clock:
    """Discrete-event bookkeeping for `run_timed`."""

    def __init__(self, machine: Machine, cost: StepCosts) -> None:
        self.m = machine
        self.cost = cost
        n = machine.plan.nprocs
        self.free = [0.0] * n
        self.since: dict[int, float] = {}
        self.idle_at: dict[int, float] = {}  # queue -> when its last transfer finished
        self.now = 0.0

    def next(self) -> tuple[int, float]:
        for p in self.m.enabled:
            self.since.setdefault(p, self.now)
        best = min(self.m.enabled, key=lambda p: (self._end(p), p))
        return best, self._end(best)

    def _end(self, p: int) -> float:
        return max(self.free[p], self.since[p]) + self.duration(p)

    def after(self, p: int, record: StepRecord, end: float) -> None:
        self.now = end
        self.free[p] = end
        if record.kind is RecordKind.XFER and record.complete:
            self.idle_at[p] = end
        enabled = set(self.m.enabled)
        self.since = {q: t for q, t in self.since.items() if q in enabled and q != p}

    def duration(self, p: int) -> float:
        plan = self.m.plan
        if p < plan.nissuers:
            return self._op_us(p)
        if p < plan.host:
            return self._xfer_us(p)
        return 0.0

    def _op_us(self, p: int) -> float:
        op = self.m.current(p)
        assert op is not None
        return IMPLS[op.kind].cost_us(self.cost, op)

    def _xfer_us(self, p: int) -> float:
        qi = p - self.m.plan.nissuers
        qs = self.m.state.queues[qi]
        x = self.m.state.xfers[qs.items[qs.head]]
        n = len(x.pieces)
        if qs.phase == 2 * n:
            return self.cost.atomic_us * x.spec.signals
        share = self.cost.engine_us(x.spec.size) / (2 * n)
        if qs.phase == 0 and self._idle(p):
            return share + self.cost.dispatch_us
        return share

    def _idle(self, p: int) -> bool:
        """Was the queue idle when this transfer became startable (the dispatch cost)?"""
        previous = self.idle_at.get(p)
        return previous is None or self.since.get(p, self.now) > previous
