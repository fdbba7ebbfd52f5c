"""Which `reduce` rounds to a 16-bit float, and how many roundings `ensure` allows (#32).

A float sum in `ensure` (`out == sum(...)`) promises the sum of its terms accumulated in
f32 and rounded once to `out`'s element type.  Roundings to f32 are within the
accumulation error the comparison allows (`docs/reference/language.md`, "Reductions");
roundings to f16 and bf16 are counted, along the longest path from the launch's inputs
to the value: a `reduce` into an f16/bf16 region rounds (`rounds`), copies and
transfers move values unchanged.  The result may have been rounded at most once, and
then to its own type (`allowed`).  The checker (`analysis.symbolic`) and the simulator
(`sim.rounding`) count independently, by this rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp

F16, BF16 = 1, 2  # the `types` bits of a rounding


def type_bit(dtype: DType) -> int:
    """The bit of a rounding to `dtype` (0: f32 and integers are not counted)."""
    return {DType.F16: F16, DType.BF16: BF16}.get(dtype, 0)


def type_names(types: int) -> list[str]:
    return [name for bit, name in ((F16, "f16"), (BF16, "bf16")) if types & bit]


def rounds(op: ReduceOp, dtype: DType, src_dtypes: Sequence[DType],
           weights: Sequence[int | float]) -> bool:
    """Whether a `reduce` into `dtype` from sources of `src_dtypes` rounds to f16/bf16: it
    does unless it only moves or selects values of `dst`'s own type (a `max`/`min` of
    such sources, or a sum of one such source with weight 1)."""
    if not type_bit(dtype):
        return False
    if any(d is not dtype for d in src_dtypes):
        return True
    if op is not ReduceOp.SUM:
        return False
    return len(src_dtypes) > 1 or any(w != 1 for w in weights)


def allowed(count: int, types: int, dtype: DType) -> bool:
    """Whether a float sum checked in a `dtype` region may have been rounded `count`
    times to the types `types`: never, or once to `dtype` itself."""
    return count == 0 or (count == 1 and bool(type_bit(dtype)) and types == type_bit(dtype))


__all__ = ["BF16", "F16", "allowed", "rounds", "type_bit", "type_names"]
