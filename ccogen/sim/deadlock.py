"""Why no process can move: the findings of a stuck machine.

Aggregate ops never rung come first (what the blocked issuers wait for is a note);
then waits that can never be satisfied; else a deadlock naming every blocked issuer,
the ranks that finished, and barriers called unequally.  The functions act on a
`Machine` (`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.sim import explain, queues, waits
from ccogen.sim.explain import Blocked
from ccogen.sim.ops import IMPLS

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine


def explain_deadlock(m: Machine) -> None:
    """No process can move and the launches are not over: say why."""
    if m.spinning:  # a post spins behind a batch: E020 or E028 said so when it began
        return
    blocked = _blocked(m)
    epoch = m.state.epoch
    unrung = queues.unrung(m)
    if unrung:
        waiting = "; ".join(b.note() for b in blocked[:3])
        queues.report_unrung(m, unrung, f"meanwhile {waiting}" if waiting else "")
        return
    never = [b for b in blocked if b.never]
    for b in never:
        m.report(explain.unsatisfiable(m.plan, b, epoch, m.epochs))
    if never or not blocked:
        return
    finished = [r for r in range(m.plan.instance.nranks)
                if all(m.current(p) is None for p in m.plan.rank_issuers[r])]
    m.report(explain.deadlock(blocked, finished, _barrier_note(m), epoch, m.epochs))


def _blocked(m: Machine) -> list[Blocked]:
    out: list[Blocked] = []
    for p in range(m.plan.nissuers):
        op = m.current(p)
        if op is None:
            continue
        w = m.plan.waits.get((op.rank, op.index))
        seen = waits.value(m, w.kind, w.key) if w is not None else 0
        epoch = m.state.epochs[op.rank]
        out.append(Blocked(op, _why(m, p, op), w.at(epoch) if w else None, seen,
                           w.expected(epoch) if w else None, op.kind is OpKind.BARRIER,
                           w is not None and w.never(epoch)))
    out.sort(key=lambda b: (b.op.rank, b.op.index))
    return out


def _why(m: Machine, p: int, op: OpInst) -> str:
    st = m.state
    if m.plan.host_sync and st.epochs[op.rank] > min(st.epochs):
        late = [r for r, e in enumerate(st.epochs) if e < st.epochs[op.rank]]
        return (f"waits at the host barrier before launch {st.epochs[op.rank] + 1} "
                f"(`between_launches: host_sync`) for rank{'s' if len(late) > 1 else ''} "
                f"{', '.join(map(str, late))}")
    if not m.preds_done(op):
        return f"waits for the other issuers of rank {op.rank} to get here"
    if m.plan.members.get((op.rank, op.index)) is None:
        return "waits for the other lanes of its posting group to reach the same `put`"
    return IMPLS[op.kind].blocked(m, p, op)


def _barrier_note(m: Machine) -> str:
    for kernel, parties in sorted(m.plan.barrier_parties.items()):
        counts = {(r, str(i)): n for r, i, n in parties}
        if len(set(counts.values())) <= 1:
            continue
        parts = [f"rank {r} ({who}) {n} time{'s' if n != 1 else ''}"
                 for (r, who), n in sorted(counts.items())]
        name = m.plan.instance.kernels[kernel].name
        return f"`barrier()` is called per launch in kernel `{name}` by " + ", ".join(parts)
    return ""
