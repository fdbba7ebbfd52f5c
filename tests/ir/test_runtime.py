"""Run-time values at instantiation (ccogen/ir/runtime.py): linear forms with intervals."""

from __future__ import annotations

import pytest

from ccogen.ir.evaluate import EvalError
from ccogen.ir.runtime import Rt, cell_atom, lift, rt_min_max, rt_sum


def element(i: int, lo: int | None = 0, hi: int | None = 8) -> Rt:
    return Rt({cell_atom("counts", 0, i, lo, hi): 1}, 0)


def test_sums_and_scales_keep_exact_forms_and_intervals() -> None:
    n, m = element(0), element(1)
    total = 3 * n + m - 2
    assert (total.lo, total.hi) == (-2, 30)
    assert total.same(m + n * 3 - 2) and not total.same(m + n * 3)
    assert (n - n).same(0) and ((n + 5) - n).same(5)


def test_unbounded_elements_leave_unbounded_forms() -> None:
    free = element(2, None, None)
    assert not free.bounded and (free * 0).same(0)
    assert [a.text for a in (free + element(0)).unbounded_atoms()] == ["counts@0[2]"]


def test_comparisons_are_decided_by_intervals_or_stay_run_time() -> None:
    n = element(0)
    assert (n >= 0) is True and (n > 8) is False and (n == -1) is False
    hit = n == 3
    assert isinstance(hit, Rt) and (hit.lo, hit.hi) == (0, 1)
    assert (n == 3).same(hit)  # the same expression is the same unknown


def test_a_run_time_value_never_decides_control_flow() -> None:
    with pytest.raises(EvalError, match="decides control flow") as info:
        bool(element(0))
    assert info.value.code == "E004"
    assert bool(element(0) + 1)  # in [1, 9]: decided


def test_products_floors_and_min_max_are_bounded_unknowns() -> None:
    n, m = element(0), element(1, 2, 4)
    product = n * m
    assert (product.lo, product.hi) == (0, 32) and len(product.terms) == 1
    half = n // 2
    assert isinstance(half, Rt) and (half.lo, half.hi) == (0, 4)
    low = rt_min_max("min", [n, 5])
    assert isinstance(low, Rt) and (low.lo, low.hi) == (0, 5)
    assert rt_min_max("max", [1, 4]) == 4


def test_long_sums_are_one_form() -> None:
    total = rt_sum([element(i) for i in range(100)])
    assert isinstance(total, Rt) and (total.lo, total.hi) == (0, 800) and len(total.terms) == 100
    assert lift(3).same(3)


def test_division_by_a_run_time_value_is_refused() -> None:
    with pytest.raises(EvalError) as info:
        6 // element(0)  # type: ignore[operator]
    assert info.value.code == "E004"
