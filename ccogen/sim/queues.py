"""Posting, doorbells and the engine queues.

What `put`/`get` (posting), `commit` (ringing) and `quiet` (draining) do to the
engine queues, and each step of a queue's process: read the source piece by piece,
write the destination piece by piece, then finish (signal, count, free the queue for
the next transfer).  Also the footprints of posting and ringing, for partial-order
reduction.  The functions act on a `Machine` (`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ccogen.ir.instance import OpInst
from ccogen.sim import explain
from ccogen.sim.footprint import Key, Keys, wr
from ccogen.sim.plan import QueueKey
from ccogen.sim.race import HB, Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import QState, Xfer, counter_cell, pieces, sub

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine

# ----------------------------------------------------------------------------- posting


def post_group(m: Machine, p: int, op: OpInst) -> None:
    """The posting group of `op` posts its transfers together; plain ones ring."""
    plan, st, hb = m.plan, m.state, m.hb
    members = plan.members[(op.rank, op.index)]
    procs = [plan.proc_of_op[(op.rank, i)][0] for i in members]
    together = hb.vc[p]
    for q in procs[1:]:
        together = np.maximum(together, hb.vc[q])
    for q, spec in zip(procs, plan.posts[(op.rank, op.index)], strict=True):
        hb.tick(q, together)
        xid = len(st.xfers)
        st.xfers.append(Xfer(xid, spec, st.epoch, q, pieces(spec.size, m.npieces)))
        hb.post[xid] = hb.vc[q]
        qi = plan.queue_index[spec.queue]
        st.queues[qi].items.append(xid)
        if not spec.op.aggregate:
            ring_queue(m, qi, hb.vc[q])
    for index, q in zip(members[1:], procs[1:], strict=True):
        m.complete(q, plan.op((op.rank, index)))


def group_why(m: Machine, op: OpInst) -> str:
    return "waits for the other lanes of its posting group to reach the same `put`"


def ring(m: Machine, key: QueueKey, p: int) -> None:
    """`commit`: ring what was posted on `key` (nothing when nothing was ever posted)."""
    qi = m.plan.queue_index.get(key)
    if qi is not None:
        ring_queue(m, qi, m.hb.vc[p])


def ring_queue(m: Machine, qi: int, vc: np.ndarray) -> None:
    qs = m.state.queues[qi]
    for xid in qs.items[qs.rung:]:
        m.hb.ring[xid] = vc
    qs.rung = len(qs.items)
    m.touched.add(m.plan.nissuers + qi)
    m.touch_rank(m.plan.queues[qi][0])


def kernel_boundary(m: Machine, rank: int, kernel: int) -> None:
    """An op of a later kernel: aggregate ops of earlier kernels must have been rung."""
    key = (rank, kernel, m.state.epoch)
    if key in m.boundaries:
        return
    m.boundaries.add(key)
    stale = [x for x in unrung(m) if x.spec.op.rank == rank
             and x.spec.op.kernel < kernel and x.epoch == m.state.epoch]
    report_unrung(m, stale, "")


def unrung(m: Machine) -> list[Xfer]:
    return [m.state.xfers[x] for x in m.state.unrung()]


def report_unrung(m: Machine, xfers: list[Xfer], waiting: str) -> None:
    by_queue: dict[QueueKey, list[OpInst]] = {}
    for x in xfers:
        by_queue.setdefault(x.spec.queue, []).append(x.spec.op)
    for ops in by_queue.values():
        m.report(explain.uncommitted(ops, xfers[0].epoch, m.epochs, waiting))


# ----------------------------------------------------------------------------- quiet


def _consumed(m: Machine, qs: QState) -> int:
    if qs.head < len(qs.items):
        x = m.state.xfers[qs.items[qs.head]]
        return qs.head + (qs.phase >= len(x.pieces))
    return qs.head


def quiet_queues(m: Machine, op: OpInst) -> tuple[int, ...]:
    key = (op.rank, op.index)
    found = m.quiet_cache.get(key)
    if found is None:
        found = tuple(i for i, (r, peer, q) in enumerate(m.plan.queues)
                      if r == op.rank and op.peer in (None, peer) and op.queue in (None, q))
        m.quiet_cache[key] = found
    return found


def drained(m: Machine, op: OpInst) -> bool:
    queues = m.state.queues
    return all(_consumed(m, queues[qi]) >= queues[qi].rung for qi in quiet_queues(m, op))


def join_consumed(m: Machine, p: int, op: OpInst) -> None:
    for qi in quiet_queues(m, op):
        m.hb.absorb(p, m.hb.consumed.get(qi))


# ----------------------------------------------------------------------------- queue steps


def queue_step(m: Machine, qi: int) -> StepRecord:
    st, hb = m.state, m.hb
    qs = st.queues[qi]
    x = st.xfers[qs.items[qs.head]]
    proc, n, phase = m.plan.nissuers + qi, len(x.pieces), qs.phase
    if phase == 0:
        hb.tick(proc, hb.post[x.id], hb.ring.get(x.id))
    else:
        hb.tick(proc)
    if phase < n:
        _read_piece(m, qi, x, phase, proc)
    elif phase < 2 * n:
        _write_piece(m, qi, x, phase - n, proc)
    else:
        _finish(m, x, proc)
        qs.head += 1
        qs.phase = 0
        return StepRecord(proc, RecordKind.XFER, x.epoch, xid=x.id, phase=phase, complete=True)
    qs.phase += 1
    return StepRecord(proc, RecordKind.XFER, x.epoch, xid=x.id, phase=phase)


def _read_piece(m: Machine, qi: int, x: Xfer, piece: int, proc: int) -> None:
    spec = x.spec
    region = sub(spec.src, *x.pieces[piece])
    m.access(region, Who("src", spec.op.rank, spec.op.index, x.epoch, spec.src, x.id), proc)
    if m.memory is not None:
        staged = m.staged.setdefault(qi, [])
        if piece == 0:
            staged.clear()
        view = m.memory.view(region)
        # a window nothing writes cannot change between the read and the write
        staged.append(view.copy() if (region.rank, region.window) in m.memory.written
                      else view)
    if piece == len(x.pieces) - 1:
        m.hb.consumed[qi] = HB.merge(m.hb.consumed.get(qi), m.hb.vc[proc])
        m.touch_rank(spec.queue[0])


def _write_piece(m: Machine, qi: int, x: Xfer, piece: int, proc: int) -> None:
    spec = x.spec
    region = sub(spec.dst, *x.pieces[piece])
    m.access(region, Who("dst", spec.op.rank, spec.op.index, x.epoch, spec.dst, x.id), proc)
    if m.memory is not None:
        m.memory.view(region)[:] = m.staged[qi][piece]


def _finish(m: Machine, x: Xfer, proc: int) -> None:
    st, hb = m.state, m.hb
    vc = hb.vc[proc]
    hb.finish[x.id] = int(vc[proc])
    hb.fin_vc[x.id] = vc
    spec = x.spec
    for slot in (spec.remote_slot, spec.local_slot):
        if slot is not None:
            st.slots[slot] = st.slots.get(slot, 0) + 1
            hb.slot[slot] = HB.merge(hb.slot.get(slot), vc)
            st.landed.setdefault(("slot", slot), []).append((st.slots[slot], x.id))
            m.touch_rank(slot[0])
    if spec.counter is not None:
        c = spec.counter
        m.access(counter_cell(c), Who("count", spec.op.rank, spec.op.index, x.epoch,
                                      counter_cell(c), x.id), proc)
        st.counters[c] = st.counters.get(c, 0) + spec.size
        hb.counter[c] = HB.merge(hb.counter.get(c), vc)
        st.landed.setdefault(("counter", c), []).append((st.counters[c], x.id))
        m.touch_rank(c[0])


# ----------------------------------------------------------------------------- footprints


def post_footprint(m: Machine, op: OpInst) -> Keys:
    plan, st = m.plan, m.state
    keys: list[Key] = []
    extra: dict[int, int] = {}
    for spec in plan.posts[(op.rank, op.index)]:
        qi = plan.queue_index[spec.queue]
        qs = st.queues[qi]
        j = len(qs.items) + extra.get(qi, 0)
        extra[qi] = extra.get(qi, 0) + 1
        keys.append(wr(("qi", qi, j)))
        if not spec.op.aggregate:
            keys += [wr(("qi", qi, k)) for k in range(qs.rung, j)]
            keys.append(wr(("qr", qi)))
    members = plan.members[(op.rank, op.index)]
    keys += [wr(("grp", plan.proc_of_op[(op.rank, i)][0])) for i in members[1:]]
    return tuple(keys)


def ring_footprint(m: Machine, key: QueueKey) -> Keys:
    qi = m.plan.queue_index.get(key)
    if qi is None:
        return ()
    qs = m.state.queues[qi]
    if qs.rung == len(qs.items):
        return ()
    return (*(wr(("qi", qi, k)) for k in range(qs.rung, len(qs.items))), wr(("qr", qi)))
