"""E021-E024, E026, E027: waits match what is sent (`check_signals`)."""

from __future__ import annotations

from ccogen.passes.check_signals import CheckSignals
from tests.passes.run_pass import codes, kernel, run_pass

W = "window send: 1 MiB\nwindow recv: 1 MiB\nwindow out: 1 MiB\nwindow flag: 64 B"


def check(body: str, **kw: object) -> list[str]:
    return codes(run_pass(CheckSignals, kernel(body, windows=W, **kw)))  # type: ignore[arg-type]


def one(body: str, **kw: object):  # type: ignore[no-untyped-def]
    [d] = run_pass(CheckSignals, kernel(body, windows=W, **kw))  # type: ignore[arg-type]
    return d


PUT = 'if me == 0:\n    put(1, dst=recv, src=send, queue=0, signal="remote")\nelse:\n'


def test_auto_expected_pairs_each_wait_with_a_signal() -> None:
    assert check(PUT + "    wait_signal(0, queue=0)") == []


def test_handwritten_wait_for_more_than_is_sent() -> None:
    d = one(PUT + "    wait_signal(0, queue=0, expected=2)")
    assert (d.code, d.message) == ("E021", "`wait_signal` can never be satisfied")
    assert d.labels[0].message == "waits for 2 signals, but rank 0 sends 1 signal on queue 0"
    assert d.labels[1].message == "signals rank 1 on queue 0"
    assert d.help == "wait for `expected=1`, or send more signalled puts"


def test_auto_wait_with_nothing_left_to_pair() -> None:
    d = one(PUT + "    wait_signal(0, queue=0)\n    wait_signal(0, queue=0)")
    assert d.code == "E021"
    assert d.labels[0].message == "waits for signal #2 from rank 0, but rank 0 sends 1 signal " \
                                  "on queue 0"


def test_wait_on_a_queue_nobody_signals_names_the_other_queue() -> None:
    body = ('if me == 0:\n    put(1, dst=recv, src=send, queue=1, signal="remote")\nelse:\n'
            "    wait_signal(0, queue=0)")
    d = one(body, head="queues 2")
    assert d.code == "E021"
    assert "rank 0 signals rank 1 on queue 1 (1 time per epoch)" in d.notes


def test_expected_shared_across_queues() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0, signal="remote")
        put(1, dst=flag, src=flag, queue=1, signal="remote")
    else:
        wait_signal(0, queue=0, expected=1)
        wait_signal(0, queue=1, expected=2)
    """
    d = one(body, head="queues 2")
    assert (d.code, d.message) == ("E022", "`expected` continues the count of another queue")
    assert d.help == "count queue 1 on its own: `expected=1`"


def test_expected_going_down() -> None:
    body = """
    if me == 0:
        for i in range(2):
            put(1, dst=recv, src=send, queue=0, signal="remote")
            quiet(1)
    else:
        wait_signal(0, queue=0, expected=2)
        wait_signal(0, queue=0, expected=1)
    """
    d = one(body)
    assert d.code == "E022"
    assert d.message == "`expected` decreases over successive waits on one `(src, queue)`"


def test_expected_counted_per_lane() -> None:
    body = """
    if me == 0:
        lanes l in range(4):
            put(1, dst=recv[l*64 : (l+1)*64], src=send[0 : 64], queue=0, signal="remote")
    else:
        wait_signal(0, queue=0, expected={e})
    """
    d = one(body.replace("{e}", "4"))
    assert d.code == "E023"
    assert d.message == "`expected` counts lanes, but a group of lanes signals once per `put`"
    assert check(body.replace("{e}", "1")) == []
    assert check(body.replace("{e}", "1").replace('"remote")', '"remote", signal_per_copy=True)')) \
        == ["E023"]
    assert check(body.replace("{e}", "4").replace('"remote")', '"remote", signal_per_copy=True)')) \
        == []


def test_signal_on_another_queue_than_the_data() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0)
        put(1, dst=flag, src=flag, queue={q}, signal="remote")
    else:
        wait_signal(0, queue={q})
        copy(dst=out, src=recv)
    """
    d = one(body.replace("{q}", "1"), head="queues 2")
    assert (d.code, d.message) == ("E024", "data and the signal that announces it travel on "
                                           "different queues")
    assert d.help == "send the data on the signal's queue (`queue=1`), or also wait on queue 0"
    assert check(body.replace("{q}", "0"), head="queues 2") == []


COUNTED = """
if me == 0:
    put(1, dst=recv[0 : 4096], src=send[0 : 4096], queue=0{count})
else:
    wait_count(landed{expected})
"""


def counted(count: str = ", count=landed", expected: str = "") -> list[str]:
    body = COUNTED.replace("{count}", count).replace("{expected}", expected)
    return check(body, head="counter landed")


def test_counted_waits() -> None:
    assert counted() == []
    assert counted(expected=", expected=4096") == []
    assert counted(expected=", expected=8192") == ["E026"]
    assert counted(count="") == ["E026"]


def test_counter_reset_while_writes_are_in_flight() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0, count=landed)
    else:
        reset_count(landed)
        wait_count(landed)
    """
    d = one(body, head="counter landed")
    assert (d.code, d.message) == ("E027", "counter reset while counted writes may be in flight")
    after = body.replace("        reset_count(landed)\n        wait_count(landed)\n",
                         "        wait_count(landed)\n        reset_count(landed)\n")
    # back to back, the next launch's write may land before this launch's reset
    assert check(after, head="counter landed") == ["E027"]
    one_launch = "counter landed\nbetween_launches: host_sync"
    assert check(after, head=one_launch) == []
    again = after.rstrip() + "\n        wait_count(landed)\n"
    assert check(again, head=one_launch) == ["E026"]
