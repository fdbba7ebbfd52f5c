"""The machine: processes, their steps, and what each step does to the state.

A schedule is a sequence of process ids; `Machine.step(p)` runs the next step of
process `p`, which must be in `Machine.enabled`.  Processes:

* issuers run their op instances in program order (`ops.IMPLS` says how, per
  `OpKind`; posting and queues in `queues`, waits and barriers in `waits`);
* each engine queue `(rank, peer, queue)` runs its rung transfers one after the
  other, each in steps: read the source piece by piece, write the destination
  piece by piece (a reader in between sees a mix of old and new bytes), then
  finish: signal, count and free the queue for the next transfer (`queues`);
* one host per rank ends that rank's launch when every issuer of the rank has
  finished it (its caller between two launches, `host`): it checks for aggregate
  ops never rung, reads the rank's outputs for `ensure`, writes its inputs and
  starts the rank's next launch.  It waits for no other rank (a rank may run launch
  N+1 while its peers are in launch N; with `between_launches: host_sync` every
  rank's next launch waits for every host) and not for the engines: transfers in
  flight carry over.  A postcondition is evaluated once the hosts of the ranks its
  sides live on have read them.

Without `memory` the machine runs control only (what exhaustive exploration needs);
with it every byte moves.  `describe(p)` gives the footprint of a process's next
step for partial-order reduction (`describe`); `explain_deadlock()` says why
nothing can move (`deadlock`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ccogen.ir import values
from ccogen.ir.instance import OpInst, RegionInst
from ccogen.sim import deadlock, explain, host, queues, waits
from ccogen.sim.describe import describe_step
from ccogen.sim.explain import Finding
from ccogen.sim.footprint import Mems, StepDesc
from ccogen.sim.ops import IMPLS
from ccogen.sim.plan import OpKey, Plan, QueueKey
from ccogen.sim.race import HB, Access, RaceLog, Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.rounding import Rounds, counted
from ccogen.sim.state import Memory, State, WindowKey, first_value


class StepLimit(Exception):
    """The instance's `StepBudget` is spent (the `sim-steps` limit)."""


class StepBudget:
    """Steps every machine of one instance may take together (`--limit sim-steps`),
    counted as they are taken; `StepLimit` on the first one past `limit`."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0


class Machine:
    """One schedule's machine (see the module docstring)."""

    def __init__(self, plan: Plan, *, epochs: int = 2, pieces: int = 2,
                 memory: Memory | None = None,
                 image: dict[WindowKey, np.ndarray] | None = None,
                 budget: StepBudget | None = None) -> None:
        self.plan = plan
        self.budget = budget
        self.epochs = epochs
        self.npieces = pieces
        self.state = State.initial(plan)
        self.hb = HB(plan.nprocs, budget.limit if budget is not None else None)
        self.races = RaceLog()
        self.findings: list[Finding] = []
        self.memory = memory
        self.image = image
        # launch -> the inputs as each rank's caller left them before it (`init(...)`)
        self.init_snap: dict[int, dict[WindowKey, np.ndarray]] = {}
        if memory is not None:
            self.init_snap[0] = memory.snapshot(plan.init_windows)
        # roundings to f16/bf16 per byte, where the instance can round (`sim.rounding`)
        self.rounds = Rounds.zeros(memory) if memory is not None and counted(plan.instance) \
            else None
        self.staged_rounds: dict[int, list[np.ndarray]] = {}
        self.output_rounds: dict[tuple[int, int], np.ndarray] = {}  # (launch, check)
        self.outputs: dict[tuple[int, int, int], np.ndarray] = {}  # (launch, check, side)
        # (launch, check) -> it held; (launch, -1): every check of the launch evaluated
        self.evaluated: dict[tuple[int, int], bool] = {}
        self.pending: dict[int, list[int]] = {}  # launch -> its checks not evaluated yet
        # id(a launch's instance) -> rank -> its checks (`host._checks_of`; shared by clones)
        self.checks_by_rank: dict[int, dict[int, tuple[int, ...]]] = {}
        # `host._join`'s memo: (the clocks, their join) by call site; shared by clones
        self.join_memo: dict[str, tuple[list[np.ndarray], np.ndarray]] = {}
        self.staged: dict[int, list[np.ndarray]] = {}
        self.enabled: list[int] = []
        self._at: dict[int, int] = {}
        self.touched: set[int] = set()  # processes to recheck after this step
        self.quiet_cache: dict[OpKey, tuple[int, ...]] = {}  # a quiet's queues
        # a host step's memory by (rank, launch, launches): shared by clones, as quiet_cache
        self.host_mems: dict[tuple[int, int, int], Mems] = {}
        self.barrier_procs = {plan.proc_of_op[key][0] for key in plan.barrier_gen}
        self.boundaries: set[tuple[int, int, int]] = set()  # (rank, kernel, epoch) seen
        self.spinning: dict[int, int] = {}  # proc -> transfer it posted behind a batch
        self.last_posted: dict[int, dict[QueueKey, int]] = {}  # proc -> queue -> last xid
        self.fenced: dict[int, tuple[int, ...]] = {}  # proc -> what its last fence orders
        self.fence_targets: set[int] = set()  # transfers some later transfer lands after
        # while rechecking after a step (nothing changes meanwhile): whether every rank has
        # ended launch e, by e, and the lowest launch (`host_sync`; asked of every host and
        # issuer, each an O(ranks) scan, O(ranks²) per step at 512 ranks otherwise)
        self._ended: dict[int, bool] | None = None
        self._lowest: int | None = None
        self._recheck_all(range(plan.nprocs))

    def clone(self) -> Machine:
        """An independent copy (cheap without memory: exploration clones control only)."""
        m = Machine.__new__(Machine)
        m.__dict__.update(self.__dict__)
        m.state, m.hb, m.races = self.state.copy(), self.hb.copy(), self.races.copy()
        m.findings, m.enabled, m._at = list(self.findings), list(self.enabled), dict(self._at)
        m.touched, m.boundaries = set(), set(self.boundaries)
        m.spinning = dict(self.spinning)
        m.last_posted = {p: dict(d) for p, d in self.last_posted.items()}
        m.fenced, m.fence_targets = dict(self.fenced), set(self.fence_targets)
        if self.memory is not None:
            m.memory = self.memory.copy()
            m.staged = {q: [piece.copy() for piece in pieces] for q, pieces in self.staged.items()}
            m.init_snap = {e: dict(snap) for e, snap in self.init_snap.items()}
            m.outputs = dict(self.outputs)
            m.evaluated = dict(self.evaluated)
            m.pending = {e: list(left) for e, left in self.pending.items()}
        if self.rounds is not None:
            m.rounds = self.rounds.copy()
            m.staged_rounds = {q: [c.copy() for c in codes]
                               for q, codes in self.staged_rounds.items()}
            m.output_rounds = dict(self.output_rounds)
        return m

    # ------------------------------------------------------------------ scheduling

    @property
    def over(self) -> bool:
        return self.state.over

    def is_ready(self, p: int) -> bool:
        plan = self.plan
        nissuers = len(plan.issuers)  # `plan.nissuers`, `plan.host`: asked on every recheck
        if p < nissuers:
            return self._issuer_ready(p)
        first_host = nissuers + len(plan.queues)
        if p < first_host:
            qs = self.state.queues[p - nissuers]
            return qs.head < qs.rung and queues.fence_clear(self, qs)
        st, rank = self.state, p - first_host
        if not plan.host_sync:
            return (st.epochs[rank] < self.epochs
                    and st.finished[rank] == len(plan.rank_issuers[rank]))
        e = st.epochs[rank]  # a host barrier: every rank has ended this launch first
        return e < self.epochs and self._all_ended(e)

    def _all_ended(self, e: int) -> bool:
        """Whether every rank has ended launch `e` (`host_sync`)."""
        memo = self._ended
        if memo is not None and e in memo:
            return memo[e]
        st, plan = self.state, self.plan
        ended = all(st.epochs[r] > e or st.finished[r] == len(plan.rank_issuers[r])
                    for r in range(plan.instance.nranks))
        if memo is not None:
            memo[e] = ended
        return ended

    def _lowest_epoch(self) -> int:
        if self._ended is None:
            return min(self.state.epochs)
        if self._lowest is None:
            self._lowest = min(self.state.epochs)
        return self._lowest

    def _recheck_all(self, procs: Iterable[int]) -> None:
        """`_recheck` every process of `procs`, in order; the state does not change
        meanwhile, so what every process asks of all ranks is computed once."""
        plan, st = self.plan, self.state
        if not plan.host_sync:  # `_recheck` inlined: the hottest loop of a simulation
            at, enabled, is_ready = self._at, self.enabled, self.is_ready
            for q in procs:
                if is_ready(q):
                    if q not in at:
                        at[q] = len(enabled)
                        enabled.append(q)
                elif q in at:
                    i, last = at.pop(q), enabled.pop()
                    if last != q:
                        enabled[i], at[last] = last, i
            return
        # `host_sync` touches every host (an issuer ended its launch) or every issuer (a
        # host stepped): the answers `is_ready` would give, without its calls, where the
        # barrier alone decides them
        first_host, nissuers, issuers = plan.host, plan.nissuers, plan.issuers
        epochs, lowest = st.epochs, min(st.epochs)
        self._ended, self._lowest = {}, lowest
        try:
            for q in procs:
                if q >= first_host:
                    e = epochs[q - first_host]
                    ready = e < self.epochs and self._all_ended(e)
                elif q < nissuers and epochs[issuers[q].rank] > lowest:
                    ready = False
                else:
                    ready = self.is_ready(q)
                self._set_ready(q, ready)
        finally:
            self._ended, self._lowest = None, None

    def _recheck(self, p: int) -> None:
        self._set_ready(p, self.is_ready(p))

    def _set_ready(self, p: int, ready: bool) -> None:
        at = self._at
        if ready and p not in at:
            at[p] = len(self.enabled)
            self.enabled.append(p)
        elif not ready and p in at:
            i, last = at.pop(p), self.enabled.pop()
            if last != p:
                self.enabled[i], at[last] = last, i

    def step(self, p: int) -> StepRecord:
        plan = self.plan
        if (budget := self.budget) is not None:
            budget.used += 1
            if budget.used > budget.limit:
                raise StepLimit
        if p < plan.nissuers:
            record = self._issuer_step(p)
        elif p < plan.host:
            record = queues.queue_step(self, p - plan.nissuers)
        else:
            record = host.host_step(self, p - plan.host)
        touched, self.touched = self.touched, set()
        touched.add(p)
        self._recheck_all(touched)
        return record

    def touch_rank(self, rank: int) -> None:
        """Recheck every issuer of `rank` after this step."""
        self.touched.update(self.plan.rank_issuers[rank])

    # ------------------------------------------------------------------ issuers

    def current(self, p: int) -> OpInst | None:
        plan = self.plan
        ip = plan.issuers[p]
        pc, ops = self.state.pcs[p], ip.ops
        if pc >= len(ops):
            return None
        # the op as this launch has it (`launch % K` rotates its regions; drawn contents per
        # launch give it their lengths and loaded values)
        rank = ip.rank
        return plan.at(self.state.epochs[rank]).ranks[rank][ops[pc]]

    def preds_done(self, op: OpInst) -> bool:
        done = self.state.done[op.rank]
        for i in op.preds:  # noqa: SIM110 (a loop, not a generator: asked on every recheck)
            if not done[i]:
                return False
        return True

    def _issuer_ready(self, p: int) -> bool:
        # `current`, `preds_done` and `loads_first` inlined: asked on every recheck
        if p in self.spinning:
            return False
        plan, st = self.plan, self.state
        ip = plan.issuers[p]
        pc, ops = st.pcs[p], ip.ops
        if pc >= len(ops):
            return False
        rank = ip.rank
        epoch = st.epochs[rank]
        op = plan.at(epoch).ranks[rank][ops[pc]]
        done = st.done[rank]
        for i in op.preds:
            if not done[i]:
                return False
        if plan.host_sync and epoch > self._lowest_epoch():
            return False  # a host barrier: every rank's caller ends the launch first
        members = plan.members.get((rank, op.index))
        if members is None or (len(members) > 1 and not self._group_ready(rank, members)):
            return False
        impl = IMPLS[op.kind]
        if op.loads and impl.blocks and st.phase[p] == 0 and not st.loaded[p]:
            return True  # its loads first (`loads_first`)
        return impl.ready(self, p, op)

    def loads_first(self, p: int, op: OpInst) -> bool:
        """Whether the next step of `p` runs only the `load`s before `op`: an op that may
        wait (a `wait_signal`, a `quiet`) runs its loads in a step of their own, when the
        issuer reaches it; it may then wait, and a write that lands meanwhile comes after
        the load (a load before the wait for its data reads the stale bytes)."""
        st = self.state
        return bool(op.loads) and IMPLS[op.kind].blocks and st.phase[p] == 0 and \
            not st.loaded[p]

    def _group_ready(self, rank: int, members: tuple[int, ...]) -> bool:
        for index in members[1:]:
            proc, pos = self.plan.proc_of_op[(rank, index)]
            if self.state.pcs[proc] != pos or not self.preds_done(self.plan.op((rank, index))):
                return False
        return True

    def _issuer_step(self, p: int) -> StepRecord:
        st = self.state
        op = self.current(p)
        assert op is not None
        first = st.pcs[p] == 0 and st.phase[p] == 0
        epoch = st.epochs[op.rank]
        start = host.launch_start(self, op.rank, epoch) if first else None
        self.hb.tick(p, start, *self.fork_joins(p, op))
        if op.kernel > 0:
            queues.kernel_boundary(self, op.rank, op.kernel)
        phase = st.phase[p]
        if self.loads_first(p, op):
            self.read_loads(p, op)
            st.loaded[p] = 1
            return StepRecord(p, RecordKind.OP, epoch, (op.rank, op.index), phase=phase,
                              complete=False, rank=op.rank)
        if phase == 0 and op.loads and not st.loaded[p]:
            self.read_loads(p, op)
        source = waits.source(self, op) if op.kind.traits.waits else -1
        complete = IMPLS[op.kind].run(self, p, op)
        if complete:
            self.complete(p, op)
        else:
            st.phase[p] += 1
        return StepRecord(p, RecordKind.OP, epoch, (op.rank, op.index), phase=phase,
                          complete=complete, source=source, rank=op.rank)

    def fork_joins(self, p: int, op: OpInst) -> list[np.ndarray | None]:
        """Program order from another issuer (an issuer block forks after, and joins
        before, what the block leader runs): the clocks its predecessors completed with."""
        if self.state.phase[p]:
            return []
        plan = self.plan
        return [self.hb.done.get((op.rank, i)) for i in op.preds
                if plan.proc_of_op[(op.rank, i)][0] != p]

    def complete(self, p: int, op: OpInst) -> None:
        """Issuer `p` completed `op`: move on to its next op."""
        st = self.state
        self.hb.done[(op.rank, op.index)] = self.hb.vc[p]
        st.done[op.rank][op.index] = 1
        st.pcs[p] += 1
        st.phase[p] = 0
        st.loaded[p] = 0
        self.touched.add(p)
        self.touched.update(self.plan.watchers[p])
        if st.pcs[p] == len(self.plan.issuers[p].ops):
            st.finished[op.rank] += 1
            self.touched.add(self.plan.host_of(op.rank))
            if self.plan.host_sync:
                self.touched.update(range(self.plan.host, self.plan.nprocs))

    # ------------------------------------------------------------------ memory

    def copy(self, p: int, op: OpInst) -> None:
        assert op.src is not None and op.dst is not None
        epoch = self.state.epochs[op.rank]
        self.access(op.src, Who("copy-r", op.rank, op.index, epoch, op.src), p)
        self.access(op.dst, Who("copy-w", op.rank, op.index, epoch, op.dst), p)
        if self.memory is not None:
            self.memory.view(op.dst)[:] = self.memory.view(op.src)
        if self.rounds is not None:
            self.rounds.view(op.dst)[:] = self.rounds.view(op.src)

    def reduce(self, p: int, op: OpInst) -> None:
        """`reduce`: load every source (a peer's over the link), combine, store `dst`."""
        assert op.dst is not None and op.reduce_op is not None and op.dtype is not None
        epoch = self.state.epochs[op.rank]
        for src in op.srcs:
            self.access(src, Who("copy-r", op.rank, op.index, epoch, src), p)
        self.access(op.dst, Who("copy-w", op.rank, op.index, epoch, op.dst), p)
        if self.memory is not None:
            terms = [self.memory.view(src) for src in op.srcs]
            src_dtypes = [self.plan.instance.dtype(src.window) for src in op.srcs]
            result = values.combine(op.reduce_op, terms, op.weights, op.dtype, src_dtypes)
            self.memory.view(op.dst)[:] = result
        if self.rounds is not None:
            self.rounds.reduce(op, self.plan.instance)

    def read_loads(self, p: int, op: OpInst) -> None:
        """The `load`s `op`'s issuer runs just before it, read from simulated memory now: a
        read racing with a write of the element is E031/E032 like any other, and a value
        other than the one the launch's inputs define (the instance's) is a stale one."""
        epoch = self.state.epochs[op.rank]
        for x in op.loads:
            self.access(x.region, Who("load", op.rank, op.index, epoch, x.region), p)
            if self.memory is not None and x.value is not None:
                dtype = self.plan.instance.dtype(x.region.window)
                read = first_value(self.memory.view(x.region), dtype)
                if read != x.value:
                    self.report(explain.stale_load(op, x, read, epoch, self.epochs))

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

    # ------------------------------------------------------------------ deadlocks and reduction

    def explain_deadlock(self) -> None:
        """No process can move and the launches are not over: say why."""
        deadlock.explain_deadlock(self)

    def describe(self, p: int) -> StepDesc | None:
        """The next step of `p` (None when it has none), for partial-order reduction."""
        return describe_step(self, p)


__all__ = ["Machine", "StepRecord"]
