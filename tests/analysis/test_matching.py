"""Signal/counter matching, expected values and thread modes (`ccogen.analysis.matching`)."""

from __future__ import annotations

from ccogen.analysis import analyse
from ccogen.analysis.matching import Matching, match
from ccogen.ir.nodes import Mode
from tests.analysis.test_hb_graph import instance


def matching(body: str, **kw: object) -> Matching:
    return match(instance(body, **kw))  # type: ignore[arg-type]


PINGS = """
    if me == 0:
        for i in range(3):
            put(1, dst=recv[64*i : 64*(i+1)], src=send[0 : 64], queue=0, signal="remote")
    else:
        wait_signal(0, queue=0)
        wait_signal(0, queue=0)
"""


def test_kth_wait_expects_k_and_the_last_one_the_epoch_total() -> None:
    m = matching(PINGS)
    assert m.expected.waits == {(1, 0): 1, (1, 1): 3}
    assert m.expected.slot_totals == {(1, 0, 0): 3}
    first = m.waits[(1, 0)]
    assert (first.ordinal, first.last, first.handwritten, first.total) == (1, False, False, 3)


def test_a_wait_with_nothing_left_to_pair_has_no_expected_value() -> None:
    m = matching("""
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="remote")
        else:
            wait_signal(0, queue=0)
            wait_signal(0, queue=0)
    """)
    assert m.waits[(1, 1)].expected is None
    assert (1, 1) not in m.expected.waits


def test_handwritten_values_are_kept_and_checked_elsewhere() -> None:
    m = matching(PINGS.replace("wait_signal(0, queue=0)\n",
                               "wait_signal(0, queue=0, expected=7)\n", 1))
    assert m.waits[(1, 0)].expected == 7 and m.waits[(1, 0)].handwritten


def test_expected_values_advance_by_the_epoch_total() -> None:
    m = matching(PINGS)
    assert m.expected.at_epoch(1, 0, (1, 0, 0), 0) == 1
    assert m.expected.at_epoch(1, 0, (1, 0, 0), 2) == 1 + 2 * 3


def test_a_group_of_lanes_signals_once_per_peer_and_queue() -> None:
    m = matching("""
        if me == 0:
            lanes l in range(4):
                put(1, dst=recv[64*l : 64*(l+1)], src=send[0 : 64], queue=l % 2,
                    signal="remote")
    """, head="queues 2")
    assert [len(i.ops) for i in m.increments[(1, 0, 0)]] == [2]
    assert [i.ops for i in m.increments[(1, 0, 1)]] == [(1, 3)]
    assert m.modes == {(0, 0): Mode.INDEPENDENT}


def test_signal_per_copy_signals_once_per_lane() -> None:
    m = matching("""
        if me == 0:
            lanes l in range(4):
                put(1, dst=recv[64*l : 64*(l+1)], src=send[0 : 64], queue=0,
                    signal="remote", signal_per_copy=True)
    """)
    incs = m.increments[(1, 0, 0)]
    assert len(incs) == 4 and all(i.per_copy for i in incs)
    assert m.modes == {(0, 0): Mode.SAME_QUEUE}


def test_local_signals_count_on_the_issuers_own_slot() -> None:
    m = matching("""
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="both")
            wait_signal(0, queue=0)
    """)
    assert set(m.increments) == {(1, 0, 0), (0, 0, 0)}
    assert m.increments[(0, 0, 0)][0].local
    assert m.expected.waits == {(0, 1): 1}


def test_counted_bytes_per_counter_and_rank() -> None:
    m = matching("""
        if me != 0:
            put(0, dst=recv[64*me : 64*(me+1)], src=send[0 : 64], queue=0, count=landed)
        else:
            wait_count(landed)
    """, nranks=3, head="counter landed")
    assert m.expected.counter_totals == {(0, "landed"): 128}
    assert m.expected.waits == {(0, 0): 128}
    assert m.expected.at_epoch(0, 0, (0, "landed"), 1) == 256


def test_a_reset_counter_gets_no_epoch_offset() -> None:
    m = matching("""
        if me == 0:
            reset_count(landed)
        barrier()
        if me == 1:
            put(0, dst=recv, src=send, queue=0, count=landed)
        else:
            wait_count(landed)
    """, head="counter landed")
    assert m.expected.reset_counters == frozenset({(0, "landed")})
    assert m.expected.at_epoch(0, 2, (0, "landed"), 5) == 4096


def test_analysis_exposes_expected_values_and_modes() -> None:
    a = analyse(instance(PINGS))
    assert a.expected.waits[(1, 1)] == 3
    assert a.modes == {}
    assert analyse(a.instance) is a
