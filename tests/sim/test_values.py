"""Typed values in the simulator (`ccogen.sim.values`) and the v2 ops it runs."""

from __future__ import annotations

import numpy as np
import pytest

from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp
from ccogen.sim import simulate, values


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


ROTATED = '''\
protocol rotated(n: int = 64):
    team lsa
    window x: f32[n]
    buffer out: f32[n]

    kernel k(threads=32):
        barrier()
        reduce(dst=out, srcs=[x@((me + i) % nranks) for i in range(nranks)], op="sum")
        barrier()

    ensure:
        out == sum(init(x@p) for p in ranks())
'''


def test_the_simulator_sees_ranks_disagree_in_the_last_bits() -> None:
    report = simulate(ROTATED, ranks=[4], seeds=2)
    assert report.passed  # within the tolerance
    assert {d.code for d in report.diagnostics} == {"W108"}
    ordered = ROTATED.replace("x@((me + i) % nranks) for i in range(nranks)",
                              "x@p for p in ranks()")
    assert simulate(ordered, ranks=[4], seeds=2).diagnostics == []


def test_buffers_are_refilled_by_the_caller_at_every_launch() -> None:
    text = '''\
protocol send(n: int = 64):
    team lsa(2)
    buffer src: f32[n]
    window inbox: f32[n]

    kernel k(threads=32):
        if me == 0:
            put(1, dst=inbox, src=src)
'''
    # the put may still read `src` when the caller refills it for the next launch
    report = simulate(text, seeds=6, epochs=2)
    assert {d.code for d in report.diagnostics} == {"E025"}
    assert simulate(text + "            quiet(1)\n", seeds=6, epochs=3).passed


def test_the_gpu_runner_checks_reductions_on_values() -> None:
    from ccogen.instantiate import instantiate
    from ccogen.rt.data import evaluate, initial_bytes, instance_checks
    from ccogen.syntax import parse_ir

    ordered = ROTATED.replace("x@((me + i) % nranks) for i in range(nranks)",
                              "x@p for p in ranks()")
    inst, _ = instantiate(parse_ir(ordered), 3, {})
    assert inst is not None
    specs = instance_checks(inst)
    size = inst.window_size("x")
    inputs = {(r, "x"): initial_bytes(5, 0, r, "x", size, "f32") for r in range(3)}
    assert all(np.isfinite(values.decode(a, DType.F32)).all() for a in inputs.values())
    right = values.combine(ReduceOp.SUM, [inputs[(r, "x")] for r in range(3)], [], DType.F32)
    wrong = values.combine(ReduceOp.SUM, [inputs[(r, "x")] for r in range(2)], [], DType.F32)

    def reader(final: np.ndarray):  # type: ignore[no-untyped-def]
        def read(region):  # type: ignore[no-untyped-def]
            whole = inputs[(region.rank, region.window)] if region.init else final
            return whole[region.start:region.stop]
        return read

    assert evaluate(specs, reader(right), 0) == []
    failures = evaluate(specs, reader(wrong), 0)
    assert len(failures) == 3 and "f32 elements are not the sum" in failures[0].detail


def test_a_converting_reduce_widens_exactly_and_rounds_once() -> None:
    """bf16 sources widened to f32 exactly, summed in f32, rounded once to `dst`'s type."""
    one = values.encode(np.array([1.0], dtype=np.float32), DType.BF16)
    tiny = values.encode(np.array([2.0**-8], dtype=np.float32), DType.BF16)
    f32 = values.combine(ReduceOp.SUM, [one, tiny], [], DType.F32, [DType.BF16, DType.BF16])
    assert values.decode(f32, DType.F32)[0] == np.float32(1 + 2.0**-8)  # exact in f32
    back = values.combine(ReduceOp.SUM, [f32, tiny], [], DType.BF16, [DType.F32, DType.BF16])
    assert values.decode(back, DType.BF16)[0] == np.float32(1 + 2.0**-7)  # one rounding
    hop = values.combine(ReduceOp.SUM, [values.combine(ReduceOp.SUM, [one, tiny], [],
                                                       DType.BF16), tiny], [], DType.BF16)
    assert values.decode(hop, DType.BF16)[0] == np.float32(1.0)  # rounded at each hop


def test_the_simulator_counts_the_roundings_of_a_bf16_ring_as_lint_does() -> None:
    from tests.helpers import REPO_ROOT

    text = (REPO_ROOT / "protocols" / "reduce_scatter_ring.cco").read_text()
    report = simulate(text, ranks=[4], params={"T": "bf16", "chunk": 256}, seeds=1)
    e033 = [d for d in report.diagnostics if d.code == "E033"]
    assert e033 and any("rounded to bf16 3 times" in n for n in e033[0].notes)
    assert e033[0].help is not None and "f32" in e033[0].help
