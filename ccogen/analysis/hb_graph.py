"""The happens-before graph of an instance: events, the order between them, and queries.

networkx stays behind this door: checks ask `happens_before`, `cycles`, `ancestors`
and read `nx` (built on demand) for anything else.

*Events* (`events.EventKind`), per op instance: `issue`; for a put/get also `read`
(its source bytes are read, on the source's rank), `land` (its destination bytes
are written), `rsig` / `lsig` (the remote / local signal increment, after `land`;
one event per posting group that signals once) and `count` (a counted put's add,
after `land`); `done` for quiet, wait_signal, wait_count and barrier; one `join`
per barrier and one `end` per rank (where `ensure` reads).  A copy is synchronous:
it reads and writes at its `issue`.

*Edges* (`events.EdgeKind`):

- program order: `OpInst.preds`, from the completion of the predecessor (`done` of
  a blocking op, else `issue`) to the next `issue`; `issue -> done`; the completion
  of each op without successor -> `end`.  Kernel boundaries add nothing else, so
  transfers stay in flight across them;
- a transfer's life: `issue -> read -> land -> rsig/lsig/count`;
- queue order: transfers on one `(rank, peer, queue)` whose issues are ordered
  complete in that order: the next transfer's `read` follows the previous one's
  signals (or `land`).  Same issuer: always; different issuers: once their issues
  are known to be ordered;
- rings: an aggregate op is read only after a `commit(peer, queue)` posted after it;
  the edge comes from the commit that every possible ringer follows, when there is
  one.  A plain transfer posted on a queue behind an aggregate op with no commit
  between never returns (MORI's in-order commit chain: it spins until the committed
  pointer reaches its slot, which only `commit` moves past the batch): its issue is
  blocked (`behind`); an aggregate op that no commit follows never starts: its `read`
  is blocked;
- quiet(p[, q]) returns after the `read` of the last surely-rung op per issuer
  issued before it toward p [on q].  Sender-side only: a quiet does not order any
  `land` (the MORI seed: completion says the engine consumed the command, not that
  a receiver observed it);
- wait_signal(src, q, E) returns after each increment of the slot `[src, q]` that
  is among the first E in every schedule: s is when `1 + #{t != s : not s -> t} <= E`;
  wait_count(C, E) after each counted write c with `sum(bytes of t != c : not
  c -> t) < E`.  A wait expecting more than its key ever receives is *blocked*
  (never returns);
- barriers: the k-th barrier of every (rank, block) of a kernel's grid: every
  `issue` -> `join` -> every `done`; barriers beyond the common count are blocked;
- fence(): the issuer's transfers before it land before its transfers after it.

Reachability uses vector clocks over chains of events (`_clock`): an instance of
~20k ops sweeps in a fraction of a second.  Events behind a cycle or a blocked
event never happen: `executes` is False for them and they have no order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ccogen.analysis import _hb_derive as derive
from ccogen.analysis._clock import Clock, sweep
from ccogen.analysis._hb_build import BarrierMismatch, QueueOps, build_skeleton
from ccogen.analysis.events import EdgeKind, Event, EventKind
from ccogen.analysis.matching import Matching, match
from ccogen.ir.instance import Instance, OpInst
from ccogen.source import Span

if TYPE_CHECKING:  # imported where used: `lint` of a protocol without a hang never needs it
    import networkx as nx

MAX_ROUNDS = 64


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge of a cycle or path: `src -> dst` of kind `kind`."""

    src: int
    dst: int
    kind: EdgeKind


_WAITED = (EdgeKind.SIGNAL, EdgeKind.COUNT)


class HBGraph:
    """The happens-before graph of one instance (see the module docstring)."""

    def __init__(self, instance: Instance, matching: Matching | None = None,
                 max_bytes: int | None = None) -> None:
        self.instance = instance
        self.matching = matching if matching is not None else match(instance)
        self._sk = build_skeleton(instance, self.matching)
        # each sweep fills an int32 matrix of events x keys (`_clock._State.rows`); the
        # analysis holds up to three (structural, after blocking, fixpoint): `max_bytes`
        # is checked before each is allocated, counting those still held, and first for
        # the two every analysis with a wait or quiet needs (#29: 4.2 GB against 2 GiB)
        self._max_bytes = max_bytes
        self._rows = 4 * len(self._sk.preds) * max(len(self._sk.key_ids), 1)
        self._budget(2)
        derive.block_unsatisfiable(self._sk)
        self.clock0 = self._structural = self._sweep(0)
        blocked = derive.block_behind_batch(self._sk, self.clock0.hb)
        blocked += derive.block_unrung(self._sk, self.clock0.hb)
        if blocked:
            self._budget(3)
            self.clock0 = self._sweep(1)
        self.clock = self._fixpoint()

    # ------------------------------------------------------------------ construction
    def _budget(self, matrices: int) -> None:
        """LimitExceeded (analysis-bytes) unless `matrices` clock matrices fit."""
        need = matrices * self._rows
        if self._max_bytes is not None and need > self._max_bytes:
            from ccogen.limits import LimitExceeded

            events, keys = len(self._sk.preds), len(self._sk.key_ids)
            raise LimitExceeded(
                f"the happens-before analysis would need at least {need:,} bytes ({events:,} "
                f"events by {keys:,} issuers, {matrices} clock matrices), over the limit of "
                f"{self._max_bytes:,} bytes", "analysis-bytes", need)

    def _sweep(self, held: int) -> Clock:
        """A sweep while `held` other clock matrices are alive: its own matrix, grown for
        new chains, stays within what the limit leaves (`_clock.sweep`)."""
        sk = self._sk
        room = None if self._max_bytes is None else self._max_bytes - held * self._rows
        return sweep(sk.preds, sk.succs, sk.keys, len(sk.key_ids), sk.blocked, max_bytes=room)

    def _fixpoint(self) -> Clock:
        sk, clock0 = self._sk, self.clock0
        fresh = derive.ring_edges(sk, clock0.hb) == 0
        clock = clock0
        for n in range(MAX_ROUNDS):
            hb = derive.oracle(clock, clock0)
            again = n > 0
            added = (derive.quiet_edges(sk, hb, again)
                     + derive.wait_edges(sk, clock, clock0, again)
                     + derive.cross_queue_edges(sk, hb))
            if added == 0 and fresh:
                break
            del hb
            clock = clock0  # the last round's rows are freed before the next sweep fills its own
            clock, fresh = self._sweep(1 if self.clock0 is self._structural else 2), True
        return clock

    # ------------------------------------------------------------------ events
    def event_at(self, e: int) -> Event:
        """The event with id `e`."""
        return self._sk.event(e)

    def kind(self, e: int) -> EventKind:
        return self._sk.kinds[e]

    @property
    def kinds(self) -> list[EventKind]:
        """The kind of every event, by id (`kind` is one lookup)."""
        return self._sk.kinds

    @property
    def event_places(self) -> tuple[list[int], list[int]]:
        """The rank and the op index of every event, by id (`op` per event, for loops
        over every event: negative for the events of no op)."""
        return self._sk.ranks, self._sk.opidx

    def __len__(self) -> int:
        return len(self._sk)

    @property
    def event_ids(self) -> dict[tuple[EventKind, int, int], int]:
        """`(kind, rank, op)` -> event id, for loops over every op (`event` is one lookup)."""
        return self._sk.ids

    def event(self, kind: EventKind, rank: int, op: int) -> int | None:
        """The id of an event, None if the op has no such event."""
        return self._sk.id(kind, rank, op)

    def issue(self, rank: int, op: int) -> int:
        return self._sk.ids[(EventKind.ISSUE, rank, op)]

    def done(self, rank: int, op: int) -> int:
        return self._sk.ids[(EventKind.DONE, rank, op)]

    def read(self, rank: int, op: int) -> int:
        """Where an op reads its source: `read` of a transfer, `issue` of a copy."""
        e = self._sk.id(EventKind.READ, rank, op)
        return self.issue(rank, op) if e is None else e

    def write(self, rank: int, op: int) -> int:
        """Where an op writes its destination: `land` of a transfer, `issue` of a copy."""
        e = self._sk.id(EventKind.LAND, rank, op)
        return self.issue(rank, op) if e is None else e

    def end(self, rank: int) -> int:
        return self._sk.ids[(EventKind.END, rank, -1)]

    def launch_end(self, rank: int, epoch: int) -> int:
        """Where launch `epoch` of `rank` ends (its caller's step; the end for the last)."""
        return self._sk.launch_end(rank, epoch)

    def completion(self, rank: int, op: int) -> int:
        return self._sk.completion(rank, op)

    def signal_event(self, rank: int, op: int, local: bool) -> int | None:
        """The increment event that op `(rank, op)` takes part in."""
        inc = self.matching.signal_of.get((rank, op, local))
        if inc is None:
            return None
        return self._sk.id(EventKind.LSIG if local else EventKind.RSIG, inc.sender, inc.first)

    def op(self, e: int) -> OpInst | None:
        rank, op = self._sk.ranks[e], self._sk.opidx[e]
        if rank < 0 or op < 0:
            return None
        return self.instance.ranks[rank][op]

    def span(self, e: int) -> Span | None:
        op = self.op(e)
        return op.span if op is not None else None

    # ------------------------------------------------------------------ order
    def happens_before(self, a: int, b: int) -> bool:
        """`a` happens strictly before `b` in every schedule (both must happen)."""
        return self.clock.hb(a, b)

    hb = happens_before

    def ordered(self, a: int, b: int) -> bool:
        return self.clock.hb(a, b) or self.clock.hb(b, a)

    def executes(self, e: int) -> bool:
        """`e` happens in every schedule (it is not behind a cycle or a blocked wait)."""
        return self.clock.executes(e)

    def topo(self, e: int) -> int:
        """The position of `e` in one topological order (-1 if it never happens)."""
        return self.clock.topo[e]

    @property
    def order(self) -> list[int]:
        return self.clock.order

    @property
    def blocked(self) -> frozenset[int]:
        """Waits that expect more than they can ever get, and unmatched barriers."""
        return frozenset(self._sk.blocked)

    @property
    def stuck(self) -> list[int]:
        return self.clock.stuck

    @property
    def behind_batch(self) -> list[tuple[int, int, int]]:
        """(rank, plain op, aggregate op): plain ops that spin behind an uncommitted batch."""
        return self._sk.behind

    @property
    def barrier_mismatches(self) -> list[BarrierMismatch]:
        return self._sk.mismatches

    def preds(self, e: int) -> list[int]:
        return self._sk.preds[e]

    def succs(self, e: int) -> list[int]:
        return self._sk.succs[e]

    def edge_kind(self, u: int, v: int) -> EdgeKind | None:
        return self._sk.edge_kind.get((u, v))

    def ancestors(self, e: int) -> set[int]:
        """Every event with a path to `e` (a walk; meant for explanations, not loops)."""
        seen: set[int] = set()
        todo = deque(self._sk.preds[e])
        while todo:
            p = todo.popleft()
            if p not in seen:
                seen.add(p)
                todo.extend(self._sk.preds[p])
        return seen

    # ------------------------------------------------------------------ queue facts
    def queue_ops(self, rank: int, peer: int, queue: int) -> QueueOps | None:
        return self._sk.queues.get((rank, peer, queue))

    def sure_ringers(self, rank: int, op: int) -> list[int]:
        """Per issuer, the first doorbell (commit or plain op) issued after aggregate `op`.

        Judged on the structural order (no waits, no plain op spinning behind a
        batch), so a doorbell behind a deadlock or a spinning op still counts as issued
        after the op.
        """
        o = self.instance.ranks[rank][op]
        qo = self._sk.queues.get((rank, o.peer, o.queue))  # type: ignore[arg-type]
        if qo is None:
            return []
        return derive.sure_ringers(self._sk, rank, qo, op, self._structural.hb)

    def drained(self, rank: int, quiet: int) -> list[int]:
        """The `read` events that quiet `quiet` of `rank` waits for."""
        return derive.drained(self._sk, rank, quiet, self.hb)

    # ------------------------------------------------------------------ cycles
    def late_ring(self, cycle: list[Edge]) -> Edge | None:
        """The ring edge of a cycle that makes it an aggregate op committed too late (E020):
        a commit of the op's own kernel and launch, after a wait that needs the op.  A
        cycle through a later kernel's or launch's commit is a deadlock (E030); that the
        batch goes uncommitted in its own kernel is E020 of its own."""
        for e in cycle:
            if e.kind is EdgeKind.RING:
                commit, op = self.op(e.src), self.op(e.dst)
                if (commit is not None and op is not None and commit.kernel == op.kernel
                        and commit.epoch == op.epoch):
                    return e
        return None

    def cycles(self, unwaited: frozenset[int] = frozenset()) -> list[list[Edge]]:
        """One cycle per strongly connected group of events that never happen; with
        `unwaited`, the cycles left when those waits' returns wait for nothing (a wait
        reported of its own, whose removal would not remove the deadlock)."""
        if not unwaited:
            return self._cycles
        return self._find_cycles(unwaited)

    @cached_property
    def _cycles(self) -> list[list[Edge]]:
        return self._find_cycles(frozenset())

    def _find_cycles(self, unwaited: frozenset[int]) -> list[list[Edge]]:
        stuck = set(self.stuck)
        if not stuck:
            return []
        import networkx as nx

        kinds = self._sk.edge_kind
        sub: nx.DiGraph[int] = nx.DiGraph()
        sub.add_edges_from((u, v) for v in stuck for u in self._sk.preds[v] if u in stuck
                           and not (v in unwaited and kinds[(u, v)] in _WAITED))
        found = []
        for comp in sorted(nx.strongly_connected_components(sub), key=min):
            if len(comp) > 1:
                cyc = nx.find_cycle(sub.subgraph(comp), source=min(comp))
                found.append([Edge(u, v, self._sk.edge_kind[(u, v)]) for u, v in cyc])
        return found

    # ------------------------------------------------------------------ networkx
    @cached_property
    def nx(self) -> nx.DiGraph:
        """The graph as a networkx DiGraph: nodes are `Event`s, edges carry `kind` and `spans`."""
        import networkx as nx

        g: nx.DiGraph[Event] = nx.DiGraph()
        evs = [self._sk.event(e) for e in range(len(self._sk))]
        for e, ev in enumerate(evs):
            g.add_node(ev, id=e, span=self.span(e), executes=self.executes(e))
        for (u, v), kind in self._sk.edge_kind.items():
            g.add_edge(evs[u], evs[v], kind=kind, spans=(self.span(u), self.span(v)))
        return g

    def describe(self, e: int) -> str:
        """`land of `put` #3 on rank 0`: for debugging and test failures."""
        ev = self._sk.event(e)
        op = self.op(e)
        if op is None:
            return str(ev)
        return f"{ev.kind.value} of `{op.kind}` #{ev.op} on rank {ev.rank}"

    def iter_ops(self) -> Iterator[OpInst]:
        for ops in self.instance.ranks:
            yield from ops

    def stats(self) -> dict[str, Any]:
        return {"events": len(self._sk), "edges": len(self._sk.edge_kind),
                "chains": max(self.clock.chain, default=-1) + 1, "stuck": len(self.stuck)}


__all__ = ["Edge", "EdgeKind", "Event", "EventKind", "HBGraph"]
