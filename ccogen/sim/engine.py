"""The machine: processes, their steps, and what each step does to the state.

A schedule is a sequence of process ids; `Machine.step(p)` runs the next step of
process `p`, which must be in `Machine.enabled`.  Processes:

* issuers run their op instances in program order (`ops.IMPLS` says how);
* each engine queue `(rank, peer, queue)` runs its rung transfers one after the
  other, each in steps: read the source piece by piece, write the destination
  piece by piece (a reader in between sees a mix of old and new bytes), then
  finish: signal, count and free the queue for the next transfer;
* one host per rank ends that rank's launch when every issuer of the rank has
  finished it (its caller between two launches): it checks for aggregate ops never
  rung, reads the rank's outputs for `ensure`, writes its inputs and starts the
  rank's next launch.  It waits for no other rank (a rank may run launch N+1 while
  its peers are in launch N; with `between_launches: host_sync` every rank's next
  launch waits for every host) and not for the engines: transfers in flight carry
  over.  A postcondition is evaluated once the hosts of the ranks its sides live on
  have read them.

Without `memory` the machine runs control only (what exhaustive exploration needs);
with it every byte moves.  `describe(p)` gives the footprint of a process's next
step for partial-order reduction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ccogen.ir.instance import OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.sim import explain
from ccogen.sim.explain import Blocked, Finding
from ccogen.sim.footprint import NEVER, Key, Keys, Mems, StepDesc, add, rd, wr
from ccogen.sim.ops import IMPLS
from ccogen.sim.plan import OpKey, Plan, QueueKey, TransferSpec
from ccogen.sim.race import HB, Access, RaceLog, Who
from ccogen.sim.state import Memory, QState, State, WindowKey, Xfer, pieces


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one step did, for traces: an issuer op, a transfer step or the host."""

    proc: int
    kind: str  # "op", "xfer" or "host"
    epoch: int
    op: OpKey | None = None
    xid: int = -1
    phase: int = 0
    complete: bool = False
    source: int = -1  # a wait: the transfer whose increment let it pass
    rank: int = -1  # an op's or a host's rank


ORIGIN_PROBE = 8  # wrong bytes needed in a row to search for where they came from


def sub(region: RegionInst, a: int, b: int) -> RegionInst:
    return RegionInst(region.window, region.start + a, region.start + b, region.rank)


def counter_cell(key: tuple[int, str]) -> RegionInst:
    """A counter as a one-byte region, so that a reset and counted adds can race."""
    return RegionInst(f"counter {key[1]}", 0, 1, key[0])


def queue_cell(key: QueueKey) -> RegionInst:
    """An engine queue's reservation as a one-byte region: plain posts read it, aggregate
    posts and commits write it, so that a commit (or a batch) unordered with another
    issuer's post on the queue is a race (E028; posts alone commute)."""
    rank, peer, queue = key
    return RegionInst(f"queue {peer}/{queue}", 0, 1, rank)


class Machine:
    """One schedule's machine (see the module docstring)."""

    def __init__(self, plan: Plan, *, epochs: int = 2, pieces: int = 2,
                 memory: Memory | None = None,
                 image: dict[WindowKey, np.ndarray] | None = None) -> None:
        self.plan = plan
        self.epochs = epochs
        self.npieces = pieces
        self.state = State.initial(plan)
        self.hb = HB(plan.nprocs)
        self.races = RaceLog()
        self.findings: list[Finding] = []
        self.memory = memory
        self.image = image
        # launch -> the inputs as each rank's caller left them before it (`init(...)`)
        self.init_snap: dict[int, dict[WindowKey, np.ndarray]] = {}
        if memory is not None:
            self.init_snap[0] = memory.snapshot(plan.init_windows)
        self.outputs: dict[tuple[int, int, int], np.ndarray] = {}  # (launch, check, side)
        self.evaluated: set[tuple[int, int]] = set()
        self.staged: dict[int, list[np.ndarray]] = {}
        self.enabled: list[int] = []
        self._at: dict[int, int] = {}
        self._touched: set[int] = set()
        self._quiet: dict[OpKey, tuple[int, ...]] = {}
        self._parties_procs = {plan.proc_of_op[key][0] for key in plan.barrier_gen}
        self._boundaries: set[tuple[int, int, int]] = set()
        self.spinning: dict[int, int] = {}  # proc -> transfer it posted behind a batch
        self.last_posted: dict[int, dict[QueueKey, int]] = {}  # proc -> queue -> last xid
        self.fenced: dict[int, tuple[int, ...]] = {}  # proc -> what its last fence orders
        self.fence_targets: set[int] = set()  # transfers some later transfer must land after
        for p in range(plan.nprocs):
            self._recheck(p)

    def clone(self) -> Machine:
        """An independent copy (cheap without memory: exploration clones control only)."""
        m = Machine.__new__(Machine)
        m.__dict__.update(self.__dict__)
        m.state, m.hb, m.races = self.state.copy(), self.hb.copy(), self.races.copy()
        m.findings, m.enabled, m._at = list(self.findings), list(self.enabled), dict(self._at)
        m._touched, m._boundaries = set(), set(self._boundaries)
        m.spinning = dict(self.spinning)
        m.last_posted = {p: dict(d) for p, d in self.last_posted.items()}
        m.fenced, m.fence_targets = dict(self.fenced), set(self.fence_targets)
        if self.memory is not None:
            m.memory = self.memory.copy()
            m.staged = {q: [piece.copy() for piece in pieces] for q, pieces in self.staged.items()}
            m.init_snap = {e: dict(snap) for e, snap in self.init_snap.items()}
            m.outputs = dict(self.outputs)
            m.evaluated = set(self.evaluated)
        return m

    # ------------------------------------------------------------------ scheduling

    @property
    def over(self) -> bool:
        return self.state.over

    def is_ready(self, p: int) -> bool:
        plan = self.plan
        if p < plan.nissuers:
            return self._issuer_ready(p)
        if p < plan.host:
            qs = self.state.queues[p - plan.nissuers]
            return qs.head < qs.rung and self._fence_clear(qs)
        st, rank = self.state, p - plan.host
        if not plan.host_sync:
            return (st.epochs[rank] < self.epochs
                    and st.finished[rank] == len(plan.rank_issuers[rank]))
        e = st.epochs[rank]  # a host barrier: every rank has ended this launch first
        return e < self.epochs and all(
            st.epochs[r] > e or st.finished[r] == len(plan.rank_issuers[r])
            for r in range(plan.instance.nranks))

    def _recheck(self, p: int) -> None:
        ready, at = self.is_ready(p), self._at
        if ready and p not in at:
            at[p] = len(self.enabled)
            self.enabled.append(p)
        elif not ready and p in at:
            i, last = at.pop(p), self.enabled.pop()
            if last != p:
                self.enabled[i], at[last] = last, i

    def step(self, p: int) -> StepRecord:
        plan = self.plan
        if p < plan.nissuers:
            record = self._issuer_step(p)
        elif p < plan.host:
            record = self._queue_step(p - plan.nissuers)
        else:
            record = self._host_step(p - plan.host)
        touched, self._touched = self._touched, set()
        touched.add(p)
        for q in touched:
            self._recheck(q)
        return record

    def _touch_rank(self, rank: int) -> None:
        self._touched.update(self.plan.rank_issuers[rank])

    # ------------------------------------------------------------------ issuers

    def current(self, p: int) -> OpInst | None:
        ip = self.plan.issuers[p]
        pc = self.state.pcs[p]
        return self.plan.instance.ranks[ip.rank][ip.ops[pc]] if pc < len(ip.ops) else None

    def _preds_done(self, op: OpInst) -> bool:
        done = self.state.done[op.rank]
        return all(done[i] for i in op.preds)

    def _issuer_ready(self, p: int) -> bool:
        op = self.current(p)
        if op is None or p in self.spinning or not self._preds_done(op):
            return False
        if self.plan.host_sync and self.state.epochs[op.rank] > min(self.state.epochs):
            return False  # a host barrier: every rank's caller ends the launch first
        members = self.plan.members.get((op.rank, op.index))
        if members is None or (len(members) > 1 and not self._group_ready(op.rank, members)):
            return False
        return IMPLS[op.kind].ready(self, p, op)

    def _group_ready(self, rank: int, members: tuple[int, ...]) -> bool:
        for index in members[1:]:
            proc, pos = self.plan.proc_of_op[(rank, index)]
            if self.state.pcs[proc] != pos or not self._preds_done(self.plan.op((rank, index))):
                return False
        return True

    def _issuer_step(self, p: int) -> StepRecord:
        st = self.state
        op = self.current(p)
        assert op is not None
        first = st.pcs[p] == 0 and st.phase[p] == 0
        epoch = st.epochs[op.rank]
        self.hb.tick(p, self._launch_start(op.rank, epoch) if first else None)
        if st.phase[p] == 0:
            self._join_preds(p, op)
        if op.kernel > 0:
            self._kernel_boundary(op.rank, op.kernel)
        phase = st.phase[p]
        source = self._source(op) if op.kind.traits.waits else -1
        complete = IMPLS[op.kind].run(self, p, op)
        if complete:
            self._complete(p, op)
        else:
            st.phase[p] += 1
        return StepRecord(p, "op", epoch, (op.rank, op.index), phase=phase,
                          complete=complete, source=source, rank=op.rank)

    def _join_preds(self, p: int, op: OpInst) -> None:
        """Program order across issuers: know what the predecessors run elsewhere knew."""
        for pred in self.plan.cross_preds.get((op.rank, op.index), ()):
            self.hb.absorb(p, self.hb.done.get((op.rank, pred)))

    def _complete(self, p: int, op: OpInst) -> None:
        st = self.state
        st.done[op.rank][op.index] = 1
        if (op.rank, op.index) in self.plan.handoff:
            self.hb.done[(op.rank, op.index)] = self.hb.vc[p]
        st.pcs[p] += 1
        st.phase[p] = 0
        self._touched.add(p)
        self._touched.update(self.plan.watchers[p])
        if st.pcs[p] == len(self.plan.issuers[p].ops):
            st.finished[op.rank] += 1
            self._touched.add(self.plan.host_of(op.rank))
            if self.plan.host_sync:
                self._touched.update(range(self.plan.host, self.plan.nprocs))

    # ------------------------------------------------------------------ posting and queues

    def post_group(self, p: int, op: OpInst) -> None:
        plan, st, hb = self.plan, self.state, self.hb
        members = plan.members[(op.rank, op.index)]
        procs = [plan.proc_of_op[(op.rank, i)][0] for i in members]
        for index, q in zip(members[1:], procs[1:], strict=True):
            self._join_preds(q, plan.op((op.rank, index)))
        together = hb.vc[p]
        for q in procs[1:]:
            together = np.maximum(together, hb.vc[q])
        behind: list[int] = []
        for q, spec in zip(procs, plan.posts[(op.rank, op.index)], strict=True):
            hb.tick(q, together)
            qi = plan.queue_index[spec.queue]
            self._reserve(q, spec)
            ahead = self._unrung_ahead(qi)
            xid = len(st.xfers)
            after = tuple(x for x in self.fenced.get(q, ()) if st.xfers[x].spec.queue
                          != spec.queue)  # one queue lands in order anyway
            st.xfers.append(Xfer(xid, spec, st.epochs[op.rank], q,
                                 pieces(spec.size, self.npieces),
                                 after, len(st.queues[qi].items)))
            self.last_posted.setdefault(q, {})[spec.queue] = xid
            hb.post[xid] = hb.vc[q]
            st.queues[qi].items.append(xid)
            if spec.op.aggregate:
                continue
            if ahead:  # the slot waits for a committed pointer only `commit` moves
                behind.append(xid)
                if self._ordered_before(ahead, q):  # else E028 says why (`_reserve`)
                    self.report(explain.behind_batch(spec.op,
                                                     [self.state.xfers[x] for x in ahead]))
            else:
                self._ring(qi, hb.vc[q])
        if behind:  # the group's leader spins in `submitPacket`; its wave with it
            for q in procs:
                self.spinning[q] = behind[0]
            return
        for index, q in zip(members[1:], procs[1:], strict=True):
            self._complete(q, plan.op((op.rank, index)))

    def _ordered_before(self, xids: list[int], proc: int) -> bool:
        """Every transfer in `xids` was posted before `proc`'s current step (by its clock)."""
        vc = self.hb.vc[proc]
        return all(self.hb.post[x][(p := self.state.xfers[x].poster)] <= vc[p] for x in xids)

    def fence(self, p: int) -> None:
        """`fence()`: what `p` posted so far lands before what it posts from now on."""
        deps = tuple(self.last_posted.get(p, {}).values())
        self.fenced[p] = deps
        self.fence_targets.update(deps)

    def _fence_clear(self, qs: QState) -> bool:
        """The head transfer may write: whatever a fence orders before it has landed."""
        x = self.state.xfers[qs.items[qs.head]]
        if not x.after or qs.phase != len(x.pieces):
            return True
        return all(self.landed(d) for d in x.after)

    def landed(self, xid: int) -> bool:
        """The last byte of transfer `xid` has been written."""
        x = self.state.xfers[xid]
        qs = self.state.queues[self.plan.queue_index[x.spec.queue]]
        return qs.head > x.slot or (qs.head == x.slot and qs.phase >= 2 * len(x.pieces))

    def _unrung_ahead(self, qi: int) -> list[int]:
        """Aggregate transfers reserved on queue `qi` and not yet committed."""
        qs = self.state.queues[qi]
        return [x for x in qs.items[qs.rung:] if self.state.xfers[x].spec.op.aggregate]

    def _reserve(self, p: int, spec: TransferSpec) -> None:
        """A post reserves a slot of its queue: with aggregate ops or commits around, other
        issuers' posts and commits on that queue must be ordered with it (E028)."""
        op = spec.op
        cell = queue_cell(spec.queue)
        role = "queue-w" if op.aggregate else "queue-r"
        self.access(cell, Who(role, op.rank, op.index, self.state.epochs[op.rank], cell), p)

    def commit_access(self, p: int, op: OpInst) -> None:
        assert op.peer is not None and op.queue is not None
        cell = queue_cell((op.rank, op.peer, op.queue))
        self.access(cell, Who("queue-w", op.rank, op.index, self.state.epochs[op.rank], cell),
                    p)

    def ring(self, key: QueueKey, p: int) -> None:
        qi = self.plan.queue_index.get(key)
        if qi is not None:
            self._ring(qi, self.hb.vc[p])

    def _ring(self, qi: int, vc: np.ndarray) -> None:
        qs = self.state.queues[qi]
        for xid in qs.items[qs.rung:]:
            self.hb.ring[xid] = vc
        qs.rung = len(qs.items)
        self._touched.add(self.plan.nissuers + qi)
        self._touch_rank(self.plan.queues[qi][0])

    def _kernel_boundary(self, rank: int, kernel: int) -> None:
        """An op of a later kernel: aggregate ops of earlier kernels must have been rung."""
        epoch = self.state.epochs[rank]
        key = (rank, kernel, epoch)
        if key in self._boundaries:
            return
        self._boundaries.add(key)
        stale = [x for x in self._unrung() if x.spec.op.rank == rank
                 and x.spec.op.kernel < kernel and x.epoch == epoch]
        self._report_unrung(stale, "")

    def _unrung(self) -> list[Xfer]:
        """Aggregate transfers never rung (a plain one behind them was reported already)."""
        spun = {self.state.xfers[x].spec.queue for x in self.spinning.values()}
        return [x for i in self.state.unrung() if (x := self.state.xfers[i]).spec.op.aggregate
                and x.spec.queue not in spun]

    def _report_unrung(self, xfers: list[Xfer], waiting: str) -> None:
        by_queue: dict[QueueKey, list[OpInst]] = {}
        for x in xfers:
            by_queue.setdefault(x.spec.queue, []).append(x.spec.op)
        for ops in by_queue.values():
            self.report(explain.uncommitted(ops, xfers[0].epoch, self.epochs, waiting))

    def _consumed(self, qs: QState) -> int:
        if qs.head < len(qs.items):
            x = self.state.xfers[qs.items[qs.head]]
            return qs.head + (qs.phase >= len(x.pieces))
        return qs.head

    def quiet_queues(self, op: OpInst) -> tuple[int, ...]:
        key = (op.rank, op.index)
        found = self._quiet.get(key)
        if found is None:
            found = tuple(i for i, (r, peer, q) in enumerate(self.plan.queues)
                          if r == op.rank and op.peer in (None, peer) and op.queue in (None, q))
            self._quiet[key] = found
        return found

    def drained(self, op: OpInst) -> bool:
        queues = self.state.queues
        return all(self._consumed(queues[qi]) >= queues[qi].rung for qi in self.quiet_queues(op))

    def join_consumed(self, p: int, op: OpInst) -> None:
        for qi in self.quiet_queues(op):
            self.hb.absorb(p, self.hb.consumed.get(qi))

    def _queue_step(self, qi: int) -> StepRecord:
        st, hb = self.state, self.hb
        qs = st.queues[qi]
        x = st.xfers[qs.items[qs.head]]
        proc, n, phase = self.plan.nissuers + qi, len(x.pieces), qs.phase
        if phase == 0:
            hb.tick(proc, hb.post[x.id], hb.ring.get(x.id))
        elif phase == n and x.after:  # the first write: after what a fence put before it
            hb.tick(proc, *(hb.land.get(d) for d in x.after))
        else:
            hb.tick(proc)
        if phase < n:
            self._read_piece(qi, x, phase, proc)
        elif phase < 2 * n:
            self._write_piece(qi, x, phase - n, proc)
        else:
            self._finish(x, proc)
            qs.head += 1
            qs.phase = 0
            return StepRecord(proc, "xfer", x.epoch, xid=x.id, phase=phase, complete=True)
        qs.phase += 1
        return StepRecord(proc, "xfer", x.epoch, xid=x.id, phase=phase)

    def _read_piece(self, qi: int, x: Xfer, piece: int, proc: int) -> None:
        spec = x.spec
        region = sub(spec.src, *x.pieces[piece])
        self.access(region, Who("src", spec.op.rank, spec.op.index, x.epoch, spec.src, x.id), proc)
        if self.memory is not None:
            staged = self.staged.setdefault(qi, [])
            if piece == 0:
                staged.clear()
            view = self.memory.view(region)
            # a window nothing writes cannot change between the read and the write
            staged.append(view.copy() if (region.rank, region.window) in self.memory.written
                          else view)
        if piece == len(x.pieces) - 1:
            self.hb.consumed[qi] = HB.merge(self.hb.consumed.get(qi), self.hb.vc[proc])
            self._touch_rank(spec.queue[0])

    def _write_piece(self, qi: int, x: Xfer, piece: int, proc: int) -> None:
        spec = x.spec
        region = sub(spec.dst, *x.pieces[piece])
        self.access(region, Who("dst", spec.op.rank, spec.op.index, x.epoch, spec.dst, x.id), proc)
        if self.memory is not None:
            self.memory.view(region)[:] = self.staged[qi][piece]
        if piece == len(x.pieces) - 1:
            self.hb.land[x.id] = self.hb.vc[proc]
            if x.id in self.fence_targets:  # transfers fenced behind it may write now
                self._touched.update(range(self.plan.nissuers, self.plan.host))

    def _finish(self, x: Xfer, proc: int) -> None:
        st, hb = self.state, self.hb
        vc = hb.vc[proc]
        hb.finish[x.id] = int(vc[proc])
        hb.fin_vc[x.id] = vc
        spec = x.spec
        for slot in (spec.remote_slot, spec.local_slot):
            if slot is not None:
                st.slots[slot] = st.slots.get(slot, 0) + 1
                hb.slot[slot] = HB.merge(hb.slot.get(slot), vc)
                st.landed.setdefault(("slot", slot), []).append((st.slots[slot], x.id))
                self._touch_rank(slot[0])
        if spec.counter is not None:
            c = spec.counter
            self.access(counter_cell(c), Who("count", spec.op.rank, spec.op.index, x.epoch,
                                             counter_cell(c), x.id), proc)
            st.counters[c] = st.counters.get(c, 0) + spec.size
            hb.counter[c] = HB.merge(hb.counter.get(c), vc)
            st.landed.setdefault(("counter", c), []).append((st.counters[c], x.id))
            self._touch_rank(c[0])

    # ------------------------------------------------------------------ waits and barriers

    def value(self, kind: str, key: object) -> int:
        if kind == "slot":
            return self.state.slots.get(key, 0)  # type: ignore[call-overload, no-any-return]
        return self.state.counters.get(key, 0)  # type: ignore[call-overload, no-any-return]

    def wait_ready(self, op: OpInst) -> bool:
        w = self.plan.waits[(op.rank, op.index)]
        expected = w.expected(self.state.epochs[op.rank])
        return expected is not None and self.value(w.kind, w.key) >= expected

    def _nothing_counted(self, op: OpInst) -> None:
        """A `wait_count` on a counter nothing counts to returns at once: say so."""
        w = self.plan.waits[(op.rank, op.index)]
        if w.kind == "counter" and w.total == 0 and not w.hand:
            self.report(explain.nothing_counted(op, w.what()))

    def wait(self, p: int, op: OpInst) -> None:
        """Join what the increments the wait needed knew.

        Fed by one queue, the increments land in order and the one that reached the
        expected value knows all before it; later ones are not waited for.  Fed by
        several, any of them may have been needed: join all that landed.
        """
        self._nothing_counted(op)
        w = self.plan.waits[(op.rank, op.index)]
        if (w.kind, w.key) in self.plan.multi_source:
            table = self.hb.slot if w.kind == "slot" else self.hb.counter
            self.hb.absorb(p, table.get(w.key))
            return
        source = self._source(op)
        self.hb.absorb(p, self.hb.fin_vc.get(source))

    def wait_need(self, op: OpInst) -> int:
        expected = self.plan.waits[(op.rank, op.index)].expected(self.state.epochs[op.rank])
        return NEVER if expected is None else expected

    def _source(self, op: OpInst) -> int:
        w = self.plan.waits[(op.rank, op.index)]
        expected = w.expected(self.state.epochs[op.rank])
        landed = self.state.landed.get((w.kind, w.key), [])
        if not expected:
            return -1
        return next((xid for total, xid in landed if total >= expected), -1)

    def wait_why(self, op: OpInst) -> str:
        w = self.plan.waits[(op.rank, op.index)]
        seen = self.value(w.kind, w.key)
        expected = w.expected(self.state.epochs[op.rank])
        what = w.what()
        if expected is None:
            return f"waits on {what}, but it is the {explain.ordinal(w.ordinal)} of {w.waits} " \
                   f"waits and only {w.total} increments come per launch; has seen {seen}"
        unit = " bytes" if w.kind == "counter" else ""
        return f"waits for {what} to reach {expected}{unit}, has seen {seen}"

    def reset_counter(self, p: int, op: OpInst) -> None:
        assert op.counter is not None
        key = (op.rank, op.counter)
        self.access(counter_cell(key), Who("reset", op.rank, op.index,
                                           self.state.epochs[op.rank], counter_cell(key)), p)
        self.state.counters[key] = 0
        self.state.landed.pop(("counter", key), None)
        self.hb.counter.pop(key, None)

    def barrier_key(self, op: OpInst) -> tuple[int, int, int]:
        """The barrier an op meets: (launch of its rank, kernel, generation)."""
        return (self.state.epochs[op.rank], *self.plan.barrier_gen[(op.rank, op.index)])

    def _parties(self, op: OpInst) -> int:
        return len(self.plan.barrier_parties[op.kernel])

    def barrier_complete(self, op: OpInst) -> bool:
        return self.state.barrier.get(self.barrier_key(op), 0) >= self._parties(op)

    def arrive(self, p: int, op: OpInst) -> None:
        g = self.barrier_key(op)
        self.state.barrier[g] = self.state.barrier.get(g, 0) + 1
        self.hb.barrier[g] = HB.merge(self.hb.barrier.get(g), self.hb.vc[p])
        self._touched.update(self._parties_procs)

    def depart(self, p: int, op: OpInst) -> None:
        self.hb.absorb(p, self.hb.barrier.get(self.barrier_key(op)))

    def barrier_why(self, op: OpInst) -> str:
        g = self.barrier_key(op)
        return f"waits in barrier {g[2]}: {self.state.barrier.get(g, 0)} of " \
               f"{self._parties(op)} parties arrived"

    def group_why(self, op: OpInst) -> str:
        return "waits for the other lanes of its posting group to reach the same `put`"

    # ------------------------------------------------------------------ memory

    def copy(self, p: int, op: OpInst) -> None:
        assert op.src is not None and op.dst is not None
        epoch = self.state.epochs[op.rank]
        self.access(op.src, Who("copy-r", op.rank, op.index, epoch, op.src), p)
        self.access(op.dst, Who("copy-w", op.rank, op.index, epoch, op.dst), p)
        if self.memory is not None:
            self.memory.view(op.dst)[:] = self.memory.view(op.src)

    def access(self, region: RegionInst, who: Who, proc: int) -> None:
        vc = self.hb.vc[proc]
        new = Access((region.rank, region.window), region.start, region.stop, proc,
                     int(vc[proc]), vc, who)
        for earlier in self.races.access(new):
            finding = explain.race(self._race_context(), earlier, new)
            self.report(finding)

    def _race_context(self) -> explain.RaceContext:
        return explain.RaceContext(self.plan, self.state.xfers, self.hb.post, self.hb.finish,
                                   self.plan.nissuers)

    def report(self, finding: Finding) -> None:
        if self.races.first_report(finding.key):
            self.findings.append(finding)

    @staticmethod
    def mem_key(region: RegionInst, write: bool) -> tuple[WindowKey, int, int, bool]:
        return ((region.rank, region.window), region.start, region.stop, write)

    # ------------------------------------------------------------------ the hosts

    def _host_step(self, rank: int) -> StepRecord:
        """Rank `rank`'s caller between two of its launches.

        It runs once every issuer of the rank has ended the launch: it checks for
        aggregate ops never rung, reads the rank's outputs (the postconditions' regions
        of it) and, when another launch follows, writes its inputs and starts the
        rank's next launch.  Nothing here waits for other ranks (unless the protocol
        declares `between_launches: host_sync`, where every rank's next launch waits
        for every rank's step) or for the engines: transfers in flight carry over.
        """
        st, hb, plan = self.state, self.hb, self.plan
        proc = plan.host_of(rank)
        joined = hb.vc[proc]
        ranks = range(plan.instance.nranks) if plan.host_sync else (rank,)
        for p in (p for r in ranks for p in plan.rank_issuers[r]):
            joined = np.maximum(joined, hb.vc[p])
        epoch = st.epochs[rank]
        hb.host[(rank, epoch)] = hb.tick(proc, joined)
        self._report_unrung([x for x in self._unrung() if x.epoch == epoch
                             and x.spec.op.rank == rank], "")
        self._read_outputs(rank, epoch, proc)
        st.epochs[rank] += 1
        if st.epochs[rank] < self.epochs:
            self._next_launch(rank, proc)
        st.over = all(e >= self.epochs for e in st.epochs)
        self._evaluate_ready()
        if not st.in_flight() and len(set(st.epochs)) == 1:
            self.races.prune(self._hosts_clock(st.epochs[0] - 1))
        self._touched.update(plan.rank_issuers[rank])
        if plan.host_sync:
            self._touched.update(range(plan.nissuers))
        return StepRecord(proc, "host", epoch, complete=True, rank=rank)

    def _hosts_clock(self, epoch: int) -> np.ndarray:
        """What every rank's caller knew at the end of launch `epoch`."""
        clocks = [self.hb.host[(r, epoch)] for r in range(self.plan.instance.nranks)]
        return np.minimum.reduce(clocks)

    def _launch_start(self, rank: int, epoch: int) -> np.ndarray | None:
        """What the first ops of `rank`'s launch `epoch` know: its caller's step before it
        (every caller's with `host_sync`)."""
        if epoch == 0:
            return None
        if not self.plan.host_sync:
            return self.hb.host.get((rank, epoch - 1))
        clocks = [self.hb.host[(r, epoch - 1)] for r in range(self.plan.instance.nranks)]
        return np.maximum.reduce(clocks)

    def _next_launch(self, rank: int, proc: int) -> None:
        st, plan = self.state, self.plan
        for p in plan.rank_issuers[rank]:
            st.pcs[p] = 0
            st.phase[p] = 0
        st.done[rank] = bytearray(len(plan.instance.ranks[rank]))
        st.finished[rank] = sum(1 for p in plan.rank_issuers[rank] if not plan.issuers[p].ops)
        check = self._init_check()
        epoch = st.epochs[rank]
        for r, window in sorted(plan.init_windows):
            if r != rank:
                continue
            region = RegionInst(window, 0, dict(plan.windows)[window], rank)
            self.access(region, Who("input", rank, -1, epoch, region, check=check), proc)
        if self.memory is not None:
            mine = frozenset(k for k in plan.init_windows if k[0] == rank)
            self.init_snap.setdefault(epoch, {}).update(self.memory.snapshot(mine))

    def _init_check(self) -> int:
        return next((i for i, c in enumerate(self.plan.instance.checks)
                     if c.left_init or c.right_init), -1)

    def _read_outputs(self, rank: int, epoch: int, proc: int) -> None:
        """The caller reads every region of `rank` a postcondition reads, as it is now."""
        for index, check in enumerate(self.plan.instance.checks):
            for side, (region, init) in enumerate(((check.left, check.left_init),
                                                   (check.right, check.right_init))):
                if init or region.rank != rank:
                    continue
                self.access(region, Who("ensure", rank, -1, epoch, region, check=index), proc)
                if self.memory is not None:
                    self.outputs[(epoch, index, side)] = self.memory.view(region).copy()

    def _side(self, epoch: int, index: int, side: int) -> np.ndarray | None:
        check = self.plan.instance.checks[index]
        region, init = (check.left, check.left_init) if side == 0 else (check.right,
                                                                          check.right_init)
        if not init:
            return self.outputs.get((epoch, index, side))
        snap = self.init_snap.get(epoch, {})
        if (region.rank, region.window) not in snap:
            return None  # that rank's caller has not started this launch yet
        return snap[(region.rank, region.window)][region.start:region.stop]

    def _evaluate_ready(self) -> None:
        """Evaluate every postcondition of a launch once the callers read both its sides."""
        if self.memory is None:
            return
        for epoch in range(min(max(self.state.epochs), self.epochs - 1) + 1):
            for index in range(len(self.plan.instance.checks)):
                if (epoch, index) in self.evaluated:
                    continue
                left, right = self._side(epoch, index, 0), self._side(epoch, index, 1)
                if left is not None and right is not None:
                    self.evaluated.add((epoch, index))
                    self._evaluate(index, epoch, left, right)

    def _evaluate(self, index: int, epoch: int, left: np.ndarray, right: np.ndarray) -> None:
        check = self.plan.instance.checks[index]
        equal = np.array_equal(left, right)
        if equal == (check.op == "=="):
            return
        origin = self._origin(check.left, left, right) if check.op == "==" and \
            not check.left_init else ""
        self.report(explain.postcondition(check, index, left, right, origin, epoch,
                                          self.epochs))

    def _origin(self, region: RegionInst, actual: np.ndarray, expected: np.ndarray) -> str:
        """Search the initial image for the first run of wrong bytes."""
        differ = np.flatnonzero(actual != expected)
        first = int(differ[0])
        run = first + 1
        while run < actual.size and run - first < 64 and actual[run] != expected[run]:
            run += 1
        where = sub(region, first, run)
        probe = actual[first:run].tobytes()
        if self.image is None or len(probe) < ORIGIN_PROBE:
            return ""  # too few bytes to say where they came from
        if self.image[(region.rank, region.window)][where.start:where.stop].tobytes() == probe:
            return explain.origin_note(None, True, where)
        for (rank, window), data in sorted(self.image.items()):
            at = data.tobytes().find(probe)
            if at >= 0:
                return explain.origin_note(RegionInst(window, at, at + len(probe), rank),
                                           False, where)
        return explain.origin_note(None, False, where)

    # ------------------------------------------------------------------ deadlocks

    def explain_deadlock(self) -> None:
        """No process can move and the launches are not over: say why."""
        if self.spinning:  # a post spins behind a batch: E020 or E028 said so when it began
            return
        blocked = self._blocked()
        epoch = self.state.epoch
        unrung = self._unrung()
        if unrung:
            waiting = "; ".join(b.note() for b in blocked[:3])
            self._report_unrung(unrung, f"meanwhile {waiting}" if waiting else "")
            return
        never = [b for b in blocked if b.wait is not None and (b.wait.base is None
                                                              or b.wait.base > b.wait.total)]
        for b in never:
            self.report(explain.unsatisfiable(self.plan, b, epoch, self.epochs))
        if never or not blocked:
            return
        finished = [r for r in range(self.plan.instance.nranks)
                    if all(self.current(p) is None for p in self.plan.rank_issuers[r])]
        self.report(explain.deadlock(blocked, finished, self._barrier_note(), epoch,
                                     self.epochs))

    def _blocked(self) -> list[Blocked]:
        out: list[Blocked] = []
        for p in range(self.plan.nissuers):
            op = self.current(p)
            if op is None:
                continue
            w = self.plan.waits.get((op.rank, op.index))
            seen = self.value(w.kind, w.key) if w is not None else 0
            out.append(Blocked(op, self._why(p, op), w, seen,
                               w.expected(self.state.epochs[op.rank]) if w else None,
                               op.kind is OpKind.BARRIER))
        out.sort(key=lambda b: (b.op.rank, b.op.index))
        return out

    def _why(self, p: int, op: OpInst) -> str:
        st = self.state
        if self.plan.host_sync and st.epochs[op.rank] > min(st.epochs):
            late = [r for r, e in enumerate(st.epochs) if e < st.epochs[op.rank]]
            return (f"waits at the host barrier before launch {st.epochs[op.rank] + 1} "
                    f"(`between_launches: host_sync`) for rank{'s' if len(late) > 1 else ''} "
                    f"{', '.join(map(str, late))}")
        if not self._preds_done(op):
            return f"waits for the other issuers of rank {op.rank} to get here"
        if self.plan.members.get((op.rank, op.index)) is None:
            return "waits for the other lanes of its posting group to reach the same `put`"
        return IMPLS[op.kind].blocked(self, p, op)

    def _barrier_note(self) -> str:
        for kernel, parties in sorted(self.plan.barrier_parties.items()):
            counts = {(r, str(i)): n for r, i, n in parties}
            if len(set(counts.values())) <= 1:
                continue
            parts = [f"rank {r} ({who}) {n} time{'s' if n != 1 else ''}"
                     for (r, who), n in sorted(counts.items())]
            name = self.plan.instance.kernels[kernel].name
            return f"`barrier()` is called per launch in kernel `{name}` by " + ", ".join(parts)
        return ""

    # ------------------------------------------------------------------ partial-order reduction

    def describe(self, p: int) -> StepDesc | None:
        """The next step of `p` (None when it has none), for partial-order reduction."""
        plan = self.plan
        if p < plan.nissuers:
            return self._describe_issuer(p)
        if p < plan.host:
            return self._describe_queue(p - plan.nissuers)
        st, rank = self.state, p - plan.host
        if st.epochs[rank] >= self.epochs:
            return None
        mems = tuple(self.mem_key(r, False) for c in plan.instance.checks
                     for r, init in ((c.left, c.left_init), (c.right, c.right_init))
                     if not init and r.rank == rank)
        if st.epochs[rank] + 1 < self.epochs:
            mems += tuple(((r, w), 0, dict(plan.windows)[w], True)
                          for r, w in plan.init_windows if r == rank)
        e = st.epochs[rank]
        ranks = range(plan.instance.nranks) if plan.host_sync else (rank,)
        return StepDesc(("h", rank, e), self.is_ready(p),
                        (*(rd(("fin", r, e)) for r in ranks), wr(("epoch", rank, e))), mems)

    def _describe_issuer(self, p: int) -> StepDesc | None:
        st, plan = self.state, self.plan
        op = self.current(p)
        if op is None:
            return None
        members = plan.members.get((op.rank, op.index))
        if members is None:
            return None  # its group's leader posts for it
        keys, mems = IMPLS[op.kind].footprint(self, p, op)
        keys += self._order_keys(p, op, members)
        also = tuple(plan.proc_of_op[(op.rank, i)][0] for i in members[1:])
        return StepDesc(("i", p, st.epochs[op.rank], st.pcs[p], st.phase[p], op.rank),
                        self.is_ready(p), keys, mems, also)

    def _order_keys(self, p: int, op: OpInst, members: tuple[int, ...]) -> Keys:
        st, plan = self.state, self.plan
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
        if st.phase[p] == IMPLS[op.kind].steps - 1:  # the step completes the op
            keys += [wr(("done", op.rank, i)) for i in members]
            if pos == len(ops) - 1:
                keys.append(add(("fin", op.rank, epoch)))
        return tuple(keys)

    def post_footprint(self, op: OpInst) -> Keys:
        plan, st = self.plan, self.state
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

    def ring_footprint(self, key: QueueKey) -> Keys:
        qi = self.plan.queue_index.get(key)
        if qi is None:
            return ()
        qs = self.state.queues[qi]
        if qs.rung == len(qs.items):
            return ()
        return (*(wr(("qi", qi, k)) for k in range(qs.rung, len(qs.items))), wr(("qr", qi)))

    def _describe_queue(self, qi: int) -> StepDesc | None:
        st = self.state
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
            mems = (self.mem_key(sub(spec.src, *x.pieces[phase]), False),)
        elif phase < 2 * n:
            mems = (self.mem_key(sub(spec.dst, *x.pieces[phase - n]), True),)
            if phase == n:  # a fence: waits for earlier transfers to land
                keys = tuple(rd(("land", d)) for d in x.after)
            if phase == 2 * n - 1 and x.id in self.fence_targets:
                keys += (wr(("land", x.id)),)
        else:
            keys = tuple(add(("slot", s), st.slots.get(s, 0))
                         for s in (spec.remote_slot, spec.local_slot) if s)
            if spec.counter:
                keys += (add(("counter", spec.counter), st.counters.get(spec.counter, 0)),)
        ident = ("x", spec.op.rank, spec.op.index, x.epoch, phase)
        return StepDesc(ident, qs.head < qs.rung, keys, mems)
