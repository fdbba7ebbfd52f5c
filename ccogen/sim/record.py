"""What one step of the machine did (`StepRecord`), for schedules and traces."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ccogen.sim.plan import OpKey


class RecordKind(StrEnum):
    OP = "op"  # an issuer ran (a step of) an op
    XFER = "xfer"  # an engine queue ran a step of a transfer
    HOST = "host"  # a rank's host (its caller) ended one of its launches


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one step did: an issuer op, a transfer step or the host."""

    proc: int
    kind: RecordKind
    epoch: int
    op: OpKey | None = None
    xid: int = -1
    phase: int = 0
    complete: bool = False
    source: int = -1  # a wait: the transfer whose increment let it pass
    rank: int = -1  # an op's or a host's rank


__all__ = ["RecordKind", "StepRecord"]
