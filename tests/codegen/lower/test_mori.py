"""codegen.lower.mori: the mori-sdma lowering pass, ops of one block to statements
(whole programs: tests/golden/mori-sdma, tests/codegen/backends/test_mori_sdma.py)."""

from __future__ import annotations

import pytest

from ccogen.analysis import analyse
from ccogen.codegen.layout import plan_heap
from ccogen.codegen.lower.mori import Part, hw_thread, lower_block, mori_facts
from ccogen.codegen.plan import block_ops
from ccogen.codegen.spell.hip import stmt
from ccogen.codegen.steps import Stmt, StmtKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.instantiate import instantiate
from ccogen.ir.instance import Instance
from ccogen.syntax import parse_ir

PUT = """protocol p(n: bytes = 64 B):
    team lsa(2)
    window buf: n
    window out: n

    kernel k(threads=64):
        if me == 0:
            put(1, dst=out, src=buf, queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)
"""

LANES = """protocol p(n: bytes = 64 B):
    team lsa(2)
    window buf: n
    window out: n

    kernel k(threads=64):
        if me == 0:
            lanes t in range(2):
                put(1, dst=out[t*32 : (t+1)*32], src=buf[t*32 : (t+1)*32], queue=t,
                    signal="remote")
        else:
            lanes t in range(2):
                wait_signal(0, queue=t)
"""


def _instance(text: str) -> Instance:
    instance, diags = instantiate(parse_ir(text, "t.cco"), 2)
    assert instance is not None, diags
    return instance


def _lowered(text: str, rank: int, debug: bool = False) -> tuple[Part, ...]:
    instance = _instance(text)
    facts = mori_facts(instance, analyse(instance), plan_heap(instance, 1), "t.cco", debug)
    return lower_block(facts, block_ops(instance, 0, rank)[0])


def _stmts(parts: tuple[Part, ...]) -> list[Stmt]:
    return [s for part in parts for br in part.branches for s in br.stmts]


def test_a_block_put_is_one_sdma_call_with_every_template_argument() -> None:
    stmts = _stmts(_lowered(PUT, 0))
    calls = [s for s in stmts if s.kind is StmtKind.CALL]
    assert [c.func for c in calls] == ["sdma.put", "sdma.quiet"]
    put = calls[0]
    assert put.targs == ("ccoCoopBlock", "false", "true", "ccoSdmaOptFlagsDefault",
                         "ccoSdmaThreadIndependent")
    assert put.args[0] == "1" and put.args[-1] == "0" and put.args[5] == "64ULL"
    assert stmts[0].kind is StmtKind.COMMENT and stmt(stmts[0], "") == "// t.cco:8: put\n"


def test_a_wait_is_led_by_thread_zero_then_the_block_syncs() -> None:
    stmts = _stmts(_lowered(PUT, 1))
    kinds = [s.kind for s in stmts]
    assert kinds == [StmtKind.COMMENT, StmtKind.WAIT, StmtKind.SYNC]
    wait = stmts[1]
    assert (wait.func, wait.guard) == ("sdma.waitSignal", "threadIdx.x == 0")
    assert wait.args == ("0", "0", "1ULL + c.epoch * 1ULL")


def test_debug_waits_are_bounded_and_name_their_line() -> None:
    wait = _stmts(_lowered(PUT, 1, debug=True))[1]
    assert wait.func == "ccogen_wait_bounded" and wait.args[0] == "c" and wait.args[-1] == "11"


def test_lanes_of_one_phase_share_one_call_site_with_a_table() -> None:
    (part,) = _lowered(LANES, 0)
    assert part.join and [br.guard for br in part.branches] == ["ccogen_wave() == 0"]
    tables = [s for s in part.branches[0].stmts if s.kind is StmtKind.LANES]
    assert len(tables) == 1 and tables[0].func == "sdma.put"
    assert [thread for thread, _ in tables[0].rows] == [0, 1]
    assert dict(tables[0].rows[1][1])["queue"] == "1"


def test_hardware_threads_are_wave64() -> None:
    instance = _instance(LANES)
    assert [hw_thread(op) for op in instance.ranks[0]] == [0, 1]


def test_reset_count_is_refused_by_the_pass() -> None:
    text = """protocol p():
    team lsa(2)
    window buf: 64 B
    counter c

    kernel k(threads=64):
        reset_count(c)
"""
    with pytest.raises(Unsupported, match="`reset_count` has no lowering"):
        _lowered(text, 0)
