"""How an issuer executes each op: one class per `OpKind`, registered with `@impl`.

The semantics are the device APIs' (see `docs/simulator.md`):

* `put`/`get` post and return: nothing has moved.  A non-aggregate post rings the
  doorbell of its queue; an aggregate one waits for a `commit`.  A plain post on a
  queue that holds aggregate ops no commit has rung never returns (MORI's in-order
  commit chain: it waits for a committed pointer only `commit` moves).  The lanes of
  a posting group post together.
* `signal` posts a transfer without data on its queue: it signals in queue order.
* `copy` runs on the compute units of the issuer: its bytes move in the step.
* `reduce` too: it loads every source (a peer's over the link), combines them in
  list order in the accumulation type and stores `dst` (`values.combine`).
* `commit` rings what was posted but not yet rung on its `(peer, queue)` (every
  issuer's: a commit unordered with another issuer's post there is E028).
* `quiet` waits until every rung transfer on its queues has been consumed (its
  source fully read): sender-side completion only.
* `wait_signal`/`wait_count` wait until the slot or counter is `>=` the expected
  value of this launch (`plan.Wait`).
* `barrier` is two steps, arrive and depart; a departure waits for every party.
* `reset_count` sets this rank's counter to zero; it orders nothing (NVSHMEM's
  `nvshmemx_signal_counted_reset`).
* `fence` makes the issuer's transfers posted before it land before the first byte
  of its transfers posted after it (on other queues: one queue is in order anyway).

Each class answers: may the op run now (`ready`), run it (`run`, returning True
when the op is complete; an op of `steps` steps completes in its last), what state
it touches (`footprint`, for partial-order reduction), for a deadlock report what it
waits for (`blocked`), and for timed schedules how long a step takes (`cost_us`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.sim import queues, waits
from ccogen.sim.footprint import add, rd, wr

if TYPE_CHECKING:
    from ccogen.sim.cost import StepCosts
    from ccogen.sim.engine import Machine
    from ccogen.sim.footprint import Key, Keys, Mems

IMPLS: dict[OpKind, type[OpImpl]] = {}
"""The simulation of each op kind (a test checks that every kind has one)."""


def impl(*kinds: OpKind) -> Callable[[type[OpImpl]], type[OpImpl]]:
    """Register the class as the implementation of the op kinds given."""

    def register(cls: type[OpImpl]) -> type[OpImpl]:
        for kind in kinds:
            assert kind not in IMPLS, f"two simulations of `{kind}`"
            IMPLS[kind] = cls
        return cls

    return register


class OpImpl:
    steps: ClassVar[int] = 1  # an issuer's steps per op; `run` completes it in the last
    # the op may wait for others (`ready` False): the `load`s before it are a step of their
    # own, run when the issuer reaches the op, not when the op may run (`Machine.loads_first`)
    blocks: ClassVar[bool] = False

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

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        """How long one step of the op takes (an op that only looks at state polls)."""
        return cost.poll_us


@impl(OpKind.PUT, OpKind.GET, OpKind.SIGNAL)
class Post(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        queues.post_group(m, p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        return queues.post_footprint(m, op), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        if p in m.spinning:
            return "spins: posted behind aggregate ops no `commit` has rung"
        return queues.group_why(m, op)

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        return cost.issue_us(op.lanes_in_group)


@impl(OpKind.COPY)
class Copy(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.copy(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        assert op.src is not None and op.dst is not None
        return (), (m.mem_key(op.src, False), m.mem_key(op.dst, True))

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        assert op.src is not None
        return cost.copy_us(op.src.size)


@impl(OpKind.REDUCE)
class Reduce(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        m.reduce(p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        assert op.dst is not None
        return (), (*(m.mem_key(s, False) for s in op.srcs), m.mem_key(op.dst, True))

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        assert op.dst is not None
        return cost.copy_us(op.dst.size * len(op.srcs))


@impl(OpKind.COMMIT)
class Commit(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        assert op.peer is not None and op.queue is not None
        queues.commit_access(m, p, op)
        queues.ring(m, (op.rank, op.peer, op.queue), p)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        assert op.peer is not None and op.queue is not None
        return queues.ring_footprint(m, (op.rank, op.peer, op.queue)), ()

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        return cost.issue_us(1)


@impl(OpKind.QUIET)
class Quiet(OpImpl):
    blocks = True
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return queues.drained(m, op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        queues.join_consumed(m, p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        keys: list[Key] = []
        for qi in queues.quiet_queues(m, op):
            keys.append(rd(("qr", qi)))
            keys += [rd(("cons", qi, k)) for k in range(m.state.queues[qi].rung)]
        return tuple(keys), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return "waits for its queues to drain"


@impl(OpKind.WAIT_SIGNAL, OpKind.WAIT_COUNT)
class WaitOp(OpImpl):
    blocks = True
    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return waits.wait_ready(m, op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        waits.wait(m, p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        w = m.plan.waits[(op.rank, op.index)]
        return (rd((w.kind, w.key), waits.wait_need(m, op)),), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return waits.wait_why(m, op)


@impl(OpKind.BARRIER)
class BarrierOp(OpImpl):
    steps = 2  # arrive, depart

    @staticmethod
    def ready(m: Machine, p: int, op: OpInst) -> bool:
        return m.state.phase[p] == 0 or waits.barrier_complete(m, op)

    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        if m.state.phase[p] == 0:
            waits.arrive(m, p, op)
            return False
        waits.depart(m, p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        g = waits.barrier_key(m, op)
        return ((add if m.state.phase[p] == 0 else rd)(("bar", g)),), ()

    @staticmethod
    def blocked(m: Machine, p: int, op: OpInst) -> str:
        return waits.barrier_why(m, op)

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        return cost.barrier_us / 2


@impl(OpKind.RESET_COUNT)
class ResetCount(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        waits.reset_counter(m, p, op)
        return True

    @staticmethod
    def footprint(m: Machine, p: int, op: OpInst) -> tuple[Keys, Mems]:
        return (wr(("counter", (op.rank, op.counter))),), ()


@impl(OpKind.FENCE)
class Fence(OpImpl):
    @staticmethod
    def run(m: Machine, p: int, op: OpInst) -> bool:
        queues.fence(m, p)
        return True

    @staticmethod
    def cost_us(cost: StepCosts, op: OpInst) -> float:
        return 0.0
