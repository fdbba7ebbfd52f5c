"""Races: no unordered writes to the same bytes, no read before arrival.

Requires an instance; uses the memory conflicts of `ccogen.analysis` (the accesses
of every transfer, copy and postcondition, placed on the happens-before graph).
Guarantees, when it reports nothing: any two writes of overlapping bytes of one
window on one rank are ordered, and every read (a put/get source, a copy source,
a postcondition on the final state) of bytes that a transfer writes is ordered
after that write lands, or before it.  A postcondition reads at the end of the
reading rank's program: transfers can still be in flight after a kernel ends, so
their arrival must be ordered by a wait on that rank.

A `reduce` that loads a peer's bytes (`x@p`) reads them at its issue: an op of the
peer that writes them unordered with the load is E031 (the peer may overwrite them
while they are read).  A `load(...)` is a read like the others (the element it reads,
on the rank that holds it, at the issue of its issuer's next op): unordered with a
write of the element it is E032, naming the load and the write (a peer's `copy` into
an element a remote `load(x@p[i])` reads too: the load may see the old value).

Emits E031 (data race between writes), E036 (two unordered writes whose run-time
bounds the checker cannot prove disjoint: their footprints overlap, which is not a
race found) and E032 (read before arrival).  The reads
that a signal on the wrong queue announces are E024 (`check_signals`), and a source
overwritten before its op completed is E025 (`check_completion`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis, ConflictKind
from ccogen.analysis.races import Access, Conflict
from ccogen.ir.instance import OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt, lift
from ccogen.passes._report import (
    Findings,
    access_span,
    back_to_back_fix,
    caller_text,
    launches_note,
    load_text,
    name,
    region,
    where,
)
from ccogen.passes._shared import target_caps
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.source import Span


@dataclass(frozen=True)
class CheckRaces(Pass):
    """Writes are ordered (E031) and reads follow arrival (E032); see the module docstring."""

    name: ClassVar[str] = "check-races"
    codes: ClassVar[tuple[str, ...]] = ("E031", "E032", "E036")

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        out = Findings(ctx)
        for c in a.conflicts_of(ConflictKind.WRITE_WRITE):
            _race(c, out)
        for c in a.conflicts_of(ConflictKind.READ_BEFORE_ARRIVAL):
            if not (_miscounted(a, c) or _uncounted(a, c)):
                _early_read(a, c, out)
        for c in a.conflicts_of(ConflictKind.REMOTE_READ):
            _remote_overwrite(c, out)
        out.flush()


def _remote_overwrite(c: Conflict, out: Findings) -> None:
    reader, writer = c.first.op, c.second.op
    assert reader is not None and writer is not None
    peer = c.overlap.rank
    if c.first.load is not None:
        _remote_load(c, out)
        return
    out.error("E031", "a peer overwrites bytes while a `reduce` may be reading them",
              writer.span, f"rank {peer} writes {region(c.overlap)}", rank=peer,
              secondary=[(reader.span, f"rank {reader.rank} reads them over the link here")],
              notes=[f"nothing orders rank {peer}'s {name(writer)} with rank {reader.rank}'s "
                     "load of these bytes: the load may see old bytes, new bytes or a mix"],
              help=f"order them: a `barrier()` (or a signal from rank {reader.rank} after its "
                   f"`reduce`, waited for on rank {peer}) before the write")


def _remote_load(c: Conflict, out: Findings) -> None:
    """A `load(x@p[i])` unordered with an op of rank p writing the element."""
    reader, writer, load = c.first.op, c.second.op, c.first.load
    assert reader is not None and writer is not None and load is not None
    peer = c.overlap.rank
    before = not c.second.launch > c.first.launch
    out.error("E032", "load before arrival: a peer writes the element this `load` reads, in "
              "no fixed order", load.span,
              f"{load_text(c.first)} may read it " + (
                  f"before {where(writer)} writes it" if before else
                  f"after rank {peer}'s next launch rewrote it at {writer.span}"),
              rank=reader.rank,
              secondary=[(writer.span, f"rank {peer} writes {region(c.overlap)}")],
              notes=[f"nothing orders rank {peer}'s {name(writer)} with rank {reader.rank}'s "
                     "load of this element: the load may read the old value or the new one",
                     *launches_note(c.first, c.second)],
              help=_launch_hint(out.ctx, c.first, c.second) or
                   f"order them: rank {peer} signals after its {name(writer)} and rank "
                   f"{reader.rank} waits for it before the load (or a `barrier()` between)")


def _span(x: Access) -> Span | None:
    return access_span(x)


def _what(op: OpInst, bytes_rank: int) -> str:
    if op.kind is OpKind.COPY or (op.rank == bytes_rank and op.kind is OpKind.GET):
        return f"the {name(op)} of rank {op.rank}"
    return f"the {name(op)} from rank {op.rank}"


# ============================================================================= E031


def _race(c: Conflict, out: Findings) -> None:
    x, y = c.first.op, c.second.op
    if x is None or y is None:
        _caller_race(c, out)
        return
    if _runtime_bounds(c.first.region) or _runtime_bounds(c.second.region):
        if c.first.launch == c.second.launch and _disjoint(c.first.region, c.second.region):
            return  # one ends where the other may start, for every contents (prefix sums)
        _unproved(c, x, y, out)
        return
    where = c.overlap.rank
    if x.span == y.span and x.kind is y.kind:
        label = (f"the {name(y)}s of ranks {min(x.rank, y.rank)} and {max(x.rank, y.rank)} "
                 f"both write {region(c.overlap)}")
    else:
        label = f"{_what(y, where)} writes {region(c.overlap)}"
    out.error("E031", "data race: two writes to the same bytes in no fixed order", y.span,
              label, rank=where,
              secondary=[(x.span, f"{_what(x, where)} also writes {region(c.overlap)}")],
              notes=[_missing_order(x, y), *launches_note(c.first, c.second)],
              help=_launch_hint(out.ctx, *sorted((c.first, c.second),
                                                        key=lambda a: a.launch))
              or _race_help(x, y))


def _runtime_bounds(r: RegionInst) -> bool:
    """Bounds only known on the device: the region is then its footprint, every byte the
    op may touch over the range `require` allows."""
    return r.runtime is not None and any(isinstance(b, Rt) for b in r.runtime)


def _exact(r: RegionInst) -> tuple[int | Rt, int | Rt]:
    if r.runtime is None:
        return r.start, r.stop
    start, stop = r.runtime
    assert isinstance(start, int | Rt) and isinstance(stop, int | Rt)
    return start, stop


def _disjoint(a: RegionInst, b: RegionInst) -> bool:
    """`a` ends before `b` starts, or the reverse, whatever the contents: the difference
    of the two bounds, a linear form over the initial elements, is never negative (a
    packed layout: rank r's offset is the sum of the counts below r, which is at least
    where rank r-1's region ends).  The forms of one launch name the same contents."""
    (a0, a1), (b0, b1) = _exact(a), _exact(b)
    gaps = (lift(b0) - lift(a1), lift(a0) - lift(b1))
    return any(gap.lo is not None and gap.lo >= 0 for gap in gaps)


def _bounds(r: RegionInst) -> str:
    assert r.runtime is not None
    start, stop = (b.text() if isinstance(b, Rt) else str(b) for b in r.runtime)
    return f"`{r.window}@{r.rank}[{start} : {stop}]` (bytes)"


def _unproved(c: Conflict, x: OpInst, y: OpInst, out: Findings) -> None:
    """E036: writes that may overlap for some contents, unordered: not a definite race."""
    where = c.overlap.rank
    rt = [a.region for a in (c.first, c.second) if _runtime_bounds(a.region)]
    out.error("E036", "the checker could not prove these two writes disjoint", y.span,
              f"{_what(y, where)} may write {region(c.overlap)}", rank=where,
              secondary=[(x.span, f"{_what(x, where)} may write them too")],
              notes=[f"with run-time bounds ({'; '.join(_bounds(r) for r in rt)}) the checker "
                     f"knows only the bytes each write may touch over what `require` allows, "
                     f"and those overlap in {region(c.overlap)}; nothing orders the two writes",
                     "this is not a race found: for the contents `require` allows the writes "
                     "may be disjoint, but the checker cannot show it (it proves one bound at "
                     "or past the other as a sum of elements, such as a prefix sum of counts; "
                     "a product, or a relation between elements that `require` does not give "
                     "as bounds, is beyond it)", *launches_note(c.first, c.second)],
              help="give each writer a region of its own at a static offset (`out[src * cap "
                   ": src * cap + n]`, as protocols/moe_dispatch.cco does), or order the "
                   "writers (a signal and a `wait_signal` between them)")


def _caller_race(c: Conflict, out: Findings) -> None:
    """A transfer writes an input window while its rank's caller writes it between launches."""
    caller, other = (c.first, c.second) if c.first.op is None else (c.second, c.first)
    op = other.op
    assert op is not None
    out.error("E031", "data race: two writes to the same bytes in no fixed order", op.span,
              f"{_what(op, c.overlap.rank)} writes {region(c.overlap)}", rank=c.overlap.rank,
              secondary=[(access_span(caller), caller_text(caller))],
              notes=launches_note(c.first, c.second),
              help=f"order rank {op.rank}'s {name(op)} after rank {c.overlap.rank}'s previous "
                   "launch ended (a leading `barrier()`), or write into a window that is not "
                   "an input")


def _missing_order(x: OpInst, y: OpInst) -> str:
    if x.kind is OpKind.COPY or y.kind is OpKind.COPY:
        copy, other = (x, y) if x.kind is OpKind.COPY else (y, x)
        return (f"rank {copy.rank} runs its {name(copy)} without waiting for "
                f"{_what(other, copy.rank)} to land")
    if x.rank == y.rank:
        return (f"both are issued by rank {x.rank}, but on different queues or by concurrent "
                f"issuers: nothing orders their landing")
    return (f"nothing makes rank {y.rank} wait for {_what(x, -1)} to land before its own "
            f"{name(y)} lands")


def _race_help(x: OpInst, y: OpInst) -> str:
    if x.rank == y.rank and x.kind is not OpKind.COPY and y.kind is not OpKind.COPY:
        return "write disjoint bytes, put both on one queue, or add `fence()` between them"
    return ("write disjoint bytes, or order the writers: signal the first one's arrival and "
            "`wait_signal` for it before the second writes")


# ============================================================================= E032


def _reader(c: Conflict) -> int:
    return c.first.op.rank if c.first.op is not None else c.first.check.rank  # type: ignore[union-attr]


def _uncounted(a: Analysis, c: Conflict) -> bool:
    """The reader waits on a counter that nothing counts to: E026 says so."""
    g, reader = a.graph, _reader(c)
    return any(w.kind == "count" and w.total == 0 and w.rank == reader
               and g.hb(g.done(w.rank, w.op), c.first.event)
               for w in a.matching.waits.values())


def _miscounted(a: Analysis, c: Conflict) -> bool:
    """The read follows a wait that counts per-copy signals per group: E023 says so."""
    put, reader = c.second.op, _reader(c)
    if put is None or put.queue is None or not put.signal.remote or put.peer != reader:
        return False
    waits = [w for w in a.matching.waits.values() if w.key == (reader, put.rank, put.queue)]
    return any(a.matching.counts_groups(w) for w in waits)


def _early_read(a: Analysis, c: Conflict, out: Findings) -> None:
    reader, writer = c.first, c.second
    put = writer.op
    if put is None:  # the caller writes an input between launches while a transfer reads it
        _read_across_caller(c, out)
        return
    rank = reader.op.rank if reader.op is not None else reader.region.rank
    notes = launches_note(reader, writer)
    if reader.load is not None:
        _early_load(c, out)
        return
    if reader.op is None:
        label = f"`ensure` reads {region(c.overlap)} on rank {rank}"
        if put.epoch > reader.epoch:
            label = caller_text(reader)
            notes = [f"rank {put.rank}'s next launch may write these bytes before rank {rank}'s "
                     "caller has read them", *notes]
        else:
            notes = [f"`ensure` sees the state at the end of rank {rank}'s launch; a transfer "
                     "still in flight then is not ordered by the end of the kernel", *notes]
    else:
        label = f"{name(reader.op)} reads {region(c.overlap)}"
        if _early_credit(a, reader, writer) is not None:
            notes = [f"rank {put.rank} may overwrite these bytes before they are read: its "
                     f"{name(put)} waits for a credit that rank {rank} sends before reading",
                     *notes]
    out.error("E032", "read before arrival: nothing orders the write of these bytes before "
              "this read", _span(reader), label, rank=rank,
              secondary=[(put.span, f"{_what(put, c.overlap.rank)} writes them")],
              notes=notes, help=(_launch_hint(out.ctx, reader, writer)
                                 or _credit_hint(a, reader, writer) or _wait_hint(put, rank)))


def _early_load(c: Conflict, out: Findings) -> None:
    """A `load(...)` (or `ensure`'s run-time element) unordered with the write it needs, or
    with the next launch's write of the element."""
    reader, writer = c.first, c.second
    put, load = writer.op, reader.load
    assert put is not None and load is not None
    rank = reader.op.rank if reader.op is not None else reader.region.rank
    later = writer.launch > reader.launch
    text = load_text(reader)
    label = (f"{text} may read it after rank {put.rank}'s next launch rewrote it at {put.span}"
             if later else f"{text} may read before {where(put)} arrives")
    out.error("E032", "load before arrival: nothing orders the write of this element before "
              "the load that reads it", access_span(reader), label, rank=rank,
              secondary=[(put.span, f"{_what(put, c.overlap.rank)} writes {region(c.overlap)}")],
              notes=[f"a run-time value read too early is a stale one: the value rank {rank} "
                     "uses (a length, a count, an `expected=`) may be another launch's",
                     *launches_note(reader, writer)],
              help=_launch_hint(out.ctx, reader, writer)
              or _load_hint(put, rank))


def _load_hint(put: OpInst, reader: int) -> str:
    if put.kind is OpKind.PUT and put.counter is None:
        q = 0 if put.queue is None else put.queue
        return (f"load it after `wait_signal({put.rank}, queue={q})` on rank {reader}, for a "
                f"signal rank {put.rank} sends with the `put` or after it on queue {q}")
    return _wait_hint(put, reader)


def _read_across_caller(c: Conflict, out: Findings) -> None:
    reader, caller = c.first, c.second
    op = reader.op
    assert op is not None
    if reader.load is not None:
        out.error("E032", "load before arrival: nothing orders the write of this element "
                  "before the load that reads it", access_span(reader),
                  f"{load_text(reader)} may read it while rank {c.overlap.rank}'s caller "
                  "writes the next launch's input", rank=op.rank,
                  secondary=[(access_span(caller), caller_text(caller))],
                  notes=[f"rank {op.rank} may read the previous launch's value or the next "
                         "one's", *launches_note(reader, caller)],
                  help=f"order the load before rank {c.overlap.rank}'s launch ends (a "
                       "trailing `barrier()`), or after the next one starts (a leading "
                       "`barrier()`)")
        return
    out.error("E032", "read before arrival: nothing orders the write of these bytes before "
              "this read", op.span, f"{name(op)} reads {region(c.overlap)}", rank=op.rank,
              secondary=[(access_span(caller), caller_text(caller))],
              notes=[f"rank {op.rank}'s {name(op)} may read these bytes while rank "
                     f"{c.overlap.rank}'s caller writes the next launch's input",
                     *launches_note(reader, caller)],
              help=f"order the read before rank {c.overlap.rank}'s launch ends (it waits for a "
                   "signal sent after the read completed), or after the next one starts (a "
                   "leading `barrier()`)")


def _launch_hint(ctx: PassContext, reader: Access, writer: Access) -> str | None:
    """The fix when the write comes from a later launch than the read: the cheapest that
    applies on the target, if one is chosen (`back_to_back_fix`)."""
    if writer.launch <= reader.launch:
        return None
    w = writer.op
    assert w is not None
    return back_to_back_fix(ctx.instance, w, reader.region.rank, writer.region.window,
                            target_caps(ctx))


def _early_credit(a: Analysis, reader: Access, writer: Access) -> OpInst | None:
    """A signal of the reader's rank, issued before the read, that the write waits for:
    a credit returned before the bytes it frees were read."""
    g, r, w = a.graph, reader.op, writer.op
    if r is None or w is None or w.rank == r.rank:
        return None
    write_issue = g.issue(w.rank, w.index)
    for (to, sender, _), incs in g.matching.increments.items():
        if to != w.rank or sender != r.rank:
            continue
        for inc in incs:
            sig = g.signal_event(inc.sender, inc.first, inc.local)
            if (sig is not None and g.hb(g.issue(inc.sender, inc.first), reader.event)
                    and g.hb(sig, write_issue)):
                return a.launches.ranks[inc.sender][inc.first]
    return None


def _credit_hint(a: Analysis, reader: Access, writer: Access) -> str | None:
    """The fix when the write is let go by a credit that the reader sent too early."""
    credit = _early_credit(a, reader, writer)
    if credit is None or reader.op is None or writer.op is None:
        return None
    where = f"line {credit.span.line}" if credit.span is not None else "earlier"
    return (f"move rank {reader.op.rank}'s {name(credit)} to rank {writer.op.rank} ({where}) "
            f"after this read: it tells rank {writer.op.rank} that these bytes are free while "
            f"they are still to be read, and its {name(writer.op)} overwrites them")


def _wait_hint(put: OpInst, reader: int) -> str:
    q = 0 if put.queue is None else put.queue
    if put.kind is OpKind.COPY:
        if put.rank == reader:
            return ("order the two: run the `copy` and the read in one issuer, or after the "
                    "block that forks them")
        return (f"order the read and rank {put.rank}'s `copy`: a signal from rank {put.rank} "
                f"after the copy and a wait for it before the read (or the reverse, with the "
                f"read complete first)")
    if put.kind is OpKind.GET:
        return (f"give the `get` `signal=\"local\"` and `wait_signal({put.rank}, queue={q})` "
                "before the read")
    if put.counter is not None:
        return f"add `wait_count({put.counter})` on rank {reader} before the read"
    if put.signal.remote:
        return f"add `wait_signal({put.rank}, queue={q})` on rank {reader} before the read"
    return (f"add `signal=\"remote\"` to the `put` and `wait_signal({put.rank}, queue={q})` "
            f"on rank {reader} before the read")


__all__ = ["CheckRaces"]
