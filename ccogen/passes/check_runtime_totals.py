"""Run-time totals: a `wait_count` whose `expected=` is read on the device (E034).

Requires a symbolic instance (`Instance.runtime == "symbolic"`): run-time values are
linear forms over the initial contents (`ccogen.ir.runtime.Rt`).  Guarantees, when it
reports nothing: every `wait_count(C, expected=E)` with a run-time `E` waits for
exactly the bytes that the counted puts of the epoch (`put(..., count=C)` from any
rank to this one) bring, for every initial contents that `require` allows — proved
by the two linear forms being identical, element by element of the initial contents.

Emits E034 when the forms differ.  Equal forms are a proof; different forms may
still agree on every allowed contents when the equality rests on a `require` that
is not an interval (then the message says that the debug build's device check is
what will catch a violation: `OpInst.expected_rt` is the hook).

E035: a `wait_count` with a static `expected=` (or none) on a counter that also
receives run-time bytes.  The bytes an epoch brings are then only known on the device
(`16 + 16 * n`), while a static wait waits for a number fixed at instantiation: the
static footprint when `expected=` is omitted (more than arrives: a hang in the first
launch), and `expected + epoch * footprint` in later launches when it is given (the
counter is never reset: a hang from the second launch).  A hand-written static
`expected=` on a counter the protocol resets with `reset_count` has no epoch offset and
is kept (the other checks judge it).  An omitted `expected=` is reported only for the
targets that wait for a byte total (nccl-cft, nvshmem, nccl-lsa): `mori-sdma` waits for
the counted puts' signal slots, whose counts are static, and the language (no target)
means every byte counted, which the simulator runs.
"""

from __future__ import annotations

from typing import ClassVar

from ccogen.diag import error
from ccogen.ir.instance import OpInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt, lift
from ccogen.passes.base import Pass, PassContext

MAX_LABELS = 4


class CheckRuntimeTotals(Pass):
    """Run-time `expected=` of `wait_count` equals the counted bytes (E034)."""

    name: ClassVar[str] = "check-runtime-totals"
    codes: ClassVar[tuple[str, ...]] = ("E034", "E035")

    def run(self, ctx: PassContext) -> None:
        inst = ctx.instance
        if inst.runtime != "symbolic":
            return
        _static_waits(ctx)
        seen: set[tuple[object, str]] = set()
        for ops in inst.ranks:
            for op in ops:
                if op.kind is not OpKind.WAIT_COUNT or not isinstance(op.expected_rt, Rt):
                    continue
                counted = _counted_to(inst.ranks, op.rank, op.counter or "")
                total = lift(0)
                for put in counted:
                    total = total + _length(put)
                if op.expected_rt.same(total):
                    continue
                key = (op.span, op.expected_rt.text())
                if key in seen:
                    continue
                seen.add(key)
                secondary = [(p.span, f"counts `{_text(_length(p))}` bytes to rank {op.rank}")
                             for p in counted[:MAX_LABELS]]
                ctx.sink.emit(error(
                    "E034", f"the run-time `expected=` of `wait_count({op.counter})` may differ "
                    "from the bytes counted to this rank",
                    op.span, f"expects `{op.expected_rt.text()}` bytes", secondary=secondary,
                    notes=(f"the counted puts bring `{total.text()}` bytes to rank {op.rank}",
                           f"in the instance {inst.label()}"),
                    help="make `expected=` the same sum of the loaded counts that sizes the "
                         "counted puts (in bytes); if it only holds by a `require` that is "
                         "not a bound, the debug build checks it on the device"))


# targets whose `wait_count` without `expected=` waits for the counted puts themselves
# (their signal slots, a static count each), not for a byte total; without a target the
# language's meaning holds (every byte counted in the epoch), which the simulator runs
_WAITS_ON_PUTS = frozenset({None, "mori-sdma"})


def _static_waits(ctx: PassContext) -> None:
    """E035: a static `wait_count` on a counter whose per-epoch total is run-time."""
    inst = ctx.instance
    resets = {(op.rank, op.counter) for ops in inst.ranks for op in ops
              if op.kind is OpKind.RESET_COUNT}
    seen: set[object] = set()
    for ops in inst.ranks:
        for op in ops:
            if op.kind is not OpKind.WAIT_COUNT or op.expected_rt is not None:
                continue
            counted = _counted_to(inst.ranks, op.rank, op.counter or "")
            varying = [p for p in counted if isinstance(_length(p), Rt)]
            if not varying or (op.expected is not None and (op.rank, op.counter) in resets):
                continue
            if op.expected is None and ctx.target in _WAITS_ON_PUTS:
                continue  # the language's total: a target that waits on the puts has it
            if op.span in seen:
                continue
            seen.add(op.span)
            total = lift(0)
            for put in counted:
                total = total + _length(put)
            footprint = sum(p.dst.size for p in counted if p.dst is not None)
            waits = (f"waits for {footprint} bytes (the most the counted puts may bring)"
                     if op.expected is None else
                     f"waits for {op.expected} bytes, plus {footprint} per earlier launch")
            secondary = [(p.span, f"counts `{_text(_length(p))}` bytes to rank {op.rank}, "
                                  "known only on the device") for p in varying[:MAX_LABELS]]
            ctx.sink.emit(error(
                "E035", f"a static `wait_count({op.counter})` on a counter that receives a "
                "run-time number of bytes", op.span, waits, secondary=secondary,
                notes=(f"the counted puts bring `{total.text()}` bytes to rank {op.rank} "
                       "each launch; the generated code cannot know that total where it "
                       "waits, nor advance the counter's expected value by it",
                       f"in the instance {inst.label()}"),
                help="give `expected=` as the run-time sum of the loaded counts that size the "
                     "counted puts (a header sent before them, as in `counted_rows`), or wait "
                     "for the static puts with `signal=\"remote\"` and `wait_signal`"))


def _counted_to(ranks: tuple[tuple[OpInst, ...], ...], rank: int, counter: str
                ) -> list[OpInst]:
    return [op for ops in ranks for op in ops
            if op.kind is OpKind.PUT and op.counter == counter and op.peer == rank]


def _length(op: OpInst) -> Rt | int:
    assert op.dst is not None
    if op.dst.runtime is None:
        return op.dst.size
    start, stop = op.dst.runtime
    return stop - start  # type: ignore[operator, no-any-return]


def _text(v: Rt | int) -> str:
    return v.text() if isinstance(v, Rt) else str(v)


__all__ = ["CheckRuntimeTotals"]
