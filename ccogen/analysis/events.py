"""The vocabulary of the happens-before graph: events and edge kinds."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventKind(StrEnum):
    ISSUE = "issue"  # the issuer reaches the op (a copy reads and writes here)
    READ = "read"  # a put/get's source bytes are read (on the source's rank)
    LAND = "land"  # a put/get's destination bytes are written
    RSIG = "rsig"  # the remote signal increment (one per posting group), after land
    LSIG = "lsig"  # the local signal increment at the issuer, after land
    COUNT = "count"  # a counted put adds its bytes to the peer's counter, after land
    DONE = "done"  # a quiet, wait or barrier returns
    JOIN = "join"  # every participant reached the k-th barrier of a kernel
    END = "end"  # a rank's program ended (where `ensure` reads it)
    BOUNDARY = "boundary"  # between two launches of a rank: its caller reads outputs, writes inputs


class EdgeKind(StrEnum):
    PROGRAM = "program"  # program order (and issue -> done of a blocking op)
    TRANSFER = "transfer"  # issue -> read -> land -> signals of one transfer
    QUEUE = "queue"  # in-order completion of one (rank, peer, queue)
    RING = "ring"  # the `commit` (the doorbell) that starts an aggregate op
    QUIET = "quiet"  # a quiet returns after the sources of the ops it drains were read
    SIGNAL = "signal"  # a wait returns after the increments it needs
    COUNT = "count"  # a wait_count returns after the counted writes it needs
    BARRIER = "barrier"  # every participant reached the barrier
    FENCE = "fence"  # a fence orders earlier transfers' landing before later ones'
    LAUNCH = "launch"  # a rank's launch ends before its caller's step, which precedes the next


@dataclass(frozen=True, slots=True)
class Event:
    """One event: `kind` of op `op` of rank `rank`, touching memory or a slot of `where`.

    A barrier join has rank -1 and numbers its barrier in `op` (a host barrier between
    launches has op -1); a program end has op -1, the boundary after launch e op -1 - e.
    """

    kind: EventKind
    rank: int
    op: int
    where: int

    def __str__(self) -> str:
        if self.kind is EventKind.JOIN:
            return f"barrier join #{self.op}"
        if self.kind is EventKind.END:
            return f"end of rank {self.rank}"
        if self.kind is EventKind.BOUNDARY:
            return f"end of launch {-self.op} of rank {self.rank}"
        return f"{self.kind.value} of op {self.op} on rank {self.rank}"


__all__ = ["EdgeKind", "Event", "EventKind"]
