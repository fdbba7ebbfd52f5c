"""Waits, counters and barriers.

When a `wait_signal`/`wait_count` may return and what it joins (the increments it
needed), what `reset_count` does to a counter, a barrier's arrivals and departures,
and, for deadlock reports, what each of them is still waiting for.  The functions
act on a `Machine` (`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccogen.ir.instance import OpInst
from ccogen.sim import explain
from ccogen.sim.footprint import NEVER
from ccogen.sim.race import HB, Who
from ccogen.sim.state import counter_cell

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine

# ----------------------------------------------------------------------------- waits


def value(m: Machine, kind: str, key: object) -> int:
    """The current value of a signal slot (`kind` "slot") or a counter."""
    if kind == "slot":
        return m.state.slots.get(key, 0)  # type: ignore[call-overload, no-any-return]
    return m.state.counters.get(key, 0)  # type: ignore[call-overload, no-any-return]


def wait_ready(m: Machine, op: OpInst) -> bool:
    w = m.plan.waits[(op.rank, op.index)]
    expected = w.expected(m.state.epochs[op.rank])
    return expected is not None and value(m, w.kind, w.key) >= expected


def _nothing_counted(m: Machine, op: OpInst) -> None:
    """A `wait_count` on a counter nothing counts to returns at once: say so."""
    w = m.plan.waits[(op.rank, op.index)]
    if w.kind == "counter" and not any(w.totals or (w.total,)) and not w.hand:
        m.report(explain.nothing_counted(op, w.what()))


def wait(m: Machine, p: int, op: OpInst) -> None:
    """Join what the increments the wait needed knew.

    Fed by one queue, the increments land in order and the one that reached the
    expected value knows all before it; later ones are not waited for.  Fed by
    several, any of them may have been needed: join all that landed.
    """
    _nothing_counted(m, op)
    w = m.plan.waits[(op.rank, op.index)]
    if (w.kind, w.key) in m.plan.multi_source:
        table = m.hb.slot if w.kind == "slot" else m.hb.counter
        m.hb.absorb(p, table.get(w.key))
        return
    m.hb.absorb(p, m.hb.fin_vc.get(source(m, op)))


def wait_need(m: Machine, op: OpInst) -> int:
    expected = m.plan.waits[(op.rank, op.index)].expected(m.state.epochs[op.rank])
    return NEVER if expected is None else expected


def source(m: Machine, op: OpInst) -> int:
    """The transfer whose increment let the wait pass (-1: none needed or none yet)."""
    w = m.plan.waits[(op.rank, op.index)]
    expected = w.expected(m.state.epochs[op.rank])
    landed = m.state.landed.get((w.kind, w.key), [])
    if not expected:
        return -1
    return next((xid for total, xid in landed if total >= expected), -1)


def wait_why(m: Machine, op: OpInst) -> str:
    w = m.plan.waits[(op.rank, op.index)]
    seen = value(m, w.kind, w.key)
    expected = w.expected(m.state.epochs[op.rank])
    what = w.what()
    if expected is None:
        return f"waits on {what}, but it is the {explain.ordinal(w.ordinal)} of {w.waits} " \
               f"waits and only {w.total} increments come per launch; has seen {seen}"
    unit = " bytes" if w.kind == "counter" else ""
    return f"waits for {what} to reach {expected}{unit}, has seen {seen}"


def reset_counter(m: Machine, p: int, op: OpInst) -> None:
    assert op.counter is not None
    key = (op.rank, op.counter)
    m.access(counter_cell(key), Who("reset", op.rank, op.index, m.state.epochs[op.rank],
                                    counter_cell(key)), p)
    m.state.counters[key] = 0
    m.state.landed.pop(("counter", key), None)
    m.hb.counter.pop(key, None)


# ----------------------------------------------------------------------------- barriers


def barrier_key(m: Machine, op: OpInst) -> tuple[int, int, int]:
    """The barrier an op meets: (launch of its rank, kernel, generation)."""
    return (m.state.epochs[op.rank], *m.plan.barrier_gen[(op.rank, op.index)])


def _parties(m: Machine, op: OpInst) -> int:
    """Every (rank, block) of the kernel's grid takes part (see `plan._barriers`)."""
    return len(m.plan.barrier_parties[op.kernel])


def barrier_complete(m: Machine, op: OpInst) -> bool:
    return m.state.barrier.get(barrier_key(m, op), 0) >= _parties(m, op)


def arrive(m: Machine, p: int, op: OpInst) -> None:
    g = barrier_key(m, op)
    m.state.barrier[g] = m.state.barrier.get(g, 0) + 1
    m.hb.barrier[g] = HB.merge(m.hb.barrier.get(g), m.hb.vc[p])
    m.touched.update(m.barrier_procs)


def depart(m: Machine, p: int, op: OpInst) -> None:
    m.hb.absorb(p, m.hb.barrier.get(barrier_key(m, op)))


def barrier_why(m: Machine, op: OpInst) -> str:
    g = barrier_key(m, op)
    return f"waits in barrier {g[2]}: {m.state.barrier.get(g, 0)} of " \
           f"{_parties(m, op)} parties arrived"
