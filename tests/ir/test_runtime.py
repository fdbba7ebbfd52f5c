"""Run-time values at instantiation (ccogen/ir/runtime.py): linear forms with intervals."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccogen.ir.evaluate import EvalError
from ccogen.ir.runtime import Atom, Rt, cell_atom, lift, rt_min_max, rt_sum


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


# ----------------------------------------------------------------------------- texts

_NAMES = ("a", "b", "c")


def _named(name: str, lo: int, hi: int) -> Rt:
    """An element whose text is a Python name, so that its text can be evaluated."""
    return Rt({Atom(("cell", name, 0, 0), lo, hi, name): 1}, 0)


def _tree(depth: int = 3) -> st.SearchStrategy[tuple[object, ...]]:
    leaf = st.one_of(st.sampled_from(_NAMES).map(lambda n: ("var", n)),
                     st.integers(-5, 9).map(lambda k: ("int", k)))
    if depth == 0:
        return leaf
    sub = _tree(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["+", "-", "*", "<", "<=", "==", "!=", "min", "max"]),
                  sub, sub),
        st.tuples(st.sampled_from(["//", "%"]), sub, st.integers(1, 7).map(lambda k: ("int", k))),
        st.tuples(st.just("neg"), sub))


def _build(tree: tuple[object, ...], env: dict[str, int | Rt]) -> int | Rt:
    op, *args = tree
    if op == "var":
        return env[args[0]]  # type: ignore[index]
    if op == "int":
        return args[0]  # type: ignore[return-value]
    if op == "neg":
        return -_build(args[0], env)  # type: ignore[arg-type]
    x, y = (_build(a, env) for a in args)  # type: ignore[arg-type]
    if op in ("min", "max"):
        if isinstance(x, Rt) or isinstance(y, Rt):
            return rt_min_max(op, [x, y])
        return min(x, y) if op == "min" else max(x, y)
    ops: dict[str, Callable[[Any, Any], Any]] = {
        "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
        "%": operator.mod, "<": operator.lt, "<=": operator.le, "==": operator.eq,
        "!=": operator.ne}
    out = ops[op](x, y)
    return int(out) if isinstance(out, bool) else out


@settings(max_examples=300, deadline=None)
@given(_tree(), st.lists(st.integers(0, 6), min_size=3, max_size=3))
def test_a_run_time_text_evaluates_to_the_value_it_names(
        tree: tuple[object, ...], values: list[int]) -> None:
    """`eval(rt.text())` is the value of the expression the Rt was built from: its text
    keeps every parenthesis that its meaning needs (`2048 * (a % 2)`)."""
    concrete = dict(zip(_NAMES, values, strict=True))
    symbolic: dict[str, int | Rt] = {n: _named(n, 0, 6) for n in _NAMES}
    want = _build(tree, dict(concrete))
    got = _build(tree, symbolic)
    if isinstance(got, Rt):
        text = got.text()
        assert eval(text, {"min": min, "max": max}, dict(concrete)) == want, text
    else:
        assert got == want


def test_a_product_with_a_remainder_keeps_its_parentheses() -> None:
    a = _named("a", 0, 8)
    assert (2048 * (a % 2)).text() == "2048 * (a % 2)"
    assert (2048 * a % 2).text() == "2048 * a % 2"
    assert ((a + 1) * (a - 1)).text() == "(a + 1) * (a - 1)"
    assert ((a == 3) + (a < 2)).text() == "(a < 2) + (a == 3)"
