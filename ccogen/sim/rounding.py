"""How often the simulator rounded each value to f16 or bf16 on its way (#32).

`ensure`'s float sums allow one rounding of the result to its own element type
(`values.tolerance`).  A protocol that stores partial sums in an f16/bf16 window (a
ring or a tree with one `reduce` per hop) rounds at every hop: its values are off by
more than the tolerance on some draws and not on others.  So that the verdict does
not depend on the draw, and agrees with `ccogen lint` (which counts the same
roundings symbolically, by the rule of `ir.rounding`), the simulator counts them next
to the bytes: one code per byte of every window, `count << 2 | types`, where `count`
is the most roundings to f16 or bf16 along any path from the launch's inputs to the
value (saturating at 63) and `types` says to which (`ir.rounding.F16`, `BF16`).
Copies and transfers move the codes with the bytes; a launch's inputs have code 0; a
`reduce` gives each element of its `dst` the largest count of its sources' elements,
plus one when it rounds (`ir.rounding.rounds`), and the union of their types.

A float sum in `ensure` holds only where every element of its left side has code 0,
or one rounding to the left side's own type (`allowed`).
"""

from __future__ import annotations

import numpy as np

from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.rounding import rounds, type_bit, type_names
from ccogen.sim.state import Layout, Memory

MAX_COUNT = 63


def allowed(codes: np.ndarray, dtype: DType) -> np.ndarray:
    """Per element code: whether a float sum checked in a `dtype` region may hold it
    (`ir.rounding.allowed`)."""
    one = (1 << 2) | type_bit(dtype)
    return (codes == 0) | ((codes == one) & bool(type_bit(dtype)))  # type: ignore[no-any-return]


def counted(instance: Instance) -> bool:
    """Whether an instance can round to f16/bf16 at all (else the codes stay 0 and the
    simulator keeps none)."""
    return any(op.kind is OpKind.REDUCE and op.dtype is not None and type_bit(op.dtype)
               for ops in instance.ranks for op in ops) and \
        any(c.reduction is not None for c in instance.checks)


def per_element(codes: np.ndarray, width: int) -> np.ndarray:
    """The code of each element of a region (`width` bytes each): its bytes' largest
    count and the union of their types."""
    if width == 1:
        return codes
    first = codes[::width]
    if (codes.reshape(-1, width) == first[:, None]).all():  # as `reduce` writes them
        return first
    rows = codes.reshape(-1, width)
    count = (rows >> 2).max(axis=1)
    types = (rows & 1).max(axis=1) | (rows & 2).max(axis=1)
    return ((count << 2) | types).astype(np.uint8)  # type: ignore[no-any-return]


class Rounds:
    """The codes of every byte of every window (see the module docstring), laid out as
    the simulated memory's bytes (`state.Layout`: dense, or only the touched ones)."""

    def __init__(self, arrays: dict[tuple[int, str], np.ndarray], layout: Layout,
                 written: frozenset[tuple[int, str]]) -> None:
        self.arrays = arrays
        self.layout = layout
        self.written = written  # the others stay 0: shared between copies

    @classmethod
    def zeros(cls, memory: Memory) -> Rounds:
        return cls({k: np.zeros(a.size, dtype=np.uint8) for k, a in memory.arrays.items()},
                   memory.layout, memory.written)

    def copy(self) -> Rounds:
        return Rounds({k: (a.copy() if k in self.written else a)
                       for k, a in self.arrays.items()}, self.layout, self.written)

    def clear(self, key: tuple[int, str]) -> None:
        """A launch's fresh input: never rounded."""
        if key in self.written:
            self.arrays[key][:] = 0

    def view(self, r: RegionInst) -> np.ndarray:
        key = (r.rank, r.window)
        return self.arrays[key][self.layout.locate(key, r.start, r.stop)]

    def reduce(self, op: OpInst, instance: Instance) -> None:
        """The codes a `reduce` gives its destination."""
        assert op.dst is not None and op.dtype is not None and op.reduce_op is not None
        src_dtypes = [instance.dtype(s.window) for s in op.srcs]
        views = [self.view(s) for s in op.srcs]
        rounding = rounds(op.reduce_op, op.dtype, src_dtypes, op.weights)
        if not any(v.any() for v in views):  # the common case: sources never rounded
            self.view(op.dst)[:] = (1 << 2 | type_bit(op.dtype)) if rounding else 0
            return
        elements = [per_element(v, d.size) for v, d in zip(views, src_dtypes, strict=True)]
        count = np.max([e >> 2 for e in elements], axis=0)
        types = np.bitwise_or.reduce([e & 3 for e in elements], axis=0)
        if rounding:
            count = np.minimum(count + 1, MAX_COUNT)
            types = types | type_bit(op.dtype)
        code = ((count << 2) | types).astype(np.uint8)
        self.view(op.dst)[:] = np.repeat(code, op.dtype.size)


__all__ = ["Rounds", "allowed", "counted", "per_element", "type_names"]
