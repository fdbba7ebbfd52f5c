"""Findings of the simulator as ccogen diagnostics, with the checker's rule codes.

Every finding is a `Finding`: the diagnostic (primary label on the op that is
wrong, secondary labels on the ops involved, notes saying what was seen) and a key
under which identical findings from several schedules are merged.  The schedule
that showed it is added later (`ccogen.sim.report`), so the text here never
depends on the seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ccogen.diag import Diagnostic, error
from ccogen.ir import values
from ccogen.ir.dtype import DType
from ccogen.ir.instance import CheckInst, LoadInst, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.sim import rounding
from ccogen.sim.plan import Plan, TransferSpec, Wait
from ccogen.sim.race import Access, Who
from ccogen.sim.state import Xfer
from ccogen.source import Span


@dataclass(frozen=True, slots=True)
class Finding:
    key: tuple[object, ...]
    diagnostic: Diagnostic


def region_text(r: RegionInst) -> str:
    return f"{r.window}@{r.rank}[{r.start}:{r.stop}]"


def op_text(op: OpInst) -> str:
    """`put` or, when it fits on one short line, the call as written."""
    text = op.span.text if op.span is not None else ""
    return f"`{text}`" if text and "\n" not in text and len(text) <= 60 else f"`{op.kind}`"


def launch(epoch: int, epochs: int) -> str:
    return f"launch {epoch + 1} of {epochs}"


def _overlap(a: Access, b: Access) -> RegionInst:
    """The bytes both ops touch (whole regions, not only the pieces that met)."""
    x, y = a.who.region, b.who.region
    return RegionInst(x.window, max(x.start, y.start), min(x.stop, y.stop), x.rank)


# ----------------------------------------------------------------------------- races


@dataclass(frozen=True, slots=True)
class RaceContext:
    """What classifying a race needs from the machine."""

    plan: Plan
    xfers: Sequence[Xfer]
    post: dict[int, np.ndarray]
    finish: dict[int, int]
    nissuers: int


def race(ctx: RaceContext, a: Access, b: Access) -> Finding:
    """Two conflicting accesses with no order between them; `a` was recorded first."""
    found = _race(ctx, a, b)
    if a.who.epoch == b.who.epoch and not {a.who.role, b.who.role} & _CALLER:
        return found
    d = found.diagnostic
    note = (f"the two span consecutive launches (launch {min(a.who.epoch, b.who.epoch) + 1} "
            f"and {max(a.who.epoch, b.who.epoch) + 1}): {LAUNCHES_NOTE}"
            if a.who.epoch != b.who.epoch else f"between launches: {LAUNCHES_NOTE}")
    return Finding(found.key, replace(d, notes=(*d.notes, note)))


LAUNCHES_NOTE = ("a rank may start its next launch while its peers are still in this one, and "
                 "each rank's caller reads its outputs and writes its inputs between its own "
                 "launches only; order the next launch after it (a leading `barrier()`, or a "
                 "credit the peer returns), or declare `between_launches: host_sync`")
_CALLER = frozenset({"ensure", "input"})


def _race(ctx: RaceContext, a: Access, b: Access) -> Finding:
    if "reset" in (a.who.role, b.who.role):
        return _reset_race(ctx, a, b)
    if a.who.role.startswith("queue"):
        return _shared_queue(ctx, a, b)
    if a.who.write and b.who.write:
        return _write_write(ctx, a, b)
    read, write = (a, b) if b.who.write else (b, a)
    if read.who.role == "src":
        return _source_race(ctx, read, write)
    return _read_write(ctx, read, write)


def _span_of(ctx: RaceContext, who: Who) -> Span | None:
    if who.role in _CALLER:
        checks = ctx.plan.instance.checks
        return checks[who.check].span if 0 <= who.check < len(checks) else None
    if who.role == "caller":
        buffer = ctx.plan.instance.protocol.buffer(who.region.window)
        return buffer.span if buffer is not None else None
    if who.role == "load":
        load = _load_of(ctx, who)
        if load is not None and load.span is not None:
            return load.span
    return ctx.plan.span((who.rank, who.op))


def _load_of(ctx: RaceContext, who: Who) -> LoadInst | None:
    return next((x for x in ctx.plan.op_at((who.rank, who.op), who.epoch).loads
                 if x.region == who.region), None)


def _what(ctx: RaceContext, who: Who) -> str:
    if who.role == "ensure":
        return "`ensure`"
    if who.role == "input":
        return f"rank {who.rank}'s caller (writing the next launch's input)"
    if who.role == "caller":
        return f"the caller (refilling buffer `{who.region.window}` for the next launch)"
    if who.role == "load":
        return f"a `load` of `{who.region.window}`"
    return f"`{ctx.plan.op((who.rank, who.op)).kind}`"


def _key(code: str, *whos: Who) -> tuple[object, ...]:
    return (code, *sorted((w.role, w.rank, w.op, w.check) for w in whos))


def _write_write(ctx: RaceContext, a: Access, b: Access) -> Finding:
    where = _overlap(a, b)
    span_a, span_b = _span_of(ctx, a.who), _span_of(ctx, b.who)
    if span_a == span_b:
        label = f"rank {a.who.rank} and rank {b.who.rank} both write `{region_text(where)}` here"
        secondary: list[tuple[Span | None, str]] = []
    else:
        label = f"rank {b.who.rank} writes `{region_text(where)}`"
        secondary = [(span_a, f"rank {a.who.rank} also writes these bytes")]
    d = error("E031", f"data race: {_what(ctx, a.who)} and {_what(ctx, b.who)} write "
              "overlapping bytes with nothing ordering them", span_b, label, secondary=secondary,
              notes=[f"`{region_text(where)}` is written by both; no wait, quiet or barrier "
                     "orders one after the other, so the final bytes depend on the schedule"],
              help="order the two writes with a signal and a wait, or write disjoint regions")
    return Finding(_key("E031", a.who, b.who), d)


def _reset_race(ctx: RaceContext, a: Access, b: Access) -> Finding:
    reset, count = (a, b) if a.who.role == "reset" else (b, a)
    name = reset.who.region.window.removeprefix("counter ")
    d = error("E027", f"`reset_count({name})` may erase bytes a counted write of this launch "
              "already added", _span_of(ctx, reset.who), f"resets `{name}` on rank "
              f"{reset.who.rank}", secondary=[(_span_of(ctx, count.who),
                                               f"adds its bytes to `{name}`")],
              notes=[f"nothing orders the reset before rank {count.who.rank}'s counted write "
                     "lands: the reset may come after its bytes were added, and a wait for "
                     "them then never returns"],
              help="reset only when no counted write can be in flight: before the producers "
                   "start (behind a barrier) or at a protocol boundary")
    return Finding(_key("E027", reset.who, count.who), d)


def _shared_queue(ctx: RaceContext, a: Access, b: Access) -> Finding:
    """A batch or commit of one issuer and another issuer's post on one engine queue."""
    batch, other = (a, b) if a.who.role == "queue-w" else (b, a)
    op, them = ctx.plan.op((batch.who.rank, batch.who.op)), ctx.plan.op((other.who.rank,
                                                                          other.who.op))
    what = "`commit`" if op.kind is OpKind.COMMIT else f"aggregate `{op.kind}`"
    peer, q = batch.who.region.window.removeprefix("queue ").split("/")
    d = error("E028", f"{what} shares its queue with another issuer's ops in no fixed order",
              op.span, f"{op.issuer} on queue {q} toward rank {peer}",
              secondary=[(them.span, f"{them.issuer} posts on the same queue meanwhile")],
              notes=["nothing orders the two issuers: a `commit` can ring the other's slot "
                     "while it is reserved but not yet written, and the other then waits "
                     "forever for a committed pointer that has moved past it"],
              help="give each issuer its own queue, or order the issuers before the batch")
    return Finding(_key("E028", a.who, b.who), d)


def behind_batch(op: OpInst, ahead: Sequence[Xfer]) -> Finding:
    """A plain post on a queue holding aggregate ops no commit has rung: it spins."""
    first = ahead[0]
    d = error("E020", f"plain `{op.kind}` posted behind uncommitted aggregate ops on its queue "
              "never returns", op.span, "spins until the batch ahead of it is committed",
              secondary=[(first.spec.op.span, f"aggregate `{first.spec.op.kind}` reserved "
                                              "first, not yet committed")],
              notes=[f"{len(ahead)} aggregate op{'s' if len(ahead) > 1 else ''} sit on queue "
                     f"{first.spec.queue[2]} toward rank {first.spec.queue[1]} unrung; the "
                     "plain op waits for the committed pointer to reach its slot, and only a "
                     "`commit` moves it past them"],
              help=f"`commit({first.spec.queue[1]}, queue={first.spec.queue[2]})` before the "
                   "plain op, or make it aggregate too")
    return Finding(("E020", "behind", op.rank, op.index), d)


def _source_race(ctx: RaceContext, read: Access, write: Access) -> Finding:
    x = ctx.xfers[read.who.xid]
    poster, posted = x.poster, ctx.post[x.id][x.poster]
    spec = x.spec
    assert spec.src is not None  # a transfer with data: it read a source
    where = region_text(_overlap(read, write))
    if write.vc[poster] >= posted:  # the writer comes after the post: a reused source
        d = error("E025", f"{_what(ctx, write.who)} overwrites the source of a "
                  f"`{spec.op.kind}` that may still be reading it", _span_of(ctx, write.who),
                  f"writes `{where}`",
                  secondary=[(spec.op.span, "still reading its source here")],
                  notes=[f"`{spec.op.kind}` is non-blocking: the engine may read "
                         f"`{region_text(spec.src)}` after the write, so it sends new bytes "
                         "instead of the old ones"],
                  help=f"`quiet({spec.queue[1]}, queue={spec.queue[2]})` (or wait for a local "
                       "signal) before reusing the source")
        return Finding(_key("E025", read.who, write.who), d)
    d = error("E032", f"read before arrival: `{spec.op.kind}` sends bytes that "
              f"{_what(ctx, write.who)} may still be writing", spec.op.span,
              f"reads its source `{where}`",
              secondary=[(_span_of(ctx, write.who), "writes these bytes")],
              notes=[_unordered_note(ctx, write.who)],
              help="wait for the signal (or counter) of the incoming transfer before "
                   "sending its bytes on")
    return Finding(_key("E032", read.who, write.who), d)


def _read_write(ctx: RaceContext, read: Access, write: Access) -> Finding:
    where = region_text(_overlap(read, write))
    other_queue = _signal_elsewhere(ctx, read, write) if write.who.role == "dst" else None
    if other_queue is not None:
        return _wrong_queue(ctx, read, write, where, other_queue)
    d = error("E032", f"read before arrival: {_what(ctx, read.who)} reads bytes that "
              f"{_what(ctx, write.who)} may still be writing", _span_of(ctx, read.who),
              f"reads `{where}`", secondary=[(_span_of(ctx, write.who), "writes these bytes")],
              notes=[_unordered_note(ctx, write.who)],
              help="wait for the transfer's signal (or counter) before reading what it writes")
    return Finding(_key("E032", read.who, write.who), d)


def _unordered_note(ctx: RaceContext, writer: Who) -> str:
    if writer.role == "dst":
        spec = ctx.xfers[writer.xid].spec
        rank, peer, q = spec.queue
        return (f"the `{spec.op.kind}` issued by rank {rank} on queue {q} toward rank {peer} "
                "lands at a time nothing here observes: no signal, counter or barrier orders "
                "its arrival before this read")
    return (f"{_what(ctx, writer)} on rank {writer.rank} is not ordered with this read: no wait, "
            "quiet or barrier lies between them")


def _signal_elsewhere(ctx: RaceContext, read: Access, write: Access) -> TransferSpec | None:
    """A signal the reader saw, from the data's sender, posted after it on another queue."""
    data = ctx.xfers[write.who.xid]
    spec = data.spec
    poster, posted = data.poster, ctx.post[data.id][data.poster]
    for other in ctx.xfers:
        s = other.spec
        slot = s.remote_slot
        if (slot is None or slot[0] != read.window[0] or s.queue[0] != spec.queue[0]
                or s.queue == spec.queue or other.id not in ctx.finish):
            continue
        queue_proc = ctx.nissuers + ctx.plan.queue_index[s.queue]
        if (ctx.post[other.id][poster] >= posted
                and read.vc[queue_proc] >= ctx.finish[other.id]):
            return s
    return None


def _wrong_queue(ctx: RaceContext, read: Access, write: Access, where: str,
                 signal: TransferSpec) -> Finding:
    data = ctx.xfers[write.who.xid].spec
    q_data, q_sig = data.queue[2], signal.queue[2]
    d = error("E024", f"{_what(ctx, read.who)} reads data announced by a signal on another "
              "queue", _span_of(ctx, read.who), f"reads `{where}`",
              secondary=[(data.op.span, f"the data travels on queue {q_data}"),
                         (signal.op.span, f"the signal comes on queue {q_sig}")],
              notes=[f"ops on one queue complete in order, but queues are unordered: the "
                     f"signal on queue {q_sig} proves nothing about the data on queue {q_data}"],
              help=f"send the signal on the data's queue (`queue={q_data}`)")
    return Finding(_key("E024", read.who, write.who), d)


# ----------------------------------------------------------------------------- postconditions


def postcondition(check: CheckInst, index: int, left: np.ndarray, right: np.ndarray,
                  origin: str, epoch: int, epochs: int) -> Finding:
    differ = np.flatnonzero(left != right)
    first = int(differ[0]) if differ.size else 0
    assert check.right is not None  # a reduction is `reduction_postcondition`
    lt, rt = _side(check.left, check.left_init), _side(check.right, check.right_init)
    notes = [f"`{lt}` differs from `{rt}` in {differ.size} of {left.size} bytes, first at "
             f"byte {first}: 0x{int(left[first]):02x} where 0x{int(right[first]):02x} was "
             f"expected" if check.op == "==" else f"`{lt}` equals `{rt}`",
             origin, f"checked after {launch(epoch, epochs)}"]
    d = error("E033", "postcondition does not hold", check.span, f"fails on rank {check.rank}",
              notes=[n for n in notes if n],
              help="fix the protocol, or the postcondition if it states the wrong thing")
    return Finding(("E033", index), d)


def stale_load(op: OpInst, load: LoadInst, read: int | float, epoch: int,
               epochs: int) -> Finding:
    """A `load` that read another value than the launch's inputs define."""
    d = error("E032", f"stale load: a `load` of `{load.region.window}` reads an element before "
              "the value it should hold is there", load.span,
              f"the load of `{load}` on rank {op.rank} reads {read!r}",
              notes=[f"this launch's inputs make it {load.value!r}: the load ran before the "
                     "write of the element arrived, or after a later write (the next "
                     f"launch's) replaced it; seen in {launch(epoch, epochs)}"],
              help="order the load after the write it needs (a wait for its signal, a "
                   "`barrier()`) and before the next launch rewrites the element")
    return Finding(("E032", "stale", load.span.start if load.span else op.index), d)


def stale_ensure_load(check: CheckInst, load: LoadInst, read: int | float, epoch: int,
                      epochs: int) -> Finding:
    """An element `ensure` reads as a run-time value (a bound, a weight) that held another
    value than the launch's inputs define when the caller read it."""
    d = error("E032", f"stale load: `ensure` reads `{load.region.window}` as a run-time value "
              "while it holds another launch's value, or one that has not arrived",
              load.span or check.span,
              f"rank {check.rank}'s caller reads {read!r} from `{load}`",
              notes=[f"this launch's inputs make it {load.value!r}: the write of the element "
                     "had not arrived when the caller read it, or a later write (the next "
                     f"launch's) replaced it; seen in {launch(epoch, epochs)}"],
              help="wait for the element's write before the kernel ends, and keep the next "
                   "launch from rewriting it before every caller has read it (a leading "
                   "`barrier()`)")
    return Finding(("E032", "stale", load.span.start if load.span else -1), d)


def reduction_postcondition(check: CheckInst, index: int, left: np.ndarray,
                            expected: np.ndarray, ok: np.ndarray, epoch: int,
                            epochs: int, terms: Sequence[np.ndarray] = (),
                            codes: np.ndarray | None = None) -> Finding:
    """A `region == sum(...)` (or max/min) that the values do not satisfy.  With `codes`
    (per element of the left side, `sim.rounding`), a float sum whose values were
    rounded to f16/bf16 more often than `ensure` allows says how often, and why."""
    r = check.reduction
    assert r is not None
    width = r.dtype.size
    bad = np.flatnonzero(~ok)
    lt = _side(check.left, check.left_init)
    help = "fix the protocol, or the postcondition if it states the wrong thing"
    notes: list[str] = []
    if check.op == "==" and bad.size:
        first = int(bad[0])
        last = first
        while last + 1 < ok.size and not ok[last + 1]:
            last += 1
        got = values.show(left[first * width:(first + 1) * width], r.dtype)
        want = values.show(expected[first * width:(first + 1) * width], r.dtype)
        exact = "bit-exact" if not r.dtype.is_float or r.op.value != "sum" else \
            "within the tolerance of a float sum"
        over = None if codes is None else np.flatnonzero(~rounding.allowed(codes, r.dtype))
        if over is not None and over.size:
            at = int(over[0])
            count, types = int(codes[at]) >> 2, int(codes[at]) & 3  # type: ignore[index]
            close = values.compare(left, r.op, terms, r.weights, r.dtype)
            beyond = np.flatnonzero(~close)
            if beyond.size:
                j = int(beyond[0])
                value = (f"{beyond.size} of them are beyond the tolerance of one rounding on "
                         f"this draw: element {j} holds "
                         f"{values.show(left[j * width:], r.dtype)} where "
                         f"{values.show(expected[j * width:], r.dtype)} was expected")
            else:
                value = ("all are within the tolerance of one rounding on this draw: the "
                         "count decides, not the draw, as in `ccogen lint`")
            notes.append(rounding_note(lt, r.dtype, over.size, ok.size, at, count,
                                       rounding.type_names(types), value))
            help = rounding_help(r.dtype)
        else:
            notes.append(f"elements {first}..{last} of `{lt}` ({r.dtype}) are not the "
                         f"{r.op.value} of its {len(r.terms)} terms ({bad.size} of {ok.size} "
                         f"elements wrong): element {first} holds {got} where {want} was "
                         f"expected ({exact})")
    else:
        notes.append(f"`{lt}` equals the {r.op.value} of its {len(r.terms)} terms")
    notes.append(f"checked after {launch(epoch, epochs)}")
    d = error("E033", "postcondition does not hold", check.span, f"fails on rank {check.rank}",
              notes=notes, help=help)
    return Finding(("E033", index), d)


def rounding_note(region: str, dtype: DType, wrong: int, total: int, at: int, count: int,
                  types: Sequence[str], value: str) -> str:
    """Why a float sum rounded too often fails (the simulator's and the checker's words)."""
    to = " and ".join(types) or "f32"
    times = "once" if count == 1 else f"{count} times"
    allowed = f"one rounding to {dtype}" if dtype.is_float and dtype.size == 2 else \
        "no rounding to f16 or bf16"
    return (f"{wrong} of {total} elements of `{region}` ({dtype}) were rounded to {to} "
            f"{times} on their way (element {at}): every `reduce` into an f16/bf16 region "
            "rounds, and a partial sum stored there and summed again (a ring or a tree, one "
            f"`reduce` per hop) is rounded again; `ensure` allows {allowed} of the result; "
            f"{value}")


def rounding_help(dtype: DType) -> str:
    return ("keep the running sums in f32: `reduce` into an f32 window or buffer (its sources "
            f"may be {dtype}: widened exactly), send the f32 partial sums, and round once at "
            f"the end with `reduce(dst=<{dtype} region>, srcs=[<f32 region>])`")


def rank_bits(a: CheckInst, b: CheckInst, bits_a: np.ndarray, bits_b: np.ndarray,
              epoch: int, epochs: int) -> Finding:
    """Two ranks hold different bits for the same float reduction (W108, seen on data)."""
    r = a.reduction
    assert r is not None
    width = r.dtype.size
    differ = int(np.flatnonzero(bits_a != bits_b)[0]) // width
    d = error(
        "W108", "ranks hold different bits for the same reduction", a.span,
        f"ranks {a.rank} and {b.rank} differ",
        notes=(f"element {differ} of `{a.left.window}`: "
               f"{values.show(bits_a[differ * width:], r.dtype)} on rank {a.rank}, "
               f"{values.show(bits_b[differ * width:], r.dtype)} on rank {b.rank}; both are "
               "within the tolerance, but the ranks summed in different orders",
               f"checked after {launch(epoch, epochs)}"),
        help="list the sources of `reduce` in the same order on every rank (e.g. "
             "`[x@p for p in ranks()]`), so that every rank computes the same bits")
    return Finding(("W108", a.check.span, a.left.window), d)


def _side(r: RegionInst, init: bool) -> str:
    return f"init({r.window}@{r.rank})[{r.start}:{r.stop}]" if init else region_text(r)


def origin_note(found: RegionInst | None, unchanged: bool, where: RegionInst) -> str:
    """Where the bytes that are there came from (a search of the launch's initial image)."""
    if unchanged:
        return f"`{region_text(where)}` still holds its own initial bytes: nothing wrote there"
    if found is None:
        return f"the bytes at `{region_text(where)}` match no window's initial contents"
    return f"the bytes at `{region_text(where)}` came from `init({found.window}@{found.rank})" \
           f"[{found.start}:{found.stop}]`"


# ----------------------------------------------------------------------------- aggregate ops


def uncommitted(ops: Sequence[OpInst], epoch: int, epochs: int, waiting: str = "") -> Finding:
    op = ops[0]
    peer, q = op.peer, op.queue
    many = len(ops) > 1
    notes = [f"rank {op.rank} ends {launch(epoch, epochs)} with {len(ops)} aggregate "
             f"op{'s' if many else ''} toward rank {peer} on queue {q} posted but never rung: "
             f"{'they move' if many else 'it moves'} nothing, and `quiet` does not wait for "
             f"{'them' if many else 'it'}"]
    if waiting:
        notes.append(waiting)
    d = error("E020", f"aggregate `{op.kind}` is never committed", op.span,
              "posted without ringing the doorbell",
              secondary=[(o.span, "also never rung") for o in ops[1:3] if o.span != op.span],
              notes=notes, help=f"add `commit({peer}, queue={q})` after the last aggregate op")
    return Finding(("E020", op.rank, op.index), d)


# ----------------------------------------------------------------------------- deadlocks


@dataclass(frozen=True, slots=True)
class Blocked:
    """One issuer that cannot move: its op and why."""

    op: OpInst
    why: str
    wait: Wait | None = None
    seen: int = 0
    expected: int | None = None
    barrier: bool = False
    never: bool = False  # a wait that needs more than all that comes by the end of its launch

    def note(self) -> str:
        line = f" (line {self.op.span.line})" if self.op.span is not None else ""
        return f"rank {self.op.rank} ({self.op.issuer}) blocks in {op_text(self.op)}{line}: " \
               f"{self.why}"


def unsatisfiable(plan: Plan, b: Blocked, epoch: int, epochs: int) -> Finding:
    w = b.wait
    assert w is not None
    op = b.op
    senders = _senders(plan, w)
    if w.kind == "slot":
        code, total = "E021", f"{w.total} signal{'s' if w.total != 1 else ''}"
        src, q = w.source
        label = (f"the {ordinal(w.ordinal)} wait on (rank {src}, queue {q}) has no signal "
                 "left to pair with" if w.base is None else
                 f"waits for {w.base} signal{'s' if w.base != 1 else ''} from rank {src} on "
                 f"queue {q}")
        sent = f"rank {src} sends {total} to rank {op.rank} on queue {q} per launch"
        help = ("remove the extra wait, or send another signalled put" if w.base is None
                else f"wait for `expected={w.total}`, or send more signalled puts")
    else:
        code, total = "E026", f"{w.total} bytes"
        name = w.what().removeprefix("counter ")
        label = f"waits for {w.base} bytes counted to {name}"
        sent = f"counted puts deliver {total} to {name} on rank {op.rank} per launch"
        help = f"omit `expected` to wait for the launch's total ({w.total} bytes)"
    spans = list(dict.fromkeys(s.op.span for s in senders if s.op.span is not None))
    holder = "slot" if w.kind == "slot" else "counter"
    d = error(code, f"`{op.kind}` can never be satisfied", op.span, label,
              secondary=[(span, "one of the increments it can count on") for span in spans[:3]],
              notes=[sent, f"seen in {launch(epoch, epochs)}: the {holder} holds {b.seen}"],
              help=help)
    return Finding((code, op.rank, op.index), d)


def nothing_counted(op: OpInst, counter: str) -> Finding:
    d = error("E026", "`wait_count` on a counter that no `put` counts to", op.span,
              f"returns at once: nothing counts to {counter} of rank {op.rank}",
              notes=["without `expected`, the wait is for every byte counted to this rank in a "
                     "launch, and that is 0: it orders nothing"],
              help="add `count=` to the puts that deliver this rank's data, or remove the wait")
    return Finding(("E026", op.rank, op.index), d)


def _senders(plan: Plan, w: Wait) -> list[TransferSpec]:
    out: list[TransferSpec] = []
    for specs in plan.posts.values():
        out += [t for t in specs if w.key in (t.remote_slot, t.local_slot, t.counter)]
    return out


def ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def deadlock(blocked: Sequence[Blocked], finished: Iterable[int], barrier_note: str,
             epoch: int, epochs: int) -> Finding:
    first = blocked[0].op
    seen_spans: set[Span | None] = {first.span}
    secondary: list[tuple[Span | None, str]] = []
    for b in blocked[1:]:
        if b.op.span not in seen_spans:
            seen_spans.add(b.op.span)
            secondary.append((b.op.span, f"rank {b.op.rank} blocks here"))
    done = sorted(set(finished))
    notes = [b.note() for b in blocked]
    if done:
        many = len(done) > 1
        notes.append(f"rank{'s' if many else ''} {', '.join(map(str, done))} finished "
                     f"{'their' if many else 'its'} kernels")
    notes.append(f"seen in {launch(epoch, epochs)}")
    if barrier_note:
        message = "deadlock: `barrier()` is reached a different number of times"
        notes.insert(0, barrier_note)
        help = "call `barrier()` the same number of times on every rank and block"
    else:
        message = "deadlock: every rank that has not finished waits for another"
        help = "send before waiting: issue the signalled put a peer waits for ahead of " \
               "this rank's own wait"
    d = error("E030", message, first.span, f"rank {first.rank} blocks here",
              secondary=secondary, notes=notes, help=help)
    key = ("E030", *sorted({(b.op.rank, b.op.index) for b in blocked}))
    return Finding(key, d)
