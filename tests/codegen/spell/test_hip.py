"""codegen.spell.hip: every statement kind has a spelling; calls, guarded waits and lane
tables print as the mori-sdma kernels expect (tests/golden/mori-sdma: whole programs)."""

from __future__ import annotations

from ccogen.codegen.spell.hip import SPELLINGS, expected, rt_at, sdma_targs, stmt, transfer_args
from ccogen.codegen.steps import Stmt, StmtKind


def test_every_statement_kind_has_a_spelling() -> None:
    assert set(SPELLINGS) == set(StmtKind)


def test_a_call_with_and_without_template_arguments_or_guard() -> None:
    put = Stmt(StmtKind.CALL, func="sdma.put", targs=("ccoCoopBlock", "false"),
               args=("1", "c.win"))
    assert stmt(put, "  ") == "  sdma.put<ccoCoopBlock, false>(1, c.win);\n"
    fence = Stmt(StmtKind.CALL, func="ccogen_fence_system", guard="threadIdx.x == 0")
    assert stmt(fence, "") == "if (threadIdx.x == 0) ccogen_fence_system();\n"


def test_a_wait_acquires_after_the_spin() -> None:
    wait = Stmt(StmtKind.WAIT, func="sdma.waitSignal", args=("1", "0", "1ULL"))
    assert stmt(wait, "") == ("if (true) {\n  sdma.waitSignal(1, 0, 1ULL);\n"
                              "  ccogen_acquire_system();\n}\n")


def test_a_lane_table() -> None:
    lanes = Stmt(StmtKind.LANES, func="sdma.quiet", targs=("ccoCoopThread",), args=("a.peer",),
                 rows=((0, (("peer", "1"),)), (1, (("peer", "0"),))))
    assert stmt(lanes, "") == (
        "{\n  ccogen_lane a{};\n  switch (threadIdx.x) {\n"
        "    case 0: a.on = true; a.peer = 1; break;\n"
        "    case 1: a.on = true; a.peer = 0; break;\n"
        "    default: break;\n  }\n  if (a.on) {\n    sdma.quiet<ccoCoopThread>(a.peer);\n"
        "  }\n}\n")


def test_a_comment_is_a_line_comment() -> None:
    assert stmt(Stmt(StmtKind.COMMENT, text="t.cco:3: put"), "  ") == "  // t.cco:3: put\n"


def test_the_pieces_of_a_put() -> None:
    assert sdma_targs("thread", True, False, True, True, True) == (
        "ccoCoopThread", "true", "false",
        "ccoSdmaOptFlagsAggregate | ccoSdmaOptFlagsSignalPerCopy", "ccoSdmaThreadSameQueue")
    # the thread mode is a thread-scope argument only
    assert sdma_targs("warp", False, True, False, False, True)[-1] == "ccoSdmaThreadIndependent"
    assert transfer_args("1", "0ULL", "64ULL", "8ULL", "2") == (
        "1", "c.win", "0ULL", "c.win", "64ULL", "8ULL", "2")
    assert rt_at("rt3_n", "16LL", 128) == "ccogen_rt_at(rt3_n, 16LL, 128ULL)"
    assert expected("2ULL", "2ULL") == "2ULL + c.epoch * 2ULL"
