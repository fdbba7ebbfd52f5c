"""Run-time peers in code generation (language reference §14, "Run-time peers").

A `put` whose peer is read on the device is instantiated as one op instance per
candidate peer, each moving its regions only when the value is that candidate
(`ir.instance.RtPeer`): what the checker and the simulator need.  The generated code
moves them once, to the peer the kernel reads: `collapse` keeps the first candidate of
each such op with the regions it moves (`RtPeer.dst`/`src`), drops the others and links
their successors to what they followed; `plan` prints the peer as a C expression
(`codegen.rtexpr`).  Targets whose engines take a static peer refuse it (`refuse`).
"""

from __future__ import annotations

from dataclasses import replace

from ccogen.codegen.steps import RT_PEER
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import Instance, OpInst

SM_TARGETS = ("nccl-lsa", "nvshmem")  # the targets that take the peer at run time
__all__ = ["RT_PEER", "SM_TARGETS", "collapse", "has_rt_peers", "refuse"]


def has_rt_peers(instance: Instance) -> bool:
    return any(o.rt_peer is not None for ops in instance.ranks for o in ops)


def refuse(instance: Instance, target: str) -> None:
    """Unsupported (E042) at the first run-time peer, on a target that cannot take one
    (`lint --target` says so first: passes.check_capabilities)."""
    from ccogen.targets import get_target
    from ccogen.targets.base import Feature

    if get_target(target).capabilities.supports(Feature.RUNTIME_PEERS).available:
        return
    for ops in instance.ranks:
        for o in ops:
            if o.rt_peer is not None:
                raise Unsupported(f"`{target}` takes the peer of a transfer at instantiation: "
                                  "a run-time peer is generated for "
                                  f"{' and '.join(SM_TARGETS)} only", o.span)


def collapse(instance: Instance) -> Instance:
    """The instance with each run-time-peer op once (its first candidate: a `put` toward
    the run-time peer, its unguarded regions)."""
    if not has_rt_peers(instance):
        return instance
    return replace(instance, ranks=tuple(_collapse_rank(ops) for ops in instance.ranks))


def _collapse_rank(ops: tuple[OpInst, ...]) -> tuple[OpInst, ...]:
    new: dict[int, tuple[int, ...]] = {}  # old index -> new indices it stands for
    out: list[OpInst] = []
    for o in ops:
        preds = tuple(dict.fromkeys(j for i in o.preds for j in new[i]))
        m = o.rt_peer
        if m is not None and not m.first:
            new[o.index] = preds  # dropped: its successors follow what it followed
            continue
        new[o.index] = (len(out),)
        if m is not None:
            o = replace(o, dst=m.dst, src=m.src)
        out.append(replace(o, index=len(out), preds=preds))
    return tuple(out)
