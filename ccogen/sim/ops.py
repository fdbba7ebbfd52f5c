"""How an issuer executes each op, one class per op kind registered with `@impl`.

The semantics are the device APIs' (see `docs/simulator.md`):

* `put`/`get` post and return: nothing has moved.  A non-aggregate post rings the
  doorbell of its queue (which starts everything posted before it there too); an
  aggregate one waits for a `commit`.  The lanes of a posting group post together.
* `copy` runs on the compute units of the issuer: its bytes move in the step.
* `commit` rings what was posted but not yet rung on its `(peer, queue)`.
* `quiet` waits until every rung transfer on its queues has been consumed (its
  source fully read): sender-side completion only.
* `wait_signal`/`wait_count` wait until the slot or counter is `>=` the expected
  value of this launch (`plan.Wait`).
* `barrier` is two steps, arrive and depart; a departure waits for every party.
* `reset_count` sets this rank's counter to zero; it orders nothing (NVSHMEM's
  `nvshmemx_signal_counted_reset`).
* `fence` orders nothing the model does not already order (copies are synchronous).

Each class answers: may the op run now (`ready`), run it (`run`, returning True
when the op is complete), what state it touches (`footprint`, for partial-order
reduction) and, for a deadlock report, what it waits for (`blocked`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ccogen.ir.instance import OpInst
from ccogen.sim.footprint import add, rd, wr

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine
    from ccogen.sim.footprint import Key, Keys, Mems

IMPLS: dict[str, type[OpImpl]] = {}


def impl(*kinds: str) -> Callable[[type[OpImpl]], type[OpImpl]]:
    """Register the class as the implementation of the op kinds given."""

    def register(cls: type[OpImpl]) -> type[OpImpl]:
        for kind in kinds:
            IMPLS[kind] = cls
        return cls

    return register


class OpImpl:
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return True

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        return (), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return "cannot proceed"


@impl("put", "get")
class Post(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.post_group(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        return m.post_footprint(op), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return m.group_why(op)


@impl("copy")
class Copy(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.copy(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        assert op.src is not None and op.dst is not None
        return (), (m.mem_key(op.src, False), m.mem_key(op.dst, True))


@impl("commit")
class Commit(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        assert op.peer is not None and op.queue is not None
        m.ring((op.rank, op.peer, op.queue), p)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        assert op.peer is not None and op.queue is not None
        return m.ring_footprint((op.rank, op.peer, op.queue)), ()


@impl("quiet")
class Quiet(OpImpl):
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return m.drained(op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.join_consumed(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        keys: list[Key] = []
        for qi in m.quiet_queues(op):
            keys.append(rd(("qr", qi)))
            keys += [rd(("cons", qi, k)) for k in range(m.state.queues[qi].rung)]
        return tuple(keys), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return "waits for its queues to drain"


@impl("wait_signal", "wait_count")
class WaitOp(OpImpl):
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return m.wait_ready(op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.wait(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        w = m.plan.waits[(op.rank, op.index)]
        return (rd((w.kind, w.key), m.wait_need(op)),), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return m.wait_why(op)


@impl("barrier")
class BarrierOp(OpImpl):
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return m.state.phase[p] == 0 or m.barrier_complete(op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        if m.state.phase[p] == 0:
            m.arrive(p, op)
            return False
        m.depart(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        g = m.plan.barrier_gen[(op.rank, op.index)]
        return ((add if m.state.phase[p] == 0 else rd)(("bar", g)),), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return m.barrier_why(op)


@impl("reset_count")
class ResetCount(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.reset_counter(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        return (wr(("counter", (op.rank, op.counter))),), ()


@impl("fence")
class Fence(OpImpl):
    pass
