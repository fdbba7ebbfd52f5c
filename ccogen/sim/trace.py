"""Traces: Chrome/Perfetto trace-event JSON of a timed schedule, and diagnostic notes.

`chrome_trace(setup, cost)` runs the timed schedule (`schedule.run_timed`) and
lays it out in the Trace Event Format's JSON-object form:

* one process per rank (`pid` = rank) plus one for the hosts (one thread per
  rank: that rank's launches, which end when its caller steps in);
* in each rank one thread per issuer (block, warp or lane) and one per engine
  queue (`queue → rank P q Q`), named with `M` metadata events;
* every op as a complete (`X`) slice on its issuer's thread, from the moment it
  became the issuer's current op until it completed (a wait's slice is the time
  it spent waiting); every transfer as a slice on its queue's thread, with its
  signal or counted add as a nested slice at its end;
* flow arrows (`s`/`f`): from a post to the transfer it starts (category
  `post`), and from a signal or count to the wait it releases (category
  `signal`).

Times are microseconds from the cost model (`ccogen.sim.cost`).

`to_notes(setup, schedule)` turns a schedule into notes for a diagnostic: the
order in which issuers ran their ops and transfers landed, for the checker to
attach as a counterexample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccogen.ir.instance import OpInst
from ccogen.sim.cost import StepCosts
from ccogen.sim.engine import Machine
from ccogen.sim.explain import op_text, region_text
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.schedule import Setup, Timed, run_timed
from ccogen.sim.state import Xfer

QUEUE_TID = 1000
MIN_DUR = 0.001  # us: Perfetto drops zero-length slices from flow binding

Event = dict[str, Any]


def chrome_trace(setup: Setup, cost: StepCosts, *, label: str = "",
                 source: str = "") -> dict[str, Any]:
    machine, timed = run_timed(setup, cost)
    builder = _Builder(machine)
    for t in timed:
        builder.add(t)
    return {"traceEvents": builder.metadata() + builder.events, "displayTimeUnit": "ns",
            "otherData": {"generator": GENERATOR, "protocol": source,
                          "instance": label, "cost_model": cost.name}}


GENERATOR = "ccogen simulate"
_MARK = f'"generator":"{GENERATOR}"'.encode()


def is_trace(path: Path) -> bool:
    """Whether an existing file is a trace `chrome_trace` wrote (its `otherData`, near the
    end): `simulate --trace` replaces only such a file (`ccogen.fileio.write_output`)."""
    from ccogen.fileio import file_contains

    return file_contains(path, _MARK, tail=1 << 16)


class _Builder:
    def __init__(self, machine: Machine) -> None:
        self.m = machine
        self.plan = machine.plan
        self.events: list[Event] = []
        self.ready = [0.0] * self.plan.nprocs  # when each issuer's current op began
        self.started: dict[int, float] = {}  # xid -> start of its first step
        self.posted: dict[int, tuple[int, float]] = {}  # xid -> (issuer, post slice start)
        self.landed: dict[int, float] = {}  # xid -> when its signal/count landed
        self.flow = 0
        self.launch_start = [0.0] * self.plan.instance.nranks

    # ------------------------------------------------------------------ tracks

    def _track(self, proc: int) -> tuple[int, int]:
        plan = self.plan
        if proc < plan.nissuers:
            rank = plan.issuers[proc].rank
            return rank, 1 + plan.rank_issuers[rank].index(proc)
        if proc < plan.host:
            qi = proc - plan.nissuers
            return plan.queues[qi][0], QUEUE_TID + qi
        return plan.instance.nranks, 1 + proc - plan.host

    def metadata(self) -> list[Event]:
        plan = self.plan
        out: list[Event] = []
        for rank in range(plan.instance.nranks):
            out += [_meta("process_name", rank, 0, f"rank {rank}"),
                    _meta("process_sort_index", rank, 0, rank, key="sort_index")]
        host = plan.instance.nranks
        out += [_meta("process_name", host, 0, "host"),
                _meta("process_sort_index", host, 0, host, key="sort_index")]
        out += [_meta("thread_name", host, 1 + r, f"launches of rank {r}")
                for r in range(plan.instance.nranks)]
        for proc in range(plan.host):
            pid, tid = self._track(proc)
            out += [_meta("thread_name", pid, tid, self._thread_name(proc)),
                    _meta("thread_sort_index", pid, tid, tid, key="sort_index")]
        return out

    def _thread_name(self, proc: int) -> str:
        plan = self.plan
        if proc < plan.nissuers:
            return str(plan.issuers[proc].issuer)
        _, peer, q = plan.queues[proc - plan.nissuers]
        return f"queue → rank {peer} q{q}"

    # ------------------------------------------------------------------ steps

    def add(self, t: Timed) -> None:
        r = t.record
        if r.kind is RecordKind.OP:
            self._op(t, r)
        elif r.kind is RecordKind.XFER:
            self._xfer(t, r)
        else:
            self._launch(t, r)

    def _op(self, t: Timed, r: StepRecord) -> None:
        if not r.complete:
            return
        assert r.op is not None
        op = self.plan.op_at(r.op, r.epoch)
        members = self.plan.members.get(r.op, (op.index,))
        for index in members:
            member = self.plan.op_at((op.rank, index), r.epoch)
            proc = self.plan.proc_of_op[(op.rank, index)][0]
            self._slice(proc, member, self.ready[proc], t.end, r.epoch)
            self.ready[proc] = t.end
        if op.kind.traits.queued:
            self._posted(op, members, t)
        if r.source >= 0:
            self._signal_flow(r.source, r.op, t.end)

    def _slice(self, proc: int, op: OpInst, start: float, end: float, epoch: int) -> None:
        pid, tid = self._track(proc)
        args: dict[str, Any] = {"launch": epoch + 1, "op": op_text(op).strip("`")}
        if op.span is not None:
            args["line"] = op.span.line
        if op.dst is not None and op.src is not None:
            args.update(dst=region_text(op.dst), src=region_text(op.src), bytes=op.src.size)
        elif op.dst is not None and op.srcs:
            args.update(dst=region_text(op.dst), srcs=[region_text(s) for s in op.srcs])
        self.events.append({"ph": "X", "name": op.kind, "cat": "op", "pid": pid, "tid": tid,
                            "ts": start, "dur": max(end - start, MIN_DUR), "args": args})

    def _posted(self, op: OpInst, members: tuple[int, ...], t: Timed) -> None:
        wanted = {(op.rank, i) for i in members}
        for x in reversed(self.m.state.xfers):
            key = (x.spec.op.rank, x.spec.op.index)
            if key in wanted and x.id not in self.posted and x.epoch == t.record.epoch:
                proc = self.plan.proc_of_op[key][0]
                self.posted[x.id] = (proc, self.ready[proc] - MIN_DUR / 2)

    def _xfer(self, t: Timed, r: StepRecord) -> None:
        x = self.m.state.xfers[r.xid]
        if r.phase == 0:
            self.started[x.id] = t.start
            self._post_flow(x, r.proc, t.start)
        if r.complete:
            self._transfer_slice(x, r, t)

    def _transfer_slice(self, x: Xfer, r: StepRecord, t: Timed) -> None:
        pid, tid = self._track(r.proc)
        spec = x.spec
        start = self.started.get(x.id, t.start)
        args: dict[str, Any] = {"launch": x.epoch + 1, "bytes": spec.size,
                                "op": op_text(spec.op).strip("`")}
        if spec.src is not None and spec.dst is not None:
            args.update(src=region_text(spec.src), dst=region_text(spec.dst))
        if spec.op.span is not None:
            args["line"] = spec.op.span.line
        name = f"{spec.op.kind} {spec.size} B → rank {spec.queue[1]}"
        self.events.append({"ph": "X", "name": name, "cat": "transfer", "pid": pid, "tid": tid,
                            "ts": start, "dur": max(t.end - start, MIN_DUR), "args": args})
        if spec.signals:
            what = "count" if spec.counter and not (spec.remote_slot or spec.local_slot) \
                else "signal"
            self.events.append({"ph": "X", "name": what, "cat": "signal", "pid": pid,
                                "tid": tid, "ts": t.start, "dur": max(t.end - t.start, MIN_DUR),
                                "args": {"launch": x.epoch + 1}})
            self.landed[x.id] = t.start + max(t.end - t.start, MIN_DUR) / 2

    def _post_flow(self, x: Xfer, queue_proc: int, start: float) -> None:
        posted = self.posted.get(x.id)
        if posted is None:
            return
        issuer, ts = posted
        self._flow("post", "post", issuer, ts, queue_proc, start)

    def _signal_flow(self, xid: int, wait: tuple[int, int], end: float) -> None:
        ts = self.landed.get(xid)
        if ts is None:
            return
        x = self.m.state.xfers[xid]
        queue_proc = self.plan.queue_proc(x.spec.queue)
        waiter = self.plan.proc_of_op[wait][0]
        self._flow("signal", "signal", queue_proc, ts, waiter, end - MIN_DUR / 2)

    def _flow(self, name: str, cat: str, src: int, ts: float, dst: int, te: float) -> None:
        self.flow += 1
        pid, tid = self._track(src)
        pid2, tid2 = self._track(dst)
        self.events.append({"ph": "s", "name": name, "cat": cat, "id": self.flow, "pid": pid,
                            "tid": tid, "ts": ts})
        self.events.append({"ph": "f", "bp": "e", "name": name, "cat": cat, "id": self.flow,
                            "pid": pid2, "tid": tid2, "ts": max(te, ts)})

    def _launch(self, t: Timed, r: StepRecord) -> None:
        pid, tid = self._track(r.proc)
        start = self.launch_start[r.rank]
        self.events.append({"ph": "X", "name": f"launch {r.epoch + 1}", "cat": "launch",
                            "pid": pid, "tid": tid, "ts": start,
                            "dur": max(t.end - start, MIN_DUR),
                            "args": {"launch": r.epoch + 1, "rank": r.rank}})
        self.launch_start[r.rank] = t.end
        for p in self.plan.rank_issuers[r.rank]:
            self.ready[p] = t.end


def _meta(name: str, pid: int, tid: int, value: object, key: str = "name") -> Event:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {key: value}}


# ----------------------------------------------------------------------------- notes


def to_notes(setup: Setup, schedule: list[int], limit: int = 12) -> list[str]:
    """The ops and landings of a schedule, in order, as diagnostic notes."""
    machine = setup.machine(memory=False)
    lines: list[str] = []
    for p in schedule:
        record = machine.step(p)
        line = _describe(machine, record)
        if line:
            lines.append(line)
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"... and {len(lines) - limit} more steps")
    return [f"schedule: {line}" for line in shown]


def _describe(machine: Machine, r: StepRecord) -> str:
    plan = machine.plan
    if r.kind is RecordKind.OP and r.complete and r.op is not None:
        op = plan.op(r.op)
        line = f" (line {op.span.line})" if op.span is not None else ""
        return f"launch {r.epoch + 1}: rank {op.rank} ({op.issuer}) runs {op_text(op)}{line}"
    if r.kind is RecordKind.XFER and r.complete:
        spec = machine.state.xfers[r.xid].spec
        if spec.dst is None:
            return f"launch {r.epoch + 1}: the {spec.op.kind} of rank {spec.op.rank} reaches " \
                   f"rank {spec.queue[1]}"
        return f"launch {r.epoch + 1}: the {spec.op.kind} of rank {spec.op.rank} lands in " \
               f"`{region_text(spec.dst)}`"
    if r.kind is RecordKind.HOST:
        return f"launch {r.epoch + 1} of rank {r.rank} ends"
    return ""
