"""E012 queue ids and counts, E013 same-queue promises, E014 modes on group issuers."""

from __future__ import annotations

from ccogen.passes.check_queues import CheckQueues
from tests.passes.run_pass import codes, kernel, run_pass


def text(span: object) -> str:
    return span.file.text[span.start:span.end]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- E012


def test_queue_id_at_the_count() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=2)
    """
    [d] = run_pass(CheckQueues, kernel(body, head="queues 2"))
    assert (d.code, d.message) == ("E012", "queue id 2 out of range: the protocol has 2 queues")
    assert text(d.span) == "2"
    assert [text(label.span) for label in d.labels[1:]] == ["2"]  # the `queues 2` declaration
    assert d.help == "use a queue id from 0 to 1, or declare `queues 3`"


def test_every_bad_value_of_one_queue_expression_in_one_finding() -> None:
    body = """
    if me == 0:
        warps w in range(4):
            put(1, dst=recv[w*1024 : (w+1)*1024], src=send[w*1024 : (w+1)*1024], queue=w)
    """
    [d] = run_pass(CheckQueues, kernel(body, head="queues 2", threads=128))
    assert d.message == "queue ids 2 and 3 out of range: the protocol has 2 queues"
    assert text(d.span) == "w"


def test_negative_queue_and_waits_and_quiet() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=-1, signal="remote")
        quiet(1, queue=5)
    else:
        wait_signal(0, queue=3)
    """
    diags = run_pass(CheckQueues, kernel(body))
    assert sorted(d.message for d in diags) == [
        "queue id -1 out of range: the protocol has 1 queue",
        "queue id 3 out of range: the protocol has 1 queue",
        "queue id 5 out of range: the protocol has 1 queue"]


def test_auto_queues_are_always_in_range() -> None:
    body = """
    if me == 0:
        warps w in range(8):
            put(1, dst=recv[w*1024 : (w+1)*1024], src=send[w*1024 : (w+1)*1024])
    """
    assert run_pass(CheckQueues, kernel(body, head="queues 3", threads=256)) == []


def test_queue_count_over_the_target_cap() -> None:
    body = "pass"
    assert run_pass(CheckQueues, kernel(body, head="queues 9")) == []
    [d] = run_pass(CheckQueues, kernel(body, head="queues 9"), target="mori-sdma")
    assert d.message == "9 queues per peer is over the cap of 8 on `mori-sdma`"
    assert text(d.span) == "9"
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(CheckQueues, kernel(body, head="queues 64"), target=target) == []


# ----------------------------------------------------------------------------- E013


LANES_TO_PEERS = """
lanes p in peers():
    put(p, dst=recv[0:64], src=send[p*64 : (p+1)*64], queue=0, mode="same_queue")
"""


def test_same_queue_promise_broken_by_peers() -> None:
    [d] = run_pass(CheckQueues, kernel(LANES_TO_PEERS, team="lsa"), nranks=3)
    assert d.code == "E013"
    assert d.message == ('`mode="same_queue"` is promised, but lanes of one warp post to '
                         "different peers")
    assert text(d.span) == 'mode="same_queue"'
    assert text(d.labels[1].span) == "p"
    assert d.notes[0] == ("on rank 0, lane 0 posts to peer 1 on queue 0 but lane 1 to peer 2 "
                          "on queue 0")


def test_same_queue_promise_with_one_peer_holds() -> None:
    assert run_pass(CheckQueues, kernel(LANES_TO_PEERS, team="lsa"), nranks=2) == []


def test_same_queue_promise_broken_by_queues() -> None:
    body = """
    if me == 0:
        lanes i in range(4):
            put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], queue=i % 2, mode="same_queue")
    """
    [d] = run_pass(CheckQueues, kernel(body, head="queues 2"))
    assert d.message.endswith("post to different queues")
    assert text(d.labels[1].span) == "i % 2"


def test_same_queue_lanes_of_different_warps_are_different_groups() -> None:
    body = """
    if me == 0:
        lanes i in range(64):
            put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], queue=i // 32, mode="same_queue")
    """
    assert run_pass(CheckQueues, kernel(body, head="queues 2", threads=64)) == []


# ----------------------------------------------------------------------------- E014


def test_mode_on_a_warp() -> None:
    body = """
    if me == 0:
        warps w in range(2):
            put(1, dst=recv[w*64 : (w+1)*64], src=send[0:64], mode="independent")
    """
    [d] = run_pass(CheckQueues, kernel(body, threads=64))
    assert (d.code, d.message) == ("E014", "`mode=` only applies to lanes, but this `put` is "
                                           "issued by a warp")
    assert text(d.span) == 'mode="independent"'
    assert d.help == 'remove `mode="independent"`, or issue the op from `lanes`'


def test_mode_on_the_block() -> None:
    body = """
    if me == 0:
        get(1, dst=recv, src=send, mode="same_queue")
    """
    [d] = run_pass(CheckQueues, kernel(body))
    assert d.message == "`mode=` only applies to lanes, but this `get` is issued by a block"


def test_mode_on_lanes_and_auto_on_warps_are_fine() -> None:
    body = """
    if me == 0:
        lanes i in range(2):
            put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], mode="independent")
        warps w in range(2):
            put(1, dst=recv[w*64 : (w+1)*64], src=send[0:64], mode="auto")
    """
    assert codes(run_pass(CheckQueues, kernel(body, threads=64))) == []
