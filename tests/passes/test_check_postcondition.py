"""E033: the symbolic result satisfies `ensure` (`check_postcondition`)."""

from __future__ import annotations

from ccogen.analysis import analyse
from ccogen.analysis.symbolic import Piece, execute, first_difference
from ccogen.ir.instance import RegionInst
from ccogen.passes.base import PassContext
from ccogen.passes.check_postcondition import CheckPostcondition
from tests.passes.run_pass import codes, instance_of, kernel

SHIFT = """
put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
wait_signal((me - 1) % nranks, queue=0)
"""


def run(text: str, nranks: int = 3) -> tuple[list[str], PassContext]:
    ctx = PassContext(instance=instance_of(text, nranks))
    CheckPostcondition().run(ctx)
    return codes(list(ctx.sink)), ctx


def shift(ensure: str) -> str:
    return kernel(SHIFT, team="lsa(3)", head="between_launches: host_sync") + \
        f"\n    ensure:\n        {ensure}\n"


def test_a_true_postcondition_is_really_checked() -> None:
    found, ctx = run(shift("recv == init(send@((me - 1) % nranks))"))
    assert found == []
    assert ctx.cache["postconditions-checked"] == 3


def test_a_false_postcondition_names_the_bytes_and_their_origin() -> None:
    ctx = PassContext(instance=instance_of(shift("recv == init(send@((me + 1) % nranks))"), 3))
    CheckPostcondition().run(ctx)
    [d] = list(ctx.sink)
    assert (d.code, d.message) == ("E033", "postcondition does not hold")
    assert d.labels[0].message == ("bytes 0..1048576 of `recv` on rank 0 hold "
                                   "`init(send@2)[0:1048576]`, expected `init(send@1)[0:1048576]`")
    assert d.labels[1].message == "this `put` of rank 2 put them there"
    assert d.notes[-1] == "fails on every rank"


def test_untouched_bytes_still_hold_their_initial_value() -> None:
    found, _ = run(shift("send == init(send)"))
    assert found == []
    found, _ = run(shift("recv[0 : 64] == init(recv)[0 : 64]"))
    assert found == ["E033"]


def test_not_equal() -> None:
    assert run(shift("recv != init(recv)"))[0] == []
    assert run(shift("send != init(send)"))[0] == ["E033"]


def test_skipped_when_the_order_is_not_fixed() -> None:
    racy = kernel('if me != 0:\n    put(0, dst=recv, src=send, queue=0, signal="remote")\n'
                  "else:\n    for r in peers():\n        wait_signal(r, queue=0)", team="lsa(3)")
    found, ctx = run(racy + "\n    ensure:\n        if me == 0:\n"
                            "            recv == init(send@1)\n")
    assert found == [] and "postconditions-checked" not in ctx.cache
    deadlock = kernel("wait_signal((me - 1) % nranks, queue=0)\n" + SHIFT.split("\n")[1],
                      team="lsa(3)")
    found, ctx = run(deadlock + "\n    ensure:\n        recv == init(recv)\n")
    assert found == [] and "postconditions-checked" not in ctx.cache


def test_symbolic_state_follows_copies_then_transfers() -> None:
    text = kernel("""
    if me == 0:
        copy(dst=out[0 : 512], src=send[512 : 1024])
        put(1, dst=recv[256 : 768], src=out[0 : 512], queue=0, signal="remote")
    else:
        wait_signal(0, queue=0)
    """, windows="window send: 1 KiB\nwindow recv: 1 KiB\nwindow out: 1 KiB")
    mem = execute(analyse(instance_of(text)).graph)
    got = mem.read(RegionInst("recv", 0, 1024, 1))
    assert [(p.length, p.rank, p.window, p.offset) for p in got] == [
        (256, 1, "recv", 0), (512, 0, "send", 512), (256, 1, "recv", 768)]
    assert got[1].writer is not None and got[1].writer.kind == "put"


def test_first_difference_cuts_to_the_differing_piece() -> None:
    left = [Piece(64, 0, "a", 0), Piece(64, 2, "b", 0)]
    right = [Piece(128, 0, "a", 0)]
    pos, got, want = first_difference(left, right)  # type: ignore[misc]
    assert pos == 64 and (got.rank, got.offset, want.offset, want.length) == (2, 0, 64, 64)
