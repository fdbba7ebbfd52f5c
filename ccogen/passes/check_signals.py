"""Signals and counters: every wait can be met, expected values count what is sent.

Requires an instance; uses the signal/counter matching and the happens-before
graph (`ccogen.analysis`).  Guarantees, when it reports nothing: every
`wait_signal` and `wait_count` expects at most what its slot or counter receives in
one epoch; hand-written `expected` values grow strictly along each `(src, queue)` pair, count
that pair only and count a group of lanes once per `put` (or per lane with
`signal_per_copy`); data read after a wait arrived on the queue of its signal;
counters are not reset while counted writes are in flight.

Emits E021 (unsatisfiable wait), E022 (expected not monotonic, or shared across
queues), E023 (expected counted per lane vs per group), E024 (signal on another queue
than its data), E026 (counted wait for bytes never counted, or a counter nobody
counts to), E027 (counter reset with counted writes in flight).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis, ConflictKind
from ccogen.analysis.events import EventKind
from ccogen.analysis.matching import Increment, SlotKey, WaitMatch
from ccogen.analysis.races import Conflict
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.passes._report import LAUNCHES_NOTE, Findings, access_span, region, times
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.source import Span

MAX_LABELS = 4


@dataclass(frozen=True)
class CheckSignals(Pass):
    """Waits match what is sent (E021-E024, E026, E027); see the module docstring."""

    name: ClassVar[str] = "check-signals"
    codes: ClassVar[tuple[str, ...]] = ("E021", "E022", "E023", "E024", "E026", "E027")

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        out = Findings(ctx)
        for w in a.matching.waits.values():
            if w.kind == "signal":
                _signal_wait(a, w, out)
            else:
                _count_wait(a, w, out)
        _decreasing(a, out)
        for c in a.conflicts_of(ConflictKind.OTHER_QUEUE):
            _other_queue(c, out)
        _resets(a, out)
        out.flush()


def _op(a: Analysis, rank: int, index: int) -> OpInst:
    return a.launches.ranks[rank][index]


# ============================================================================= E021-E023


def _signal_wait(a: Analysis, w: WaitMatch, out: Findings) -> None:
    if w.expected is None or w.expected > w.total:
        if not (_shared_queues(a, w, out) or _per_lane(a, w, out)):
            _unsatisfiable(a, w, out)
    else:
        _per_group(a, w, out)


def _signallers(a: Analysis, slot: object) -> list[tuple[Span | None, str]]:
    incs: tuple[Increment, ...] = a.matching.increments.get(slot, ())  # type: ignore[call-overload]
    labels: list[tuple[Span | None, str]] = []
    for inc in incs[:MAX_LABELS]:
        op = _op(a, inc.sender, inc.first)
        what = "signals" if len(inc.ops) == 1 else f"signals once for {len(inc.ops)} lanes"
        labels.append((op.span, f"{what} rank {inc.slot[0]} on queue {inc.slot[2]}"))
    return labels


def _other_slots(a: Analysis, slot: SlotKey) -> list[str]:
    me, src, q = slot
    notes = []
    for (r, s, q2), incs in sorted(a.matching.increments.items()):
        if (r, s) == (me, src) and q2 != q:
            notes.append(f"rank {src} signals rank {me} on queue {q2} "
                         f"({times(len(incs))} per epoch)")
    return notes


def _unsatisfiable(a: Analysis, w: WaitMatch, out: Findings) -> None:
    op = _op(a, w.rank, w.op)
    _, src, q = w.key  # type: ignore[misc]
    sends = f"rank {src} sends {_count(w.total)} on queue {q}"
    if w.handwritten:
        label = f"waits for {times(w.expected or 0, 'signal')}, but {sends}"
        notes = []
    else:
        label = f"waits for signal #{w.ordinal} from rank {src}, but {sends}"
        notes = ["with `expected` omitted, the k-th wait on a `(src, queue)` pair waits for "
                 "the k-th signal that `src` sends on that queue"]
    notes += _other_slots(a, w.key)  # type: ignore[arg-type]
    out.error("E021", "`wait_signal` can never be satisfied", op.span, label, rank=w.rank,
              secondary=_signallers(a, w.key), notes=notes, help=_fix(a, w, src, q))


def _count(n: int) -> str:
    return "no signal" if n == 0 else times(n, "signal")


def _fix(a: Analysis, w: WaitMatch, src: int, q: int) -> str:
    if w.handwritten and w.total:
        return f"wait for `expected={w.total}`, or send more signalled puts"
    if w.total:
        return "remove this wait, or pair it with one more signalled put"
    unsignalled = [op for op in a.launches.ranks[src]
                   if op.kind is OpKind.PUT and op.peer == w.rank and op.queue == q
                   and not op.signal.remote and op.epoch == 0]
    if unsignalled:
        return (f"give rank {src}'s `put` on queue {q} ({_line(unsignalled[0])}) "
                "`signal=\"remote\"`, or remove this wait")
    senders = sorted({(s, q2) for (r, s, q2), incs in a.matching.increments.items()
                      if r == w.rank and s != src and incs})
    if senders:
        s2, q2 = next(((s, q2) for s, q2 in senders if q2 == q), senders[0])
        inc = a.matching.increments[(w.rank, s2, q2)][0]
        return (f"rank {src} sends rank {w.rank} nothing to wait for; rank {s2} signals it on "
                f"queue {q2} ({_line(_op(a, inc.sender, inc.first))}): wait for the rank "
                f"that sends (`wait_signal({s2}, queue={q2})`), or remove this wait")
    return (f"rank {src} sends rank {w.rank} nothing on queue {q}: send a signalled `put` or "
            "a `signal` from it, or remove this wait")


def _line(op: OpInst) -> str:
    return f"line {op.span.line}" if op.span is not None else "an op"


def _shared_queues(a: Analysis, w: WaitMatch, out: Findings) -> bool:
    """A hand-written total that continues the count of another queue (E022)."""
    if not w.handwritten or w.expected is None:
        return False
    me, src, q = w.key  # type: ignore[misc]
    earlier = _earlier_waits_other_queue(a, w)
    everything = sum(len(v) for (r, s, _), v in a.matching.increments.items()
                     if (r, s) == (me, src))
    if not earlier or w.expected > everything:
        return False
    op, other = _op(a, w.rank, w.op), earlier[-1]
    out.error("E022", "`expected` continues the count of another queue", op.span,
              f"expects {w.expected} on queue {q}, which gets {times(w.total, 'signal')}",
              rank=w.rank, secondary=[(other.span, f"counts queue {other.queue}")],
              notes=["each `(src, queue)` pair has its own slot that counts from zero; "
                     "a total shared across queues waits forever"],
              help=f"count queue {q} on its own: `expected={min(w.ordinal, w.total)}`")
    return True


def _earlier_waits_other_queue(a: Analysis, w: WaitMatch) -> list[OpInst]:
    g = a.graph
    me, src, q = w.key  # type: ignore[misc]
    issue = g.issue(w.rank, w.op)
    return [op for op in a.launches.ranks[me][: w.op]
            if op.kind is OpKind.WAIT_SIGNAL and op.peer == src and op.queue != q
            and g.hb(g.issue(me, op.index), issue)]


def _per_lane(a: Analysis, w: WaitMatch, out: Findings) -> bool:
    """A hand-written value that counts lanes of groups that signal once (E023)."""
    incs = a.matching.incs(w)
    lanes = sum(len(i.ops) for i in incs)
    if not w.handwritten or w.expected is None or lanes == len(incs) or w.expected > lanes:
        return False
    op = _op(a, w.rank, w.op)
    group = next(i for i in incs if len(i.ops) > 1)
    put = _op(a, group.sender, group.first)
    out.error("E023", "`expected` counts lanes, but a group of lanes signals once per `put`",
              op.span, f"expects {w.expected}; the slot reaches {w.total} per epoch",
              rank=w.rank, secondary=[(put.span, f"{len(group.ops)} lanes post together and "
                                                 "signal once")],
              notes=["one `put()` call by a group of lanes advances the slot by one, "
                     "however many lanes join, unless `signal_per_copy=True`"],
              help=f"wait for `expected={w.total}`, or omit `expected`")
    return True


def _per_group(a: Analysis, w: WaitMatch, out: Findings) -> None:
    """The last wait counts per-copy groups once each: it returns early (E023)."""
    if not a.matching.counts_groups(w):
        return
    incs = a.matching.incs(w)
    first = next(i for i in incs if i.per_copy)
    op, put = _op(a, w.rank, w.op), _op(a, first.sender, first.first)
    out.error("E023", "`expected` counts groups, but `signal_per_copy=True` signals per lane",
              op.span, f"expects {w.expected}; the slot reaches {w.total} per epoch",
              rank=w.rank, secondary=[(put.span, "signals once per lane")],
              notes=["with `signal_per_copy=True` every lane's copy adds one: the wait "
                     "returns before the other lanes' data has landed"],
              help=f"wait for `expected={w.total}`, or omit `expected`")


def _decreasing(a: Analysis, out: Findings) -> None:
    """Successive waits on one pair whose hand-written values do not go up (E022)."""
    g = a.graph
    last: dict[object, WaitMatch] = {}
    for w in sorted(a.matching.waits.values(), key=lambda x: (x.rank, x.op)):
        if w.kind != "signal" or w.expected is None:
            continue
        prev = last.get(w.key)
        last[w.key] = w
        if prev is None or prev.expected is None or not (prev.handwritten or w.handwritten):
            continue
        if w.expected <= prev.expected and g.hb(g.done(prev.rank, prev.op),
                                                g.issue(w.rank, w.op)):
            op, before = _op(a, w.rank, w.op), _op(a, prev.rank, prev.op)
            how = "decreases" if w.expected < prev.expected else "does not grow"
            what = "a smaller" if w.expected < prev.expected else "the same"
            out.error("E022", f"`expected` {how} over successive waits on one `(src, queue)`",
                      op.span, f"expects {w.expected} after a wait for {prev.expected}",
                      rank=w.rank, secondary=[(before.span, f"waited for {prev.expected} here")],
                      notes=[f"a slot only grows: {what} value is met already and orders "
                             "nothing"],
                      help=_decrease_fix(prev, w))


def _decrease_fix(prev: WaitMatch, w: WaitMatch) -> str:
    assert prev.expected is not None
    if prev.expected < w.total:
        return f"count on from the previous wait: `expected={prev.expected + 1}` or more"
    return f"drop this wait: the wait for {prev.expected} already covers it"


# ============================================================================= E024


def _other_queue(c: Conflict, out: Findings) -> None:
    put, wait, signal = c.second.op, c.wait, c.signal
    assert put is not None and wait is not None and signal is not None
    reader = access_span(c.first)
    out.error("E024", "data and the signal that announces it travel on different queues",
              put.span, f"carries {region(c.overlap)} on queue {put.queue}", rank=put.rank,
              secondary=[(signal.span, f"signals on queue {signal.queue}"),
                         (wait.span, f"waits on queue {wait.queue}"),
                         (reader, "reads the data here")],
              notes=[f"queues are unordered with each other: the signal on queue "
                     f"{signal.queue} can arrive before the data on queue {put.queue}"],
              help=f"send the data on the signal's queue (`queue={signal.queue}`), or also "
                   f"wait on queue {put.queue}")


# ============================================================================= E026, E027


def _count_wait(a: Analysis, w: WaitMatch, out: Findings) -> None:
    op = _op(a, w.rank, w.op)
    me, counter = w.key  # type: ignore[misc]
    writes = a.matching.writes(w)
    secondary = [(_op(a, c.sender, c.op).span, f"counts {c.nbytes} bytes to rank {me}")
                 for c in writes[:MAX_LABELS]]
    if not writes:
        out.error("E026", "`wait_count` on a counter that no `put` counts to", op.span,
                  f"waits on `{counter}` of rank {me}", rank=w.rank,
                  notes=[f"no `put(..., count={counter})` writes to rank {me}"],
                  help=f"add `count={counter}` to the puts that deliver this rank's data, or "
                       "remove the wait")
    elif w.expected is not None and w.expected > w.total:
        out.error("E026", "`wait_count` expects more bytes than are ever counted", op.span,
                  f"waits for {w.expected} bytes; {w.total} reach `{counter}` per epoch",
                  rank=w.rank, secondary=secondary,
                  notes=["a counted put adds its payload size in bytes, not 1"],
                  help=f"wait for `expected={w.total}` (bytes), or omit `expected`")
    else:
        _after_reset(a, w, op, out)


def _after_reset(a: Analysis, w: WaitMatch, op: OpInst, out: Findings) -> None:
    """A wait after a `reset_count` that erased bytes it counts on (E026)."""
    after = a.after_reset(w.rank, w.op)
    if after is None or w.expected is None:
        return
    reset, left = after
    if w.expected > left:
        out.error("E026", "`wait_count` expects more bytes than are ever counted", op.span,
                  f"waits for {w.expected} bytes; {left} reach `{op.counter}` after the reset",
                  rank=w.rank, secondary=[(reset.span, "the counter restarts from zero here")],
                  notes=["with `reset_count` an omitted `expected` still means every byte of "
                         "the epoch; the bytes counted before the reset are gone"],
                  help=f"wait for `expected={left}` (bytes), or remove the `reset_count`")


def _resets(a: Analysis, out: Findings) -> None:
    g = a.graph
    for ops in a.launches.ranks:
        for op in ops:
            if op.kind is not OpKind.RESET_COUNT or not g.executes(g.issue(op.rank, op.index)):
                continue
            reset = g.issue(op.rank, op.index)
            for c in g.matching.counted.get((op.rank, op.counter or ""), ()):
                count = g.event(EventKind.COUNT, c.sender, c.op)
                if count is not None and g.executes(count) and not g.ordered(count, reset):
                    put = _op(a, c.sender, c.op)
                    _reset_error(op, put, out, across=put.epoch != op.epoch)
                    break


def _reset_error(op: OpInst, put: OpInst, out: Findings, across: bool = False) -> None:
    notes = ["a reset does not synchronise with producers: a write that lands after it "
             "counts toward the next wait, which then returns early"]
    if across:
        notes.append(f"the write is of the other launch: {LAUNCHES_NOTE}")
    out.error("E027", "counter reset while counted writes may be in flight", op.span,
              f"resets `{op.counter}` on rank {op.rank}", rank=op.rank,
              secondary=[(put.span, "may add its bytes before or after the reset")],
              notes=notes,
              help="remove `reset_count`: expected values advance across epochs by themselves; "
                   "or reset only after a `wait_count` that covers every write")


__all__ = ["CheckSignals"]
