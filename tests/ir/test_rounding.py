"""The rounding rule both judges apply (`ccogen.ir.rounding`, #32)."""

from __future__ import annotations

from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp
from ccogen.ir.rounding import BF16, F16, allowed, rounds


def test_which_reduce_rounds() -> None:
    bf, f32 = DType.BF16, DType.F32
    assert rounds(ReduceOp.SUM, bf, [bf, bf], [])  # a sum stored in bf16
    assert rounds(ReduceOp.SUM, bf, [f32], [])  # a conversion to bf16
    assert rounds(ReduceOp.SUM, bf, [bf], [0.5])  # a weighted term
    assert not rounds(ReduceOp.SUM, bf, [bf], [])  # one term, weight 1: a move
    assert not rounds(ReduceOp.MAX, bf, [bf, bf], [])  # selects a bf16 value
    assert rounds(ReduceOp.MAX, bf, [f32, bf], [])  # selects an f32 value: rounds
    assert not rounds(ReduceOp.SUM, f32, [bf, f32], [])  # f32 is not counted


def test_what_ensure_allows() -> None:
    assert allowed(0, 0, DType.BF16) and allowed(0, 0, DType.F32)
    assert allowed(1, BF16, DType.BF16)
    assert not allowed(1, F16, DType.BF16)  # rounded to another type than the result's
    assert not allowed(1, BF16, DType.F32)  # an f32 result rounded through bf16
    assert not allowed(2, BF16, DType.BF16)
