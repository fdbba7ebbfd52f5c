"""E030: cycles of waits and unequal barriers (`check_deadlock`)."""

from __future__ import annotations

from ccogen.passes.check_deadlock import CheckDeadlock
from tests.passes.run_pass import codes, kernel, run_pass

RING = """
{first}
{second}
"""
WAIT = "wait_signal((me - 1) % nranks, queue=0)"
PUT = 'put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")'


def test_wait_first_ring_deadlocks_with_one_note_per_hop() -> None:
    [d] = run_pass(CheckDeadlock, kernel(RING.format(first=WAIT, second=PUT), team="lsa(3)"),
                   nranks=3)
    assert (d.code, d.message) == ("E030", "deadlock: these waits wait for each other")
    hops = [n for n in d.notes if "waits for" in n]
    assert len(hops) == 3
    assert hops[0] == ("rank 0's `wait_signal` (line 8) waits for rank 2's `put` (line 9), "
                       "which rank 2 issues only after its `wait_signal` (line 8) returns")


def test_send_first_ring_is_fine() -> None:
    assert codes(run_pass(CheckDeadlock, kernel(RING.format(first=PUT, second=WAIT),
                                                team="lsa(3)"), nranks=3)) == []


def test_a_wait_on_ones_own_later_local_signal() -> None:
    body = """
    wait_signal(me, queue=0)
    put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="local")
    """
    [d] = run_pass(CheckDeadlock, kernel(body))
    assert d.notes[0].endswith("which comes only after that wait")


def test_a_wait_nobody_signals_is_not_a_deadlock() -> None:
    assert codes(run_pass(CheckDeadlock, kernel("wait_signal((me - 1) % nranks, queue=0)"))) == []


def test_barrier_reached_by_one_rank_only() -> None:
    [d] = run_pass(CheckDeadlock, kernel("if me == 0:\n    barrier()"))
    assert d.message == ("`barrier()` is reached a different number of times on different "
                         "ranks or blocks")
    assert d.notes[0] == ("in kernel `k`: rank 0 block 0 reaches it 1 time; rank 1 block 0 "
                          "reaches it 0 times")


def test_barrier_in_one_block_of_several() -> None:
    body = "blocks b in range(2):\n    if b == 0:\n        barrier()"
    assert codes(run_pass(CheckDeadlock, kernel(body))) == ["E030"]
    assert codes(run_pass(CheckDeadlock, kernel("blocks b in range(2):\n    barrier()"))) == []
