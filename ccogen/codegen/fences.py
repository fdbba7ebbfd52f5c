"""Proxy fences of the fabric targets: one table per target, one rule for choosing.

On sm_100 a word or a payload reaches memory through one of two *proxies*: the
generic proxy (ordinary loads, stores and atomics of the SMs) or the fabric proxy
(NCCL CFT `cft.put`/`red`/`putCounted`/`get`, NVSHMEM's counted puts).  A write by
one proxy is ordered before an access by the other only through a proxy fence naming
both: `ncclMemFence(coop, order, producer, consumer, scope)`
(nccl_device/impl/cft__funcs.h), whose four branches print
`fence.proxy.fabric::generic` (Generic -> Fabric), `fence.proxy.fabric::fabric`,
`fence.proxy.generic::fabric` (Fabric -> Generic) and, Generic -> Generic,
`fence.acquire.sys` / `fence.release.sys`.

Every fence a backend emits beyond those inside its primitives is chosen here, from
`Fence(order, producer, consumer, scope)`, so that the rule is written once:

* after a wait, an *acquire* from the proxy that wrote the waited word to every proxy
  that consumes what the wait orders: Fabric -> Generic for a remote signal or counter
  read by generic loads (inside the wait primitives already), Generic -> Generic for a
  word written by ordinary stores (a local signal, a counter this rank resets or takes
  bytes off: the counted waits' own acquire is fabric-only, cft__funcs.h `waitCounted`,
  nvshmemx_defines.h `nvshmemx_signal_counted_wait_until`), and Generic -> Fabric when
  a fabric operation (a `get`) consumes it: NCCL's barrier passes its consumer proxy to
  the same fence (cft_barrier__funcs.h);
* after a generic store that a peer's later fabric write must not overtake (`reset_count`
  before the credit that lets the peer count again): a *release* Generic -> Fabric.

`WAIT_PROVIDES` says which acquire the target's wait primitive already performs; the
backends add the rest as `pfence` steps, printed by `TABLES[target]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ccogen.codegen.steps import WAITS, Step, StepKind


class Proxy(Enum):
    GENERIC = "Generic"
    FABRIC = "Fabric"


class Order(Enum):
    ACQUIRE = "acquire"
    RELEASE = "release"


class Scope(Enum):
    CTA = "Cta"
    SYS = "Sys"


@dataclass(frozen=True, slots=True)
class Fence:
    order: Order
    producer: Proxy
    consumer: Proxy
    scope: Scope = Scope.SYS


def _nccl(f: Fence) -> str:
    return (f"cuda::memory_order_{f.order.value}, ncclMemProxyType::{f.producer.value}, "
            f"ncclMemProxyType::{f.consumer.value}, ncclMemFenceScope::{f.scope.value}")


_PTX_PROXY = {(Proxy.FABRIC, Proxy.GENERIC): "fence.proxy.generic::fabric.alias",
              (Proxy.GENERIC, Proxy.FABRIC): "fence.proxy.fabric::generic.alias",
              (Proxy.FABRIC, Proxy.FABRIC): "fence.proxy.fabric::fabric.alias"}


def _ptx(f: Fence) -> str:
    """The instruction `ncclMemFence` prints for `f` at system scope (NVSHMEM has no
    such wrapper: its own fences are these instructions, device/logical_endpoint_device)."""
    assert f.scope is Scope.SYS
    base = _PTX_PROXY.get((f.producer, f.consumer), "fence")
    return f'"{base}.{f.order.value}.sys;"'


# every fence each target can print, as the argument of its `ccogen_pfence_<scope>`
TABLES: dict[str, dict[Fence, str]] = {
    target: {f: render(f) for f in (Fence(o, p, c) for o in Order for p in Proxy for c in Proxy)}
    for target, render in (("nccl-cft", _nccl), ("nvshmem", _ptx))
}

# the acquire each target's wait primitives perform after the spin
WAIT_PROVIDES: dict[str, frozenset[Fence]] = {
    "nccl-cft": frozenset({Fence(Order.ACQUIRE, Proxy.FABRIC, Proxy.GENERIC)}),
    # `ccogen_wait_*` spin with acquire loads (Generic -> Generic); `fabacquire` and the
    # counted wait add Fabric -> Generic
    "nvshmem": frozenset({Fence(Order.ACQUIRE, Proxy.FABRIC, Proxy.GENERIC)}),
}


def after_wait(target: str, writers: frozenset[Proxy], consumers: frozenset[Proxy],
               spin_acquires: bool = False) -> list[Fence]:
    """The acquires to add after a wait on a word written by `writers`, ordering what
    `consumers` do next (`spin_acquires`: the wait's own loads are generic acquires)."""
    wanted = [Fence(Order.ACQUIRE, p, c) for p in sorted(writers, key=lambda x: x.value)
              for c in sorted(consumers, key=lambda x: x.value)]
    # a word written by the fabric proxy and consumed by a fabric op: the acquire that
    # orders the fabric op after the (generic) load that saw the word
    wanted = [Fence(Order.ACQUIRE, Proxy.GENERIC, Proxy.FABRIC)
              if (f.producer, f.consumer) == (Proxy.FABRIC, Proxy.FABRIC) else f for f in wanted]
    provided = WAIT_PROVIDES[target] | (
        {Fence(Order.ACQUIRE, Proxy.GENERIC, Proxy.GENERIC)} if spin_acquires else set())
    return [f for f in dict.fromkeys(wanted) if f not in provided]


def before_fabric_after_generic() -> Fence:
    """A generic store that a later fabric write (a peer's counted add) must not overtake."""
    return Fence(Order.RELEASE, Proxy.GENERIC, Proxy.FABRIC)


def text(target: str, fence: Fence) -> str:
    return TABLES[target][fence]


# whether the target's run-time counted wait releases its take-off to the fabric itself
TAKE_RELEASES: dict[str, bool] = {"nccl-cft": True, "nvshmem": False}
SPIN_ACQUIRES = frozenset({StepKind.WAIT, StepKind.CWAIT, StepKind.RTWAIT})
# the target's spin waits are acquire loads (nvshmem), so they provide their own fence
SPINS_ACQUIRE: dict[str, bool] = {"nccl-cft": False, "nvshmem": True}


def add_proxy_fences(target: str, steps: tuple[Step, ...], generic_words: frozenset[int],
                     fabric_reads: bool) -> tuple[Step, ...]:
    """`steps` with the table's fences after each wait and each `reset`.

    `generic_words`: heap offsets of words that ordinary stores write (a local signal
    slot, a counter fed by emulated adds); every other waited word is written by the
    fabric proxy.  `fabric_reads`: the rank issues fabric reads (`get`) that a wait may
    order."""
    out: list[Step] = []
    consumers = frozenset({Proxy.GENERIC} | ({Proxy.FABRIC} if fabric_reads else set()))
    for s in steps:
        out.append(s)
        if s.kind in WAITS:
            writers = frozenset({Proxy.GENERIC if s.off in generic_words else Proxy.FABRIC})
            spin = SPINS_ACQUIRE[target] and s.kind in SPIN_ACQUIRES
            out.extend(Step(StepKind.PFENCE, text=text(target, f), line=s.line)
                       for f in after_wait(target, writers, consumers, spin))
        if s.kind is StepKind.RESET or (s.kind is StepKind.RTWAITCOUNTED
                                        and not TAKE_RELEASES[target]):
            # a generic store (the reset, or the bytes a run-time wait takes off) before
            # the credit after which the peer's fabric counted adds come again
            out.append(Step(StepKind.PFENCE, text=text(target, before_fabric_after_generic()),
                            line=s.line))
    return tuple(out)


__all__ = ["TABLES", "WAIT_PROVIDES", "Fence", "Order", "Proxy", "Scope", "add_proxy_fences",
           "after_wait", "before_fabric_after_generic", "text"]
