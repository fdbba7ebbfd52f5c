"""What the next step of each process touches (`StepDesc`), for partial-order reduction.

An issuer's step touches what its op touches (`ops.IMPLS[kind].footprint`), the
elements the loads before the op read (in its first step), plus the program order it
reads and completes; an engine queue's step reads or writes a piece
of memory, or adds to slots and counters when it finishes; a rank's host reads the
end of every issuer of the rank (of every rank with `host_sync`) and the rank's
`ensure` regions, and writes its inputs and buffers.  The functions act on a `Machine`
(`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccogen.ir.instance import OpInst
from ccogen.ir.postcondition import check_regions
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
    st, rank = m.state, p - plan.host
    e = st.epochs[rank]
    if e >= m.epochs:
        return None
    key = (rank, e, m.epochs)
    mems = m.host_mems.get(key)
    if mems is None:  # the same regions at every state of a launch: once per instance
        mems = m.host_mems[key] = _host_mems(m, rank, e)
    ranks = range(plan.instance.nranks) if plan.host_sync else (rank,)
    return StepDesc(("h", rank, e), m.is_ready(p),
                    (*(rd(("fin", r, e)) for r in ranks), wr(("epoch", rank, e))), mems)


def _host_mems(m: Machine, rank: int, e: int) -> Mems:
    """The memory a rank's host step `e` reads (its `ensure` regions) and writes (the next
    launch's inputs and buffers)."""
    plan = m.plan
    sizes = dict(plan.windows)
    checks = plan.at(e).checks
    mems = tuple(m.mem_key(r, False) for c in checks
                 for r, init in check_regions(c) if not init and r.rank == rank)
    mems += tuple(m.mem_key(x.region, False) for c in checks if c.rank == rank
                  for x in c.loads if not x.init)
    if e + 1 < m.epochs:
        mems += tuple(((r, w), 0, sizes[w], True) for r, w in plan.init_windows if r == rank)
        mems += tuple(((rank, b), 0, sizes[b], True) for b in sorted(plan.buffers))
    return mems


def _describe_issuer(m: Machine, p: int) -> StepDesc | None:
    st, plan = m.state, m.plan
    op = m.current(p)
    if op is None:
        return None
    members = plan.members.get((op.rank, op.index))
    if members is None:
        return None  # its group's leader posts for it
    ident = ("i", p, st.epochs[op.rank], st.pcs[p], st.phase[p], op.rank, st.loaded[p])
    loads: Mems = ()
    if plan.loads and st.phase[p] == 0 and not st.loaded[p]:  # the loads before it
        loads = tuple(m.mem_key(x.region, False) for i in members  # (and its group's)
                      for x in plan.op_at((op.rank, i), st.epochs[op.rank]).loads)
    if m.loads_first(p, op):  # a step of their own: after the op's predecessors only
        return StepDesc(ident, m.is_ready(p), _order_keys(m, p, op, members, loads=True),
                        loads)
    keys, mems = IMPLS[op.kind].footprint(m, p, op)
    keys += _order_keys(m, p, op, members)
    also = tuple(plan.proc_of_op[(op.rank, i)][0] for i in members[1:])
    return StepDesc(ident, m.is_ready(p), keys, mems + loads, also)


def _order_keys(m: Machine, p: int, op: OpInst, members: tuple[int, ...],
                loads: bool = False) -> Keys:
    """The program order a step reads (and, completing its op, writes; not `loads`: a
    step that runs only the loads before the op)."""
    st, plan = m.state, m.plan
    keys: list[Key] = []
    for index in members:
        for pred in plan.op((op.rank, index)).preds:
            if plan.proc_of_op[(op.rank, pred)][0] != p:
                keys.append(rd(("done", op.rank, pred)))
    epoch = st.epochs[op.rank]
    if st.pcs[p] == 0 and st.phase[p] == 0 and epoch > 0:
        ranks = range(plan.instance.nranks) if plan.host_sync else (op.rank,)
        keys += [rd(("epoch", r, epoch - 1)) for r in ranks]
    pos = st.pcs[p]
    ops = plan.issuers[p].ops
    if pos > 0 and plan.leader_of[(op.rank, ops[pos - 1])] != ops[pos - 1]:
        keys.append(rd(("grp", p)))
    if st.phase[p] == IMPLS[op.kind].steps - 1 and not loads:  # the step completes the op
        keys += [wr(("done", op.rank, i)) for i in members]
        if pos == len(ops) - 1:
            keys.append(add(("fin", op.rank, epoch)))
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
        assert spec.src is not None
        keys = (rd(("qi", qi, qs.head)),) if phase == 0 else ()
        keys += (wr(("cons", qi, qs.head)),) if phase == n - 1 else ()
        mems = (m.mem_key(sub(spec.src, *x.pieces[phase]), False),)
    elif phase < 2 * n:
        assert spec.dst is not None
        mems = (m.mem_key(sub(spec.dst, *x.pieces[phase - n]), True),)
        if phase == n:  # a fence: waits for earlier transfers to land
            keys = tuple(rd(("land", d)) for d in x.after)
        if phase == 2 * n - 1 and x.id in m.fence_targets:
            keys += (wr(("land", x.id)),)
    else:
        keys = tuple(add(("slot", s), st.slots.get(s, 0))
                     for s in (spec.remote_slot, spec.local_slot) if s)
        if n == 0:  # a signal without data: its only step follows its post (and a fence)
            keys += (rd(("qi", qi, qs.head)), wr(("cons", qi, qs.head)),
                     *(rd(("land", d)) for d in x.after))
        if spec.counter:
            keys += (add(("counter", spec.counter), st.counters.get(spec.counter, 0)),)
    ident = ("x", spec.op.rank, spec.op.index, x.epoch, phase)
    return StepDesc(ident, qs.head < qs.rung, keys, mems)
