"""Posting, doorbells and the engine queues.

What `put`/`get` (posting), `commit` (ringing), `fence` (landing order) and
`quiet` (draining) do to the engine queues, and each step of a queue's process:
read the source piece by piece, write the destination piece by piece, then finish
(signal, count, free the queue for the next transfer).  Also the footprints of
posting and ringing, for partial-order reduction.  The functions act on a `Machine`
(`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ccogen.ir.instance import OpInst, RegionInst
from ccogen.sim import explain
from ccogen.sim.footprint import Key, Keys, wr
from ccogen.sim.plan import QueueKey, TransferSpec
from ccogen.sim.race import HB, Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import QState, Xfer, counter_cell, pieces, sub

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine

# ----------------------------------------------------------------------------- posting


def queue_cell(key: QueueKey) -> RegionInst:
    """An engine queue's reservation as a one-byte region: plain posts read it, aggregate
    posts and commits write it, so that a commit (or a batch) unordered with another
    issuer's post on the queue is a race (E028; posts alone commute)."""
    rank, peer, queue = key
    return RegionInst(f"queue {peer}/{queue}", 0, 1, rank)


def post_group(m: Machine, p: int, op: OpInst) -> None:
    """The posting group of `op` posts its transfers together; plain ones ring.

    A plain post on a queue that holds aggregate ops no `commit` has rung spins (MORI's
    in-order commit chain): the group's issuers stop there for good (E020, or E028 when
    the batch came from an issuer unordered with this one)."""
    plan, st, hb = m.plan, m.state, m.hb
    members = plan.members[(op.rank, op.index)]
    procs = [plan.proc_of_op[(op.rank, i)][0] for i in members]
    for index, q in zip(members[1:], procs[1:], strict=True):
        member = plan.op_at((op.rank, index), st.epochs[op.rank])
        hb.tick(q, *m.fork_joins(q, member))
        if member.loads:
            m.read_loads(q, member)
    together = hb.vc[p]
    for q in procs[1:]:
        together = np.maximum(together, hb.vc[q])
    behind: list[int] = []
    for q, spec in zip(procs, plan.posts_at((op.rank, op.index), st.epochs[op.rank]),
                       strict=True):
        hb.tick(q, together)
        qi = plan.queue_index[spec.queue]
        _reserve(m, q, spec)
        ahead = _unrung_ahead(m, qi)
        xid = len(st.xfers)
        parts = pieces(spec.size, m.npieces) if spec.src is not None else ()
        after = tuple(x for x in m.fenced.get(q, ()) if st.xfers[x].spec.queue
                      != spec.queue)  # one queue lands in order anyway
        st.xfers.append(Xfer(xid, spec, st.epochs[op.rank], q, parts, after,
                             len(st.queues[qi].items)))
        m.last_posted.setdefault(q, {})[spec.queue] = xid
        hb.post[xid] = hb.vc[q]
        st.queues[qi].items.append(xid)
        if spec.op.aggregate:
            continue
        if ahead:  # the slot waits for a committed pointer only `commit` moves
            behind.append(xid)
            if _ordered_before(m, ahead, q):  # else E028 says why (`_reserve`)
                m.report(explain.behind_batch(spec.op, [st.xfers[x] for x in ahead]))
        else:
            ring_queue(m, qi, hb.vc[q])
    if behind:  # the group's leader spins in `submitPacket`; its wave with it
        for q in procs:
            m.spinning[q] = behind[0]
        return
    for index, q in zip(members[1:], procs[1:], strict=True):
        m.complete(q, plan.op((op.rank, index)))


def _ordered_before(m: Machine, xids: list[int], proc: int) -> bool:
    """Every transfer in `xids` was posted before `proc`'s current step (by its clock)."""
    vc = m.hb.vc[proc]
    return all(m.hb.post[x][(p := m.state.xfers[x].poster)] <= vc[p] for x in xids)


def _unrung_ahead(m: Machine, qi: int) -> list[int]:
    """Aggregate transfers reserved on queue `qi` and not yet committed."""
    qs = m.state.queues[qi]
    return [x for x in qs.items[qs.rung:] if m.state.xfers[x].spec.op.aggregate]


def _reserve(m: Machine, p: int, spec: TransferSpec) -> None:
    """A post reserves a slot of its queue: with aggregate ops or commits around, other
    issuers' posts and commits on that queue must be ordered with it (E028)."""
    op = spec.op
    cell = queue_cell(spec.queue)
    role = "queue-w" if op.aggregate else "queue-r"
    m.access(cell, Who(role, op.rank, op.index, m.state.epochs[op.rank], cell), p)


def commit_access(m: Machine, p: int, op: OpInst) -> None:
    """A `commit` writes its queue's reservation (see `_reserve`)."""
    assert op.peer is not None and op.queue is not None
    cell = queue_cell((op.rank, op.peer, op.queue))
    m.access(cell, Who("queue-w", op.rank, op.index, m.state.epochs[op.rank], cell), p)


# ----------------------------------------------------------------------------- fences


def fence(m: Machine, p: int) -> None:
    """`fence()`: what `p` posted so far lands before what it posts from now on."""
    deps = tuple(m.last_posted.get(p, {}).values())
    m.fenced[p] = deps
    m.fence_targets.update(deps)


def fence_clear(m: Machine, qs: QState) -> bool:
    """The head transfer may write: whatever a fence orders before it has landed."""
    x = m.state.xfers[qs.items[qs.head]]
    if not x.after or qs.phase != len(x.pieces):
        return True
    return all(landed(m, d) for d in x.after)


def landed(m: Machine, xid: int) -> bool:
    """The last byte of transfer `xid` has been written."""
    x = m.state.xfers[xid]
    qs = m.state.queues[m.plan.queue_index[x.spec.queue]]
    return qs.head > x.slot or (qs.head == x.slot and qs.phase >= 2 * len(x.pieces))


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
    epoch = m.state.epochs[rank]
    key = (rank, kernel, epoch)
    if key in m.boundaries:
        return
    m.boundaries.add(key)
    stale = [x for x in unrung(m) if x.spec.op.rank == rank
             and x.spec.op.kernel < kernel and x.epoch == epoch]
    report_unrung(m, stale, "")


def unrung(m: Machine) -> list[Xfer]:
    """Aggregate transfers never rung (a plain one behind them was reported already)."""
    spun = {m.state.xfers[x].spec.queue for x in m.spinning.values()}
    return [x for i in m.state.unrung() if (x := m.state.xfers[i]).spec.op.aggregate
            and x.spec.queue not in spun]


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
        lands = [hb.land.get(d) for d in x.after] if n == 0 else []  # a fenced signal
        hb.tick(proc, hb.post[x.id], hb.ring.get(x.id), *lands)
    elif phase == n and x.after:  # the first write: after what a fence put before it
        hb.tick(proc, *(hb.land.get(d) for d in x.after))
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
        if qs.head < len(qs.items) and not st.xfers[qs.items[qs.head]].pieces:
            # the next is a `signal` without data: consumed as soon as it is the head,
            # so a `quiet` of its rank may pass now
            m.touch_rank(m.plan.queues[qi][0])
        return StepRecord(proc, RecordKind.XFER, x.epoch, xid=x.id, phase=phase, complete=True)
    qs.phase += 1
    return StepRecord(proc, RecordKind.XFER, x.epoch, xid=x.id, phase=phase)


def _read_piece(m: Machine, qi: int, x: Xfer, piece: int, proc: int) -> None:
    spec = x.spec
    assert spec.src is not None
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
    if m.rounds is not None:  # the roundings travel with the bytes (`sim.rounding`)
        codes = m.staged_rounds.setdefault(qi, [])
        if piece == 0:
            codes.clear()
        codes.append(m.rounds.view(region).copy())
    if piece == len(x.pieces) - 1:
        m.hb.consumed[qi] = HB.merge(m.hb.consumed.get(qi), m.hb.vc[proc])
        m.touch_rank(spec.queue[0])


def _write_piece(m: Machine, qi: int, x: Xfer, piece: int, proc: int) -> None:
    spec = x.spec
    assert spec.dst is not None
    region = sub(spec.dst, *x.pieces[piece])
    m.access(region, Who("dst", spec.op.rank, spec.op.index, x.epoch, spec.dst, x.id), proc)
    if m.memory is not None:
        m.memory.view(region)[:] = m.staged[qi][piece]
    if m.rounds is not None:
        m.rounds.view(region)[:] = m.staged_rounds[qi][piece]
    if piece == len(x.pieces) - 1:
        m.hb.land[x.id] = m.hb.vc[proc]
        if x.id in m.fence_targets:  # transfers fenced behind it may write now
            m.touched.update(range(m.plan.nissuers, m.plan.host))


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
