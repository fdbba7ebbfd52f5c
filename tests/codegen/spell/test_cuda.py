"""codegen.spell.cuda: every step kind has a spelling, and the text is the call the
backends' primitives take (the goldens, tests/golden, hold whole programs)."""

from __future__ import annotations

from ccogen.codegen.spell.cuda import SPELLINGS, step
from ccogen.codegen.steps import Reduction, Spread, Step, StepKind


def test_every_step_kind_has_a_spelling() -> None:
    assert set(SPELLINGS) == set(StepKind)


def test_a_copy_at_each_scope() -> None:
    s = Step(StepKind.COPY, dst_peer=1, dst_off=64, src_off=128, nbytes=32, vec=True)
    for scope in ("group", "warp", "thread"):
        assert step(s, scope, "  ") == (
            f"  ccogen_copy_{scope}(c, 1, 64ULL, -1, 128ULL, 32ULL, true);\n")


def test_run_time_fields_replace_the_static_ones_inside_a_block_of_lets() -> None:
    s = Step(StepKind.CSIGNAL, peer=2, off=8, value=1, rt=(("value", "rt_n"),),
             let=(("rt_n", "ld(0)"),))
    assert step(s, "group", "  ") == (
        "  {\n"
        "    const uint64_t rt_n = static_cast<uint64_t>(ld(0));\n"
        "    ccogen_csignal_group(c, 2, 8ULL, rt_n);\n"
        "  }\n")


def test_context_primitives_take_the_context_only() -> None:
    for kind in (StepKind.QUIET, StepKind.FENCE, StepKind.CTASYNC, StepKind.FABACQUIRE):
        assert step(Step(kind), "warp", "") == f"ccogen_{kind.value}_warp(c);\n"


def test_a_loop_indents_its_body_one_level() -> None:
    body = (Step(StepKind.COMMENT, text="// p.cco:3: put"),
            Step(StepKind.SYNC, seq=2, rt=(("seq", "(2 + 1LL * t)"),)))
    assert step(Step(StepKind.LOOP, value=4, body=body), "warp", "  ") == (
        "  for (int64_t t = 0; t < 4; ++t) {\n"
        "    // p.cco:3: put\n"
        "    ccogen_sync_warp(c, (2 + 1LL * t), kSyncs);\n"
        "  }\n")


def test_a_spread_runs_its_cases_at_warp_scope() -> None:
    chunk = Step(StepKind.CHUNK, dst_peer=1, dst_off=0, src_peer=-2, nbytes=256, value=8192)
    spread = Spread(branches=2, iterations=3, chunks=1, chunk_bytes=8192,
                    cases=((chunk,), (chunk,)))
    text = step(Step(StepKind.SPREAD, text="// p.cco:9: spread", spread=spread), "group", "")
    assert text.splitlines()[:2] == [
        "// p.cco:9: spread",
        "for (uint64_t i = ccogen_spread_first(c); i < 6ULL; i += ccogen_spread_stride(c)) {"]
    assert text.count("ccogen_copy_chunk_warp(c, 1, 0ULL, -2, 0ULL, 256ULL, chunk, 8192ULL);") == 2
    assert "    case 1: {\n" in text and text.endswith("    default: break;\n  }\n}\n")


def test_a_weighted_reduce() -> None:
    red = Reduction(op="sum", dtype="bf16", ctype="__nv_bfloat16", acc="float",
                    srcs=((-1, 0), (1, 64)), weights=("0.5f", "2.0f"), vector=16, elements=32)
    s = Step(StepKind.REDUCE, dst_off=128, nbytes=64, vec=True, reduction=red, line=7)
    assert step(s, "group", "") == (
        "{\n"
        "  const ccogen_addr s[] = {{ -1, 0ULL }, { 1, 64ULL }};\n"
        "  const float w[] = { 0.5f, 2.0f };\n"
        "  ccogen_reduce_group<__nv_bfloat16, float, CCOGEN_SUM, 2, true>(c, -1, 128ULL, s, w, "
        "64ULL, true, 7);\n"
        "}\n")
