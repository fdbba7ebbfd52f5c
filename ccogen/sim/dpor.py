"""Exhaustive exploration with dynamic partial-order reduction and sleep sets.

The algorithm is Flanagan and Godefroid's DPOR (POPL 2005, with clock vectors),
plus sleep sets.  Two steps are *dependent* when they belong to one process or
touch one state object and do not commute (`ccogen.sim.footprint`): memory bytes
(overlapping, one a write), a queue item (its post or ring, its start, its
consumption), a queue's ring count, a barrier generation, the completion of an op
another issuer's op follows, the end of an epoch, and a slot or counter.  A wait
depends only on the increments it needs (the ones that bring the value up to its
expected value); increments commute.  Steps that touch nothing in common commute,
so one interleaving stands for all: the explorer runs one schedule per
equivalence class (Mazurkiewicz trace) of complete schedules, and every deadlock.

Two refinements keep it small, both sound for this model:

* a step that some other step cannot become enabled without (`_needed`: a post
  before the queue starts the item, an increment a single-queue wait needs, an
  op's completion before the ops after it...) is never reordered after it;
* a process's clock is joined with the clocks of the steps that enabled its next
  step (`_effective`), so whatever came before those also counts as before it.

Exploration runs the machine without bytes (control state is cheap to clone);
each complete schedule is replayed with real bytes for `ensure` and the final
memory, once per distinct order of memory accesses (schedules that access every
window in the same order end with the same bytes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ccogen.sim.engine import Machine
from ccogen.sim.explain import Finding
from ccogen.sim.footprint import Keys, Mems, Obj, StepDesc
from ccogen.sim.schedule import Run, Setup, replay

# Keys whose writer another step needs before it can run at all.
_ENABLING = frozenset({"done", "epoch", "fin", "grp", "qi", "bar", "cons"})
_COUNTED = frozenset({"slot", "counter"})
_EVERY_ADD = frozenset({"fin", "bar"})  # every add is needed, not only the last

Entry = tuple[int, str, int, int]  # (depth, mode, value, process)
MemEntry = tuple[int, int, int, bool, int]  # (depth, start, stop, write, process)


@dataclass
class Explored:
    runs: list[Run]
    complete: bool
    elapsed: float
    limit: str = ""  # why exploration stopped early


@dataclass
class _Node:
    machine: Machine
    nexts: dict[int, StepDesc]
    pclock: list[np.ndarray]
    sleep: dict[int, StepDesc]
    backtrack: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    clock: np.ndarray | None = None
    chosen: int = -1
    appended: list[list[Any]] = field(default_factory=list)  # history lists to pop

    @property
    def enabled(self) -> list[int]:
        return self.machine.enabled


class Explorer:
    """Runs the search; see the module docstring."""

    def __init__(self, setup: Setup, max_schedules: int, time_limit: float,
                 keep_memory: bool = False) -> None:
        self.setup = setup
        self.max_schedules = max_schedules
        self.time_limit = time_limit
        self.keep_memory = keep_memory
        self.nprocs = setup.plan.nprocs
        self.multi = setup.plan.multi_source
        self.stack: list[_Node] = []
        self.hist: dict[object, list[Entry]] = {}
        self.mhist: dict[object, list[MemEntry]] = {}
        self.runs: list[Run] = []
        self.replayed: dict[object, Run] = {}

    def run(self) -> Explored:
        # CPU seconds of this process, not wall time: a loaded machine must not stop a
        # search that a quiet one finishes (issue 25)
        start = time.process_time()
        zero = np.zeros(self.nprocs, np.int64)
        self._push(self._node(self.setup.machine(memory=False), [zero] * self.nprocs, {}))
        while self.stack:
            node = self.stack[-1]
            self._undo(node)
            limit = self._limit(start)
            if limit:
                return Explored(self.runs, False, time.process_time() - start, limit)
            candidates = sorted(node.backtrack - node.done - node.sleep.keys())
            if not candidates:
                self.stack.pop()
                continue
            node.done.add(candidates[0])
            self._descend(node, candidates[0])
        return Explored(self.runs, True, time.process_time() - start)

    def _limit(self, start: float) -> str:
        if len(self.runs) >= self.max_schedules:
            return f"stopped after {self.max_schedules} schedules"
        if time.process_time() - start > self.time_limit:
            return f"stopped after {self.time_limit:g} CPU s"
        return ""

    # ------------------------------------------------------------------ dependence

    def _conflict(self, obj: Obj, m1: str, v1: int, m2: str, v2: int) -> bool:
        if m1 == m2 and m1 != "w":
            return False
        if "w" in (m1, m2) or obj[0] not in _COUNTED or obj in self.multi:
            return True
        added, need = (v1, v2) if m1 == "a" else (v2, v1)
        return added < need  # an increment from below the need

    def _dependent(self, x: StepDesc, y: StepDesc) -> bool:
        for obj, mode, value in x.keys:
            for obj2, mode2, value2 in y.keys:
                if obj == obj2 and self._conflict(obj, mode, value, mode2, value2):
                    return True
        for w, a, b, write in x.mems:
            for w2, a2, b2, write2 in y.mems:
                if w == w2 and a < b2 and a2 < b and (write or write2):
                    return True
        return False

    # ------------------------------------------------------------------ the search

    def _node(self, machine: Machine, pclock: list[np.ndarray],
              sleep: dict[int, StepDesc]) -> _Node:
        nexts = {}
        for p in range(self.nprocs):
            desc = machine.describe(p)
            if desc is not None:
                nexts[p] = desc
        return _Node(machine, nexts, pclock, sleep)

    def _push(self, node: _Node) -> None:
        self.stack.append(node)
        self._analyse(node)
        awake = [p for p in node.enabled if p not in node.sleep]
        if awake:
            node.backtrack.add(min(awake))
        elif not node.enabled:
            self._leaf()

    def _descend(self, node: _Node, p: int) -> None:
        depth = len(self.stack) - 1
        desc = node.nexts[p]
        machine = node.machine.clone()
        machine.step(p)
        clock = self._clock(node.pclock[p], p, desc, depth)
        node.clock, node.chosen = clock, p
        self._record(node, p, desc, depth)
        pclock = list(node.pclock)
        for q in (p, *desc.also):
            pclock[q] = clock
        explored = {q: node.nexts[q] for q in node.done if q != p}
        sleep = {q: d for q, d in {**node.sleep, **explored}.items()
                 if q != p and not self._dependent(d, desc)}
        self._push(self._node(machine, pclock, sleep))

    def _clock(self, clock: np.ndarray, p: int, desc: StepDesc, depth: int) -> np.ndarray:
        for i in self._conflicting(desc.keys, desc.mems):
            other = self.stack[i].clock
            assert other is not None
            clock = np.maximum(clock, other)
        clock = clock.copy()
        clock[p] = depth + 1
        return clock

    def _conflicting(self, keys: Keys, mems: Mems) -> set[int]:
        found: set[int] = set()
        for obj, mode, value in keys:
            found.update(i for i, m2, v2, _ in self.hist.get(obj, ())
                         if self._conflict(obj, mode, value, m2, v2))
        for w, a, b, write in mems:
            found.update(i for i, a2, b2, write2, _ in self.mhist.get(w, ())
                         if a < b2 and a2 < b and (write or write2))
        return found

    def _record(self, node: _Node, p: int, desc: StepDesc, depth: int) -> None:
        for obj, mode, value in desc.keys:
            entries = self.hist.setdefault(obj, [])
            entries.append((depth, mode, value, p))
            node.appended.append(entries)
        for w, a, b, write in desc.mems:
            mem_entries = self.mhist.setdefault(w, [])
            mem_entries.append((depth, a, b, write, p))
            node.appended.append(mem_entries)

    def _undo(self, node: _Node) -> None:
        for entries in reversed(node.appended):
            entries.pop()
        node.appended.clear()
        node.clock, node.chosen = None, -1

    # ------------------------------------------------------------------ backtracking

    def _analyse(self, node: _Node) -> None:
        """For every enabled process, find the last dependent step it could have gone before.

        A disabled step is analysed when it becomes enabled: the steps that enable it
        are needed (never reversed with it), and `_last_race` looks past them to the
        last step it really races with.  A step that never becomes enabled belongs to
        no complete schedule of this trace.
        """
        for p, desc in node.nexts.items():
            if not desc.enabled:
                continue  # analysed once enabled, against everything before (see `_analyse`)
            cp = self._effective(node.pclock[p], desc)
            i = self._last_race(p, desc, cp)
            if i < 0:
                continue
            pre = self.stack[i]
            if p in pre.enabled:
                pre.backtrack.add(p)
                continue
            # a process with a later step that happens before p's: running it first
            # leads towards p's step (Flanagan and Godefroid's set E)
            towards = [q for q in pre.enabled if cp[q] >= i + 2]
            if towards:
                pre.backtrack.add(min(towards))
            else:
                pre.backtrack.update(pre.enabled)

    def _effective(self, clock: np.ndarray, desc: StepDesc) -> np.ndarray:
        """`clock` joined with the clocks of the steps that `desc` needed."""
        for obj, mode, value in desc.keys:
            if mode != "r" or not self._enabling(obj):
                continue
            every = obj[0] in _EVERY_ADD
            for i, m2, v2, _ in reversed(self.hist.get(obj, ())):
                if m2 != "r" and self._conflict(obj, mode, value, m2, v2):
                    other = self.stack[i].clock
                    assert other is not None
                    clock = np.maximum(clock, other)
                    if not every:
                        break
        return clock

    def _enabling(self, obj: Obj) -> bool:
        kind = obj[0]
        return kind in _ENABLING or (kind in _COUNTED and obj not in self.multi)

    def _last_race(self, p: int, desc: StepDesc, cp: np.ndarray) -> int:
        best = -1
        for obj, mode, value in desc.keys:
            for i, m2, v2, q in reversed(self.hist.get(obj, ())):
                if i <= best:
                    break
                if (q != p and self._conflict(obj, mode, value, m2, v2)
                        and self._races(i, q, p, desc, cp)):
                    best = i
                    break
        for w, a, b, write in desc.mems:
            for i, a2, b2, write2, q in reversed(self.mhist.get(w, ())):
                if i <= best:
                    break
                if (q != p and a < b2 and a2 < b and (write or write2)
                        and self._races(i, q, p, desc, cp)):
                    best = i
                    break
        return best

    def _races(self, i: int, q: int, p: int, desc: StepDesc, cp: np.ndarray) -> bool:
        """Step i (of q) is not ordered before p's next step, and both could be enabled
        (they cannot when p's step needs step i: see `_needed`)."""
        if cp[q] >= i + 1:
            return False
        step = self.stack[i].nexts[self.stack[i].chosen]
        if (desc.id[0] == "h" and step.id[0] == "i" and step.id[5] == desc.id[1]
                and step.id[2] == desc.id[2]):
            return False  # the end of a rank's launch needs every issuer step of it
        return not self._needed(step, desc)

    def _needed(self, step: StepDesc, t: StepDesc) -> bool:
        """Can `t` not run unless `step` ran first (see the module docstring)?"""
        for obj, mode, value in step.keys:
            if mode == "r" or not self._enabling(obj):
                continue
            for obj2, mode2, value2 in t.keys:
                if obj2 == obj and mode2 == "r" and self._conflict(obj, mode, value, mode2,
                                                                    value2):
                    return True
        return False

    # ------------------------------------------------------------------ leaves

    def _leaf(self) -> None:
        machine = self.stack[-1].machine
        if not machine.over:
            machine.explain_deadlock()
        schedule = [n.chosen for n in self.stack[:-1]]
        order = self._memory_order()
        replayed = self.replayed.get(order)
        if replayed is None:
            replayed = replay(self.setup, schedule, f"schedule {len(self.runs) + 1}",
                              self.keep_memory)
            self.replayed[order] = replayed
            self.runs.append(replayed)
            return
        extra = [f for f in replayed.findings if f.diagnostic.code == "E033"]
        findings: list[Finding] = list(machine.findings) + extra
        self.runs.append(Run(f"schedule {len(self.runs) + 1}", None, findings, replayed.digest,
                             replayed.memory, schedule, not machine.over))

    def _memory_order(self) -> tuple[object, ...]:
        order: dict[object, list[object]] = {}
        for node in self.stack[:-1]:
            desc = node.nexts[node.chosen]
            for w, a, b, write in desc.mems:
                order.setdefault(w, []).append((desc.id, a, b, write))
        return tuple(sorted((repr(w), tuple(v)) for w, v in order.items()))


def explore(setup: Setup, *, max_schedules: int = 100_000, time_limit: float = 10.0,
            keep_memory: bool = False) -> Explored:
    return Explorer(setup, max_schedules, time_limit, keep_memory).run()
