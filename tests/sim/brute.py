"""Brute-force enumeration of every interleaving, to check the partial-order reduction.

A depth-first search over every enabled step of every state, with real bytes,
merging states that are equal in everything the rest of the run can depend on
(control state, memory, clocks, recorded accesses, findings).  Only for tiny
instances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ccogen.sim.dpor import explore
from ccogen.sim.engine import Machine
from ccogen.sim.schedule import Run, Setup

Outcome = tuple[str | None, frozenset[object], bool]


def outcome(run: Run) -> Outcome:
    return run.digest, frozenset(f.key for f in run.findings), run.deadlocked


def _leaf(machine: Machine) -> Outcome:
    if not machine.over:
        machine.explain_deadlock()
    assert machine.memory is not None
    return (machine.memory.digest(), frozenset(f.key for f in machine.findings),
            not machine.over)


class _Keys:
    """`state_key` of machines of one search, remembering what it computed for objects the
    machines share (exploration clones share clocks, accesses and access lists until one
    of them changes them): a clock is never changed in place (`race.HB`) and an access
    list only grows by appending (`race._Spans.add`; `prune` makes new ones), so the same
    object (of the same length) gives the same part of the key.  The memos hold the objects
    they were computed from, so an `id` is never reused meanwhile.  The key is the one
    computed afresh every time (the same tuples, in the same order): the search merges
    exactly the same states, and visits the same number of them."""

    def __init__(self) -> None:
        self._clocks: dict[int, tuple[object, tuple[object, ...]]] = {}
        self._accesses: dict[int, tuple[object, tuple[object, ...]]] = {}
        self._spans: dict[tuple[int, int], tuple[object, tuple[object, ...]]] = {}

    def clock(self, v: Any) -> tuple[object, ...]:
        found = self._clocks.get(id(v))
        if found is None:
            found = self._clocks[id(v)] = (v, tuple(v))
        return found[1]

    def arrays(self, d: Mapping[Any, Any]) -> tuple[object, ...]:
        clock = self.clock
        return tuple(sorted((repr(k), clock(v)) for k, v in d.items()))

    def access(self, a: Any) -> tuple[object, ...]:
        found = self._accesses.get(id(a))
        if found is None:
            found = self._accesses[id(a)] = (a, (a.start, a.stop, a.proc, a.clock,
                                                 self.clock(a.vc), repr(a.who)))
        return found[1]

    def spans(self, spans: Any) -> tuple[object, ...]:
        records = spans.records
        at = (id(spans), len(records))
        found = self._spans.get(at)
        if found is None:
            found = self._spans[at] = (spans, tuple(sorted(self.access(a) for a in records)))
        return found[1]

    def __call__(self, m: Machine) -> object:
        st, hb = m.state, m.hb
        assert m.memory is not None
        arrays, clock = self.arrays, self.clock
        control = (tuple(st.epochs), tuple(st.pcs), tuple(st.phase),
                   tuple(bytes(d) for d in st.done),
                   tuple((tuple(q.items), q.rung, q.head, q.phase) for q in st.queues),
                   tuple(sorted(st.slots.items())), tuple(sorted(st.counters.items())),
                   tuple(sorted(st.barrier.items())), tuple(st.finished), st.over,
                   tuple((x.spec.op.rank, x.spec.op.index, x.epoch) for x in st.xfers),
                   tuple(sorted((repr(k), tuple(v)) for k, v in st.landed.items())))
        memory = (tuple(m.memory.arrays[k].tobytes() for k in sorted(m.memory.written)),
                  tuple((q, tuple(p.tobytes() for p in ps)) for q, ps in sorted(m.staged.items())))
        clocks = (tuple(clock(v) for v in hb.vc), arrays(hb.post), arrays(hb.ring),
                  tuple(sorted(hb.finish.items())), arrays(hb.fin_vc), arrays(hb.slot),
                  arrays(hb.counter), arrays(hb.consumed), arrays(hb.barrier), arrays(hb.host),
                  arrays(hb.done), arrays(hb.land))
        accesses = tuple(sorted((repr(k), self.spans(v)) for k, v in m.races.records.items()))
        findings = tuple(sorted(repr(f.key) for f in m.findings))
        extra = (tuple(sorted(m.spinning.items())), repr(sorted(m.fenced.items())),
                 repr(sorted((p, sorted(d.items())) for p, d in m.last_posted.items())),
                 tuple(sorted(m.evaluated)),
                 tuple((repr(k), v.tobytes()) for k, v in sorted(m.outputs.items())),
                 tuple((e, repr(k), v.tobytes()) for e, snap in sorted(m.init_snap.items())
                       for k, v in sorted(snap.items())))
        return control, memory, clocks, accesses, findings, extra


def state_key(m: Machine) -> object:
    """Everything the rest of a run from `m` can depend on, as a hashable value."""
    return _Keys()(m)


def brute_outcomes(setup: Setup, limit: int = 200_000) -> tuple[set[Outcome], int]:
    """The outcomes of every complete schedule (and every deadlock), and states visited."""
    outcomes: set[Outcome] = set()
    seen: set[object] = set()
    stack = [setup.machine()]
    key_of = _Keys()
    while stack:
        machine = stack.pop()
        before = len(seen)
        seen.add(key_of(machine))  # hashed once (a tuple does not keep its hash)
        if len(seen) == before:
            continue
        assert len(seen) <= limit, "too many states for brute force"
        if not machine.enabled:
            outcomes.add(_leaf(machine))
            continue
        for p in machine.enabled:
            child = machine.clone()
            child.step(p)
            stack.append(child)
    return outcomes, len(seen)


def dpor_outcomes(setup: Setup) -> tuple[set[Outcome], int]:
    explored = explore(setup, time_limit=math.inf)  # bounded by its count of schedules
    assert explored.complete
    return {outcome(r) for r in explored.runs}, len(explored.runs)
