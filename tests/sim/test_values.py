"""Typed values in the simulator (element values: `ccogen.ir.values`) and the v2 ops it
runs."""

from __future__ import annotations

import numpy as np

from ccogen.ir import values
from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp
from ccogen.sim import simulate

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
