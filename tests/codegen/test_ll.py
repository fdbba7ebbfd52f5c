"""Which signal streams take the LL path (codegen.ll), and what their steps do."""

from __future__ import annotations

import re

from ccogen.codegen import generate
from ccogen.instantiate import instantiate
from ccogen.syntax import parse_ir

HEAD = """protocol p(size: bytes = 8 B):
    team lsa(2)
    window a: 64
    window b: 64
"""


def text(body: str, target: str = "nccl-lsa", params: dict[str, object] | None = None) -> str:
    instance, diags = instantiate(parse_ir(HEAD + body), 2, params or {})
    assert instance is not None, diags
    return generate(instance, target, source="p.cco").files["kernels.cu"]


TWO_PUTS = """
    kernel k(threads=32):
        if me == 0:
            put(1, dst=b[0:size], src=a[0:size], queue=0, signal="remote")
            put(1, dst=b[16:16+size], src=a[16:16+size], queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)
            wait_signal(0, queue=0)
"""


def test_small_puts_fold_their_signal_and_each_wait_writes_its_payloads() -> None:
    out = text(TWO_PUTS)
    puts = re.findall(r"ccogen_llput_group\(c, 1, (\d+)ULL, (\d+)ULL, 8ULL, (\d)ULL, 2ULL\)", out)
    waits = re.findall(r"ccogen_llwait_group\(c, (\d+)ULL, (\d)ULL, 2ULL, (\d+)ULL, 8ULL,", out)
    assert [k for *_, k in puts] == ["1", "2"] and [k for _, k, _ in waits] == ["1", "2"]
    # the entries are 16 bytes apart, the same on both sides; each wait writes its put's dst
    assert [int(e) for e, *_ in puts] == [int(e) for e, *_ in waits]
    assert int(puts[1][0]) - int(puts[0][0]) == 16
    assert int(waits[1][2]) - int(waits[0][2]) == 16  # b[16:] after b[0:]
    assert "ccogen_signal_group" not in out.split("// ---- end of the nccl-lsa primitives")[1]


def test_one_wait_for_both_puts_consumes_both_entries() -> None:
    two_waits = "            wait_signal(0, queue=0)\n" * 2
    out = text(TWO_PUTS.replace(two_waits, "            wait_signal(0, queue=0, expected=2)\n"))
    assert len(re.findall(r"ccogen_llwait_group\(", out.split("r1_b0")[1])) == 2


def test_the_nvshmem_target_folds_too() -> None:
    assert "ccogen_llput_group(c, 1," in text(TWO_PUTS, "nvshmem")


def test_larger_puts_keep_the_counter() -> None:
    out = text(TWO_PUTS, params={"size": 16})
    assert "ccogen_llput" not in out.split("primitives ----")[-1]
    assert re.search(r"ccogen_signal_group\(c, 1, \d+ULL, 1ULL\)", out)


def test_an_unsignalled_put_on_the_stream_keeps_the_counter() -> None:
    second = 'put(1, dst=b[16:16+size], src=a[16:16+size], queue=0'
    body = TWO_PUTS.replace(second + ', signal="remote")', second + ")")
    wait = "            wait_signal(0, queue=0)\n"
    body = body.replace(wait * 2, wait)
    out = text(body)
    assert "ccogen_llput_group(c, " not in out


def test_a_barrier_keeps_the_counter() -> None:
    out = text(TWO_PUTS + "        barrier()\n")
    assert "ccogen_llput_group(c, " not in out
