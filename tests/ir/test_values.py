"""Element values (`ccogen.ir.values`): bf16 rounding, `reduce`'s combination, the
tolerant float comparison and the caller's random data."""

from __future__ import annotations

import numpy as np
import pytest

from ccogen.ir import values
from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp


def _f32(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32).view(np.uint8)


def test_bf16_rounds_to_nearest_even() -> None:
    got = values.f32_to_bf16(np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, np.nan],
                                      dtype=np.float32))
    assert [hex(v) for v in got] == ["0x3f80", "0x3f80", "0x3f82", "0xc020", "0x7f80", "0x7fc0"]
    assert values.bf16_to_f32(np.array([0x3F82], dtype=np.uint16))[0] == np.float32(1.015625)


def test_sums_accumulate_in_f32_and_round_once() -> None:
    # 1 + 2**-9 + 2**-9 in bf16: each partial rounding would lose both halves
    a = values.encode(np.array([1.0], dtype=np.float32), DType.BF16)
    b = values.encode(np.array([2.0**-8], dtype=np.float32), DType.BF16)
    got = values.combine(ReduceOp.SUM, [a, b, b], [0.5, 0.5, 0.5], DType.BF16)
    assert values.decode(got, DType.BF16)[0] == np.float32(0.5 + 2.0**-8)


def test_integers_wrap_and_compare_bit_exact() -> None:
    big = np.array([2**31 - 1], dtype=np.int32).view(np.uint8)
    one = np.array([1], dtype=np.int32).view(np.uint8)
    total = values.combine(ReduceOp.SUM, [big, one], [], DType.I32)
    assert total.view(np.int32)[0] == -(2**31)
    assert values.compare(total, ReduceOp.SUM, [big, one], [], DType.I32).all()
    off = (total.view(np.int32) + 1).view(np.uint8)
    assert not values.compare(off, ReduceOp.SUM, [big, one], [], DType.I32).any()


def test_a_float_sum_in_another_order_is_within_the_tolerance() -> None:
    rng = np.random.default_rng(3)
    terms = [values.random_values(rng, 256, DType.F32) for _ in range(8)]
    other = values.combine(ReduceOp.SUM, terms[::-1], [], DType.F32)
    assert values.compare(other, ReduceOp.SUM, terms, [], DType.F32).all()
    missing = values.combine(ReduceOp.SUM, terms[1:], [], DType.F32)
    assert not values.compare(missing, ReduceOp.SUM, terms, [], DType.F32).any()


@pytest.mark.parametrize("dtype", list(DType))
def test_random_values_are_finite_and_nonzero(dtype: DType) -> None:
    raw = values.random_values(np.random.default_rng(0), 1000, dtype)
    assert raw.size == 1000 * dtype.size
    decoded = values.decode(raw, dtype)
    if dtype.is_float:
        assert np.isfinite(decoded).all() and (np.abs(decoded) >= 0.5).all()


def test_max_and_min_are_exact() -> None:
    a, b = _f32(1.0, -3.0), _f32(2.0, -4.0)
    assert values.combine(ReduceOp.MAX, [a, b], [], DType.F32).view(np.float32).tolist() == \
        [2.0, -3.0]
    assert values.combine(ReduceOp.MIN, [a, b], [], DType.F32).view(np.float32).tolist() == \
        [1.0, -4.0]



@pytest.mark.parametrize("dtype", list(DType))
def test_values_decode_into_the_one_accumulator_type(dtype: DType) -> None:
    raw = values.random_values(np.random.default_rng(1), 4, dtype)
    assert values.decode(raw, dtype).dtype == values.storage(dtype.accumulator)
    assert dtype.accumulator is (DType.F32 if dtype in (DType.F16, DType.BF16) else dtype)
