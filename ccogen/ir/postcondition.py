"""What a postcondition (`ensure`) reads, shared by the checker and the simulator.

`check_regions(check)`: every region one evaluated postcondition reads, with whether it
reads it through `init(...)` (the caller's data before the launch).
`input_windows(instance)`: `(rank, window)` of every input, a window `ensure` reads
through `init(...)` (a region, or an element such as a bound or a weight), over every
launch of a period (`launch % K` rotates regions).  Between two launches each rank's
caller writes its inputs (and reads its outputs) on the launch's stream: a peer's next
launch must not touch them before that.
"""

from __future__ import annotations

from ccogen.ir.instance import CheckInst, Instance, RegionInst


def check_regions(check: CheckInst) -> list[tuple[RegionInst, bool]]:
    """Every region a postcondition reads, with whether it is an `init(...)`."""
    sides = [(check.left, check.left_init)]
    if check.right is not None:
        sides.append((check.right, check.right_init))
    if check.reduction is not None:
        sides += zip(check.reduction.terms, check.reduction.init, strict=True)
    return sides


def input_windows(instance: Instance) -> set[tuple[int, str]]:
    """`(rank, window)` of every window `ensure` reads through `init(...)`."""
    checks = [c for i in (instance, *instance.rotation) for c in i.checks]
    return {(r.rank, r.window) for c in checks for r, init in check_regions(c) if init} | {
        (x.region.rank, x.region.window) for c in checks for x in c.loads if x.init}


__all__ = ["check_regions", "input_windows"]
