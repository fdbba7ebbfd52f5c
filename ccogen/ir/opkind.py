"""Op kinds: one enum, and one table of what each kind is.

`OpKind` names the operations of the language.  It is a `StrEnum`, so a kind
prints, sorts, hashes and serialises as its name (`put`, `wait_signal`, ...):
messages, manifests, traces and generated comments read the same as strings.

Code asks what an op *is* through its traits, never through a list of names:
`op.kind.traits.queued`, not `op.kind in ("put", "get")`; one kind by identity,
`op.kind is OpKind.PUT`.  A test fails on a comparison of an op kind with a string
literal (`tests/ir/test_opkind_comparisons.py`).

Adding an op: the member here, its row in `TRAITS`, its IR node and signature
(`ccogen.ir.nodes`, `ccogen.ir.signatures`), its builder method, its simulation
(`ccogen.sim.ops`), its code generation (`ccogen.codegen.plan`, the backends) and its
tests; `tests/ir/test_opkind.py` fails while a piece is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OpKind(StrEnum):
    PUT = "put"
    GET = "get"
    COPY = "copy"
    COMMIT = "commit"
    QUIET = "quiet"
    WAIT_SIGNAL = "wait_signal"
    WAIT_COUNT = "wait_count"
    RESET_COUNT = "reset_count"
    BARRIER = "barrier"
    FENCE = "fence"
    REDUCE = "reduce"
    SIGNAL = "signal"

    @property
    def traits(self) -> OpTraits:
        return TRAITS[self]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTraits:
    """What an op kind is, as the checker, the simulator and the code generators ask.

    * `transfer`: moves bytes from its `src` region to its `dst` region.
    * `queued`: posted to one of the issuer's engine queues toward a peer; it returns
      at once and the engine moves the bytes later, in queue order.  A queued op
      that is not a `transfer` carries no data (`signal`: a credit).
    * `rings`: starts (rings the doorbell of) what was posted on its `(peer, queue)`;
      a queued op rings unless it is `aggregate`.
    * `signals`: may raise a signal (`signal=`) or a count (`count=`) when it lands.
    * `reads_remote`: its source is the peer's memory (the engine reads it there).
    * `blocking`: returns when a condition holds, not when it is issued.
    * `waits`: waits for a signal slot or a counter to reach a value.
    * `synchronises`: returns only after other ranks act (a wait or a barrier): the
      boundary between rounds of traffic.
    * `orders_memory`: orders memory beyond the issuer's program and queue order
      (a team barrier, a fence between transfers).
    * `reduces`: combines several source regions (`srcs`, some perhaps a peer's,
      read by loads over the link) element-wise into its `dst`, on the issuer's
      threads; it is done when it returns, like a `copy`.
    """

    transfer: bool = False
    queued: bool = False
    rings: bool = False
    signals: bool = False
    reads_remote: bool = False
    blocking: bool = False
    waits: bool = False
    synchronises: bool = False
    orders_memory: bool = False
    reduces: bool = False


_QUEUED = OpTraits(transfer=True, queued=True, rings=True, signals=True)
_WAIT = OpTraits(blocking=True, waits=True, synchronises=True)

TRAITS: dict[OpKind, OpTraits] = {
    OpKind.PUT: _QUEUED,
    OpKind.GET: OpTraits(transfer=True, queued=True, rings=True, signals=True,
                         reads_remote=True),
    OpKind.COPY: OpTraits(transfer=True),
    OpKind.COMMIT: OpTraits(rings=True),
    OpKind.QUIET: OpTraits(blocking=True),
    OpKind.WAIT_SIGNAL: _WAIT,
    OpKind.WAIT_COUNT: _WAIT,
    OpKind.RESET_COUNT: OpTraits(),
    OpKind.BARRIER: OpTraits(blocking=True, synchronises=True, orders_memory=True),
    OpKind.FENCE: OpTraits(orders_memory=True),
    OpKind.REDUCE: OpTraits(reduces=True),
    OpKind.SIGNAL: OpTraits(queued=True, rings=True, signals=True),
}


def kinds_where(**traits: bool) -> frozenset[OpKind]:
    """The kinds whose traits have the values given: `kinds_where(queued=True)`."""
    for name in traits:
        if name not in OpTraits.__dataclass_fields__:
            raise TypeError(f"OpTraits has no trait {name!r}")
    return frozenset(k for k, t in TRAITS.items()
                     if all(getattr(t, name) == value for name, value in traits.items()))


__all__ = ["TRAITS", "OpKind", "OpTraits", "kinds_where"]
