"""What the next step of each process touches (`StepDesc`), for partial-order reduction.

An issuer's step touches what its op touches (`ops.IMPLS[kind].footprint`) plus the
program order it reads and completes; an engine queue's step reads or writes a piece
of memory, or adds to slots and counters when it finishes; the host reads every
issuer's end and `ensure`'s regions.  The functions act on a `Machine`
(`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccogen.ir.instance import OpInst
from ccogen.sim.footprint import Key, Keys, Mems, StepDesc, add, rd, wr
from ccogen.sim.ops import IMPLS
from ccogen.sim.state import sub

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine


def describe_step(m: Machine, p: int) -> StepDesc | None:
    """The next step of `p` (None when it has none)."""
    plan = m.plan
    if p < plan.nissuers:
        return _describe_issuer(m, p)
    if p < plan.host:
        return _describe_queue(m, p - plan.nissuers)
    st = m.state
    if st.over:
        return None
    mems = tuple(m.mem_key(r, False) for c in plan.instance.checks
                 for r, init in ((c.left, c.left_init), (c.right, c.right_init)) if not init)
    mems += tuple(((rank, w), 0, dict(plan.windows)[w], False)
                  for rank, w in plan.init_windows)
    return StepDesc(("h", st.epoch), m.is_ready(p), (rd(("fin",)), wr(("epoch",))), mems)


def _describe_issuer(m: Machine, p: int) -> StepDesc | None:
    st, plan = m.state, m.plan
    op = m.current(p)
    if op is None:
        return None
    members = plan.members.get((op.rank, op.index))
    if members is None:
        return None  # its group's leader posts for it
    keys, mems = IMPLS[op.kind].footprint(m, p, op)
    keys += _order_keys(m, p, op, members)
    also = tuple(plan.proc_of_op[(op.rank, i)][0] for i in members[1:])
    return StepDesc(("i", p, st.epoch, st.pcs[p], st.phase[p]), m.is_ready(p), keys,
                    mems, also)


def _order_keys(m: Machine, p: int, op: OpInst, members: tuple[int, ...]) -> Keys:
    st, plan = m.state, m.plan
    keys: list[Key] = []
    for index in members:
        for pred in plan.op((op.rank, index)).preds:
            if plan.proc_of_op[(op.rank, pred)][0] != p:
                keys.append(rd(("done", op.rank, pred)))
    if st.pcs[p] == 0 and st.phase[p] == 0 and st.epoch > 0:
        keys.append(rd(("epoch",)))
    pos = st.pcs[p]
    ops = plan.issuers[p].ops
    if pos > 0 and plan.leader_of[(op.rank, ops[pos - 1])] != ops[pos - 1]:
        keys.append(rd(("grp", p)))
    if st.phase[p] == IMPLS[op.kind].steps - 1:  # the step completes the op
        keys += [wr(("done", op.rank, i)) for i in members]
        if pos == len(ops) - 1:
            keys.append(add(("fin",)))
    return tuple(keys)


def _describe_queue(m: Machine, qi: int) -> StepDesc | None:
    st = m.state
    qs = st.queues[qi]
    if qs.head >= len(qs.items):
        return None
    x = st.xfers[qs.items[qs.head]]
    spec, n, phase = x.spec, len(x.pieces), qs.phase
    keys: Keys = ()
    mems: Mems = ()
    if phase < n:
        keys = (rd(("qi", qi, qs.head)),) if phase == 0 else ()
        keys += (wr(("cons", qi, qs.head)),) if phase == n - 1 else ()
        mems = (m.mem_key(sub(spec.src, *x.pieces[phase]), False),)
    elif phase < 2 * n:
        mems = (m.mem_key(sub(spec.dst, *x.pieces[phase - n]), True),)
    else:
        keys = tuple(add(("slot", s), st.slots.get(s, 0))
                     for s in (spec.remote_slot, spec.local_slot) if s)
        if spec.counter:
            keys += (add(("counter", spec.counter), st.counters.get(spec.counter, 0)),)
    ident = ("x", spec.op.rank, spec.op.index, x.epoch, phase)
    return StepDesc(ident, qs.head < qs.rung, keys, mems)
