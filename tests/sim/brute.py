"""Brute-force enumeration of every interleaving, to check the partial-order reduction.

A depth-first search over every enabled step of every state, with real bytes,
merging states that are equal in everything the rest of the run can depend on
(control state, memory, clocks, recorded accesses, findings).  Only for tiny
instances.
"""

from __future__ import annotations

import math

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


def _arrays(d: dict[object, object]) -> tuple[object, ...]:
    return tuple(sorted((repr(k), tuple(v)) for k, v in d.items()))  # type: ignore[call-overload]


def state_key(m: Machine) -> object:
    st, hb = m.state, m.hb
    assert m.memory is not None
    control = (tuple(st.epochs), tuple(st.pcs), tuple(st.phase), tuple(bytes(d) for d in st.done),
               tuple((tuple(q.items), q.rung, q.head, q.phase) for q in st.queues),
               tuple(sorted(st.slots.items())), tuple(sorted(st.counters.items())),
               tuple(sorted(st.barrier.items())), tuple(st.finished), st.over,
               tuple((x.spec.op.rank, x.spec.op.index, x.epoch) for x in st.xfers),
               tuple(sorted((repr(k), tuple(v)) for k, v in st.landed.items())))
    memory = (tuple(m.memory.arrays[k].tobytes() for k in sorted(m.memory.written)),
              tuple((q, tuple(p.tobytes() for p in ps)) for q, ps in sorted(m.staged.items())))
    clocks = (tuple(tuple(v) for v in hb.vc), _arrays(hb.post), _arrays(hb.ring),
              tuple(sorted(hb.finish.items())), _arrays(hb.fin_vc), _arrays(hb.slot),
              _arrays(hb.counter), _arrays(hb.consumed), _arrays(hb.barrier), _arrays(hb.host),
              _arrays(hb.done), _arrays(hb.land))
    accesses = tuple(sorted((repr(k), tuple(sorted((a.start, a.stop, a.proc, a.clock,
                                                    tuple(a.vc), repr(a.who)) for a in v)))
                            for k, v in m.races.records.items()))
    findings = tuple(sorted(repr(f.key) for f in m.findings))
    extra = (tuple(sorted(m.spinning.items())), repr(sorted(m.fenced.items())),
             repr(sorted((p, sorted(d.items())) for p, d in m.last_posted.items())),
             tuple(sorted(m.evaluated)),
             tuple((repr(k), v.tobytes()) for k, v in sorted(m.outputs.items())),
             tuple((e, repr(k), v.tobytes()) for e, snap in sorted(m.init_snap.items())
                   for k, v in sorted(snap.items())))
    return control, memory, clocks, accesses, findings, extra


def brute_outcomes(setup: Setup, limit: int = 200_000) -> tuple[set[Outcome], int]:
    """The outcomes of every complete schedule (and every deadlock), and states visited."""
    outcomes: set[Outcome] = set()
    seen: set[object] = set()
    stack = [setup.machine()]
    while stack:
        machine = stack.pop()
        key = state_key(machine)
        if key in seen:
            continue
        seen.add(key)
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
