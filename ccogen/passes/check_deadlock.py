"""Deadlock: no cycle of waits, and every barrier is reached equally often.

Requires an instance; uses the happens-before graph (`ccogen.analysis`).
Guarantees, when it reports nothing: the happens-before graph has no cycle (no wait
can only be satisfied after itself), and in every kernel each rank and block of the
grid reaches `barrier()` the same number of times.  A wait whose signals are never
sent at all is E021 (`check_signals`), and a cycle through an aggregate op's late
`commit` is E020 (`check_completion`), not E030.

Emits E030.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccogen.analysis import Analysis
from ccogen.analysis._hb_build import BarrierMismatch
from ccogen.analysis.events import EdgeKind, EventKind
from ccogen.analysis.hb_graph import Edge
from ccogen.ir.instance import OpInst
from ccogen.passes._report import Findings, name, times
from ccogen.passes.base import Pass, PassContext, analysis_of
from ccogen.source import Span


@dataclass(frozen=True)
class CheckDeadlock(Pass):
    """No cycle of waits, barriers reached equally (E030); see the module docstring."""

    name: ClassVar[str] = "check-deadlock"
    codes: ClassVar[tuple[str, ...]] = ("E030",)

    def run(self, ctx: PassContext) -> None:
        a = analysis_of(ctx)
        out = Findings(ctx)
        for cycle in a.graph.cycles(_over_one_launch(a)):
            if a.graph.late_ring(cycle) is None:
                _cycle(a, cycle, out)  # else E020 (check_completion)
        for mismatch in a.graph.barrier_mismatches:
            _barriers(a, mismatch, out)
        out.flush()


# ============================================================================= cycles


def _over_one_launch(a: Analysis) -> frozenset[int]:
    """The returns of waits that expect more than one launch sends to their key (or
    than the bytes counted after a reset): E021, E022, E023 or E026 names that value
    (such a wait returns on the next launch's increments, if ever, and a cycle through
    it runs through them).  The cycles left when they wait for nothing are deadlocks of
    their own."""
    g = a.graph
    out = set()
    for ops in a.launches.ranks:
        for op in ops:
            first = op.index % a.launches.launch_len(op.rank)
            w = a.matching.waits.get((op.rank, first))
            if w is None:
                continue
            after = a.after_reset(op.rank, first) if w.expected is not None else None
            if (w.expected is None or w.expected > w.total
                    or (after is not None and w.expected > after[1])):
                out.add(g.done(op.rank, op.index))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Hop:
    """`wait` waits for `cause`, which comes only after `after` returns."""

    wait: OpInst
    cause: OpInst
    after: OpInst


def _blocking(a: Analysis, e: int) -> OpInst | None:
    op = a.graph.op(e)
    done = a.graph.kind(e) is EventKind.DONE
    return op if done and op is not None and op.kind.traits.blocking else None


def hops(a: Analysis, cycle: list[Edge]) -> list[_Hop]:
    """The cycle as waits: each waits for an op that follows the previous wait (a wait
    the cycle passes through by program order only, one that `cycles` was told waits
    for nothing, is no hop)."""
    events = [e.src for e in cycle]
    waits = [i for i, e in enumerate(events) if _blocking(a, e) is not None
             and cycle[i - 1].kind is not EdgeKind.PROGRAM]
    out = []
    for j, i in enumerate(waits):
        prev = waits[j - 1]
        segment = events[prev + 1: i] if prev < i else events[prev + 1:] + events[:i]
        ops = [op for e in segment if (op := a.graph.op(e)) is not None]
        wait, after = _blocking(a, events[i]), _blocking(a, events[prev])
        assert wait is not None and after is not None
        out.append(_Hop(wait, ops[-1] if ops else after, after))
    return out


def _hop_note(h: _Hop) -> str:
    who = f"rank {h.cause.rank}"
    if h.after is h.wait:
        tail = "which comes only after that wait"
    else:
        tail = f"which {who} issues only after its {name(h.after)} ({_line(h.after)}) returns"
    return (f"rank {h.wait.rank}'s {name(h.wait)} ({_line(h.wait)}) waits for {who}'s "
            f"{name(h.cause)} ({_line(h.cause)}), {tail}")


def _line(op: OpInst) -> str:
    return f"line {op.span.line}" if op.span is not None else "?"


def _cycle(a: Analysis, cycle: list[Edge], out: Findings) -> None:
    found = hops(a, cycle)
    if not found:
        _bare_cycle(a, cycle, out)
        return
    first = min(found, key=lambda h: (h.wait.rank, h.wait.index))
    secondary: list[tuple[Span | None, str]] = []
    for h in found:
        secondary.append((h.wait.span, f"waits on rank {h.wait.rank}"))
        secondary.append((h.cause.span, "needed by a wait, but issued only after one"))
    out.error("E030", "deadlock: these waits wait for each other", first.wait.span,
              f"rank {first.wait.rank} waits here forever", rank=first.wait.rank,
              secondary=secondary, notes=[_hop_note(h) for h in found],
              help="on at least one rank, issue the signalling op before the wait "
                   "(send first, then wait)")


def _bare_cycle(a: Analysis, cycle: list[Edge], out: Findings) -> None:
    """A cycle without a wait on it (not expected to happen): name its ops."""
    ops = [op for e in cycle if (op := a.graph.op(e.src)) is not None]
    if not ops:
        return
    out.error("E030", "deadlock: these waits wait for each other", ops[0].span,
              "part of a cycle of events that wait for each other", rank=ops[0].rank,
              secondary=[(op.span, f"{name(op)} on rank {op.rank}") for op in ops[1:]],
              notes=[" -> ".join(a.graph.describe(e.src) for e in cycle)],
              help="on at least one rank, issue the signalling op before the wait")


# ============================================================================= barriers


def _barriers(a: Analysis, m: BarrierMismatch, out: Findings) -> None:
    rank, index = m.extra[0]
    op = a.launches.ranks[rank][index]
    kernel = a.instance.kernels[m.kernel].name
    mine = m.counts[(rank, op.issuer.block)]
    out.error("E030", "`barrier()` is reached a different number of times on different ranks "
              "or blocks", op.span, f"reached {times(mine)} by rank {rank} block {op.issuer.block}",
              rank=rank, notes=[f"in kernel `{kernel}`: {_counts(m.counts)}"],
              help="every rank and block of the grid must reach each `barrier()`; a barrier "
                   "under `if me == ...` or in one block only never completes")


def _counts(counts: dict[tuple[int, int], int]) -> str:
    by_count: dict[int, list[str]] = {}
    for (rank, block), n in sorted(counts.items()):
        by_count.setdefault(n, []).append(f"rank {rank} block {block}")
    parts = [f"{', '.join(where)} {'reaches' if len(where) == 1 else 'reach'} it "
             f"{times(n)}" for n, where in sorted(by_count.items(), reverse=True)]
    return "; ".join(parts)


__all__ = ["CheckDeadlock", "hops"]
