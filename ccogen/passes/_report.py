"""Helpers shared by the synchronisation checks: one finding per place, and op wording.

A protocol's op runs on many ranks and loop iterations; a check finds the same
mistake at one call site many times.  `Findings` keeps one diagnostic per
`(code, message, primary span, secondary spans)` and notes the ranks it was found on.
Messages should therefore not depend on the rank or the iteration: specifics go in
labels and notes (the driver also merges findings across instances by message).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ccogen.analysis.races import Access
from ccogen.diag import Diagnostic, error
from ccogen.diag.merge import FindingSet, ranks_note
from ccogen.ir.instance import Instance, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.postcondition import input_windows
from ccogen.passes.base import PassContext
from ccogen.source import Span
from ccogen.targets.base import Capabilities, Feature


def _key(d: Diagnostic) -> tuple[object, ...]:
    return (d.code, d.message, tuple((lb.span.start, lb.span.end) for lb in d.labels))


@dataclass
class Findings:
    """Collects one check's findings for one instance; `flush` emits them."""

    ctx: PassContext
    items: FindingSet[int] = field(default_factory=lambda: FindingSet(_key))

    def add(self, d: Diagnostic, rank: int | None = None) -> None:
        self.items.add(d, rank)

    def error(self, code: str, message: str, span: Span | None, label: str, *,
              rank: int | None = None, secondary: Iterable[tuple[Span | None, str]] = (),
              notes: Iterable[str] = (), help: str | None = None) -> None:
        self.add(error(code, message, span, label, secondary=_unique(secondary, span),
                       notes=notes, help=help), rank)

    def flush(self) -> None:
        n = self.ctx.instance.nranks
        for item in self.items:
            d = item.diagnostic
            if item.places and n > 1:
                d = replace(d, notes=(*d.notes, ranks_note(sorted(item.places), n)))
            self.ctx.sink.emit(d)
        self.items.clear()


def _unique(secondary: Iterable[tuple[Span | None, str]],
            primary: Span | None) -> list[tuple[Span | None, str]]:
    """Drop labels on the primary span or repeating an earlier span."""
    seen = {None if primary is None else (primary.start, primary.end)}
    out: list[tuple[Span | None, str]] = []
    for span, text in secondary:
        key = None if span is None else (span.start, span.end)
        if span is not None and key not in seen:
            seen.add(key)
            out.append((span, text))
    return out


def name(op: OpInst) -> str:
    """The op as code: `` `put` ``."""
    return f"`{op.kind}`"


def line(op: OpInst) -> str:
    return f"line {op.span.line}" if op.span is not None else "an op"


def at(op: OpInst) -> str:
    """`` `put` on rank 0 (line 9) ``."""
    return f"{name(op)} on rank {op.rank} ({line(op)})"


def region(r: RegionInst) -> str:
    """`` `recv@1[0:64]` ``."""
    return f"`{r}`"


def times(n: int, what: str = "time") -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def queue_arg(op: OpInst) -> str:
    return "" if op.queue is None else f", queue={op.queue}"


__all__ = ["Findings", "at", "line", "name", "queue_arg", "ranks_note", "region", "times"]


# ============================================================================= launches


def access_span(access: Access) -> Span | None:
    """Where an access is written: its `load(...)`, its op, or the postcondition a caller's
    read serves."""
    if access.load is not None and access.load.span is not None:
        return access.load.span
    if access.op is not None:
        return access.op.span
    return access.check.span if access.check is not None else None


def caller_text(access: Access) -> str:
    """What the caller of a rank does between two launches."""
    rank = access.region.rank
    if access.check is not None:
        return (f"rank {rank}'s caller reads {region(access.region)} after launch "
                f"{access.epoch + 1}")
    return (f"rank {rank}'s caller writes its input `{access.region.window}` before launch "
            f"{access.epoch + 2}")


def load_text(access: Access) -> str:
    """`` load of `counts@1[0]` `` (a `load(...)`), or `` `ensure` reading `got@0[1]` ``."""
    assert access.load is not None
    if access.op is None:
        return f"`ensure` reading `{access.load}` as a run-time value"
    return f"load of `{access.load}`"


def where(op: OpInst) -> str:
    """`` `put` at x.cco:10:5 ``."""
    return f"{name(op)} at {op.span}" if op.span is not None else name(op)


def across_launches(*accesses: Access) -> bool:
    """The accesses belong to different launches, or one is a caller's step between them."""
    return any(a.caller for a in accesses) or len({a.launch for a in accesses}) > 1


LAUNCHES_NOTE = ("launches run back to back: a rank may start its next launch while its peers "
                 "are still in this one, and each rank's caller reads its outputs and writes "
                 "its inputs between its own launches only; order the next launch after it "
                 "(a leading `barrier()`, or a credit the peer returns), or declare "
                 "`between_launches: host_sync`")


def back_to_back_fix(instance: Instance, writer: OpInst, reader: int, window: str,
                     caps: Capabilities | None = None) -> str:
    """The cheapest fix for rank `writer.rank`'s next launch writing `window` on rank
    `reader` before that rank is done with the previous launch's bytes there.

    Cheapest first: rotate the landing slot by launch (`launch % 2`: no synchronisation
    at all) where the writer already waits, in every launch, for a signal the reader sends
    once it is done with the previous launch; else a credit the reader returns after its
    read; a leading `barrier()` always works and costs a team round trip.  With the
    target's capabilities `caps` (`lint --target`), a fix the target cannot generate is
    left out or said the way it can: no rotation where `launch % K` is refused, and a
    credit as a small signalled put where a bare `signal` is."""
    rotation = caps is None or caps.supports(Feature.LAUNCH_ROTATION).available
    bare_signal = caps is None or caps.supports(Feature.CREDITS).available
    target = caps.name if caps is not None else ""
    slot = (f"rotate the landing slot by launch: make `{window}` two slots and write and "
            f"read `{window}[slot + ...]` with `slot = launch % 2 * SIZE` (rank "
            f"{writer.rank}'s launch N+2 then waits for rank {reader}'s launch N+1)")
    send = (f"rank {reader} signals rank {writer.rank} at the start of each launch "
            f"(`signal({writer.rank}, queue=Q)`" if bare_signal else
            f"at the start of each launch rank {reader} sends rank {writer.rank} a signalled "
            f"put of a few bytes (`put({writer.rank}, dst=credit[0 : 16], "
            f"src=credit[16 : 32], queue=Q, signal=\"remote\")` with a `window credit: 32`, "
            f"`{target}` lowers no bare `signal`")
    sep = ":" if bare_signal else ";"
    credit = (f"return a credit: {send}{sep} its caller is done with the previous launch's "
              f"`{window}` then), and rank {writer.rank} waits for it "
              f"(`wait_signal({reader}, queue=Q)`) before it writes")
    barrier = "a `barrier()` at the start of the kernel"
    rotatable = window not in {w for r, w in input_windows(instance) if r == reader} and \
        not instance.is_buffer(window)
    waits = any(op.kind is OpKind.WAIT_SIGNAL and op.peer == reader
                for op in instance.ranks[writer.rank])
    if rotation and rotatable and waits and instance.period == 1:
        return f"{slot}; or return a credit, or put {barrier}"
    if rotatable and instance.period > 1:
        return f"{credit}, then the rotating slots suffice; or put {barrier}"
    return f"{credit}; or put {barrier}"


def launches_note(*accesses: Access) -> list[str]:
    """The note a finding across launches carries (none within one launch)."""
    if not across_launches(*accesses):
        return []
    return [f"the two span consecutive launches: {LAUNCHES_NOTE}"]
