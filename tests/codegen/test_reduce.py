"""`reduce` lowering on the CUDA SM targets (codegen.reduce, codegen.plan): the model the
templates print — accumulator types, weights, vector width, buffer addresses."""

from __future__ import annotations

import pytest

from ccogen.codegen.model import BUFFER0, Step
from ccogen.codegen.reduce import VECTOR, accumulator, weight_literal
from ccogen.codegen.steps import StepKind
from ccogen.compiler import compile_protocol
from ccogen.instantiate import instantiate
from ccogen.ir.dtype import DType
from ccogen.syntax import parse_ir

SOURCE = """
protocol r(n: int = {n}, T: dtype = {dtype}):
    team lsa
    window x: T[n]
    buffer out: T[n]

    kernel k(threads=256):
        barrier()
        reduce(dst=out, srcs=[x@p for p in ranks()], op="{op}"{weights})
        barrier()

    ensure:
        out == {op}(init(x@p) for p in ranks())
"""


def reduce_steps(n: int = 1024, dtype: str = "bf16", op: str = "sum",
                 target: str = "nccl-lsa") -> list[Step]:
    from ccogen.codegen.backends import Options, get_backend

    protocol = parse_ir(SOURCE.format(n=n, dtype=dtype, op=op, weights=""), "r.cco")
    instance, diags = instantiate(protocol, 2, {})
    assert instance is not None, diags
    model, _ = get_backend(target).model(instance, "r.cco", Options())  # type: ignore[attr-defined]
    return [s for k in model.kernels for p in k.programs for seg in p.segments
            for s in seg.steps if s.kind is StepKind.REDUCE]


@pytest.mark.parametrize(("dtype", "op", "acc"), [
    (DType.BF16, "sum", "float"), (DType.F16, "max", "float"), (DType.F32, "sum", "float"),
    (DType.I32, "sum", "uint32_t"), (DType.I32, "max", "int32_t"),
    (DType.I64, "sum", "uint64_t"), (DType.U8, "min", "uint8_t"), (DType.U32, "sum", "uint32_t"),
])
def test_accumulator_types(dtype: DType, op: str, acc: str) -> None:
    # f16/bf16 accumulate in f32 (language v2 §2); integer sums wrap in the unsigned type
    assert accumulator(dtype, op) == acc


def test_weight_literals() -> None:
    assert weight_literal(0.5, "float") == "0.5f"
    assert weight_literal(3, "float") == "3.0f"
    assert weight_literal(-2, "uint32_t") == "static_cast<uint32_t>(-2LL)"


def test_reduce_step_reads_every_rank_in_order_and_writes_the_buffer() -> None:
    steps = reduce_steps()
    assert len(steps) == 2  # one per rank
    for rank, s in enumerate(steps):
        r = s.reduction
        assert r is not None
        assert s.dst_peer == BUFFER0 and s.dst_off == 0  # buffer `out`, a kernel parameter
        assert [p for p, _ in r.srcs] == [-1 if p == rank else p for p in range(2)]
        assert (r.ctype, r.acc, r.op, r.elements) == ("__nv_bfloat16", "float", "sum", 1024)
        assert r.vector == VECTOR and s.vec


def test_odd_length_keeps_16_byte_vectors_and_a_tail() -> None:
    # 1001 bf16 = 2002 bytes: aligned starts, so the body is 16-byte words, the tail elements
    (s, *_) = reduce_steps(n=1001)
    assert s.reduction is not None and s.reduction.vector == VECTOR
    assert s.nbytes == 2002


def test_buffer_is_a_kernel_parameter_in_the_manifest() -> None:
    import json

    protocol = parse_ir(SOURCE.format(n=64, dtype="f32", op="max", weights=""), "r.cco")
    files = compile_protocol(protocol, "nvshmem", source="r.cco", ranks=2).files
    manifest = json.loads(files["manifest.json"])
    assert manifest["buffers"] == [{"name": "out", "dtype": "f32", "shape": [64],
                                    "access": "write"}]
    assert manifest["kernels"][0]["params"][-1] == "buffer:out"
    assert manifest["windows"][0]["dtype"] == "f32"
    assert "char* buf_out" in files["kernels.cu"]
    assert "ccogen_reduce_group<float, float, CCOGEN_MAX, 2, false>" in files["kernels.cu"]


def test_unaligned_chunks_take_the_element_path() -> None:
    # two-shot with 1001 f32 per chunk: rank 1's chunk starts 4004 bytes in, not 16-aligned
    from pathlib import Path

    from ccogen.codegen.backends import Options, get_backend
    from ccogen.syntax import load_ir

    path = Path(__file__).resolve().parents[2] / "protocols" / "allreduce_twoshot.cco"
    instance, diags = instantiate(load_ir(path), 2, {"chunk": 1001, "T": DType.F32})
    assert instance is not None, diags
    model, _ = get_backend("nccl-lsa").model(instance, "t.cco", Options())  # type: ignore[attr-defined]
    steps = {p.rank: s for k in model.kernels for p in k.programs for seg in p.segments
             for s in seg.steps if s.kind is StepKind.REDUCE}
    r0, r1 = steps[0].reduction, steps[1].reduction
    assert r0 is not None and r1 is not None
    assert r0.vector == VECTOR and steps[0].vec  # chunk 0 starts at the window's start
    assert r1.vector == 4 and not steps[1].vec  # 4004 bytes in: one f32 at a time


def test_peer_loads_in_a_world_team_are_refused_on_nvshmem() -> None:
    from ccogen.errors import DiagnosticError

    source = SOURCE.format(n=64, dtype="f32", op="sum", weights="").replace(
        "team lsa", "team world")
    with pytest.raises(DiagnosticError) as info:
        compile_protocol(parse_ir(source, "r.cco"), "nvshmem", source="r.cco", ranks=2)
    (d,) = info.value.diagnostics
    assert d.code == "E042" and "needs `team lsa`" in d.message


CONVERTING = """
protocol widen(n: int = 1000):
    team lsa(2)
    between_launches: host_sync
    window x: bf16[n]
    window acc: f32[n]
    window out: bf16[n]

    kernel k(threads=256):
        reduce(dst=acc, srcs=[acc, x], op="sum", weights=[1, 0.5])
        reduce(dst=out, srcs=[acc], op="sum")
"""


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem", "nccl-cft"])
def test_a_converting_reduce_is_generated_element_by_element(target: str) -> None:
    """Sources of another float type than `dst` (#32): each source's kind and element
    width, f32 accumulation, `ccogen_reducex_*` over the element count."""
    from ccogen.codegen.backends import Options, get_backend
    from ccogen.codegen.ctasplit import _ranges

    protocol = parse_ir(CONVERTING, "w.cco")
    instance, diags = instantiate(protocol, 2, {})
    assert instance is not None, diags
    model, _ = get_backend("nccl-lsa").model(instance, "w.cco", Options())  # type: ignore[attr-defined]
    steps = [s for k in model.kernels for p in k.programs for seg in p.segments
             for s in seg.steps if s.kind is StepKind.REDUCE]
    widen, narrow = steps[0].reduction, steps[1].reduction
    assert widen is not None and narrow is not None
    assert widen.kinds == ("CCOGEN_F32", "CCOGEN_BF16") and widen.widths == (4, 2)
    assert widen.acc == "float" and widen.weights == ("1.0f", "0.5f")
    assert narrow.kinds == ("CCOGEN_F32",) and narrow.ctype == "__nv_bfloat16"
    assert widen.elements == narrow.elements == 1000
    assert not steps[0].vec and not steps[1].vec
    # the sources' byte ranges, for the cross-CTA conflict analysis: n elements of each
    (_, dst_start, dst_end, _), *srcs = _ranges(steps[0])
    assert dst_end - dst_start == 4000
    assert [end - start for _, start, end, _ in srcs] == [4000, 2000]
    text = compile_protocol(protocol, target, source="w.cco", ranks=2).files["kernels.cu"]
    assert "ccogen_reducex_group<float, CCOGEN_SUM, 2, true>" in text
    assert "const int k[] = { CCOGEN_F32, CCOGEN_BF16 };" in text
    assert "ccogen_reducex_group<__nv_bfloat16, CCOGEN_SUM, 1, false>" in text
    assert "1000ULL" in text


def test_a_converting_reduce_is_refused_on_mori_sdma() -> None:
    from ccogen.errors import DiagnosticError

    with pytest.raises(DiagnosticError) as err:
        compile_protocol(parse_ir(CONVERTING, "w.cco"), "mori-sdma", source="w.cco", ranks=2)
    assert "E042" in {d.code for d in err.value.diagnostics}
