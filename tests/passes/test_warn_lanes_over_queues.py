"""W103: lanes of one warp spread over several queues."""

from __future__ import annotations

from ccogen.passes.warn_lanes_over_queues import WarnLanesOverQueues
from tests.passes.run_pass import codes, kernel, run_pass

SPREAD = """
if me == 0:
    lanes i in range(8):
        put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], queue=i)
"""


def test_lanes_over_eight_queues() -> None:
    [d] = run_pass(WarnLanesOverQueues, kernel(SPREAD, head="queues 8"))
    assert d.message == "lanes of one warp post to one peer over several queues"
    assert d.span is not None and d.span.file.text[d.span.start:d.span.end] == "i"
    assert d.labels[0].message == "8 lanes of one warp use queues 0 to 7 for rank 1"
    assert "8 lanes cost 3377 trigger cycles spread over 8 queues, 2652 on one queue" in d.notes[0]


def test_one_queue_is_fine() -> None:
    body = SPREAD.replace("queue=i", "queue=0")
    assert run_pass(WarnLanesOverQueues, kernel(body, head="queues 8")) == []


def test_lanes_to_different_peers_are_fine() -> None:
    body = """
    lanes p in peers():
        put(p, dst=recv[0:64], src=send[0:64], queue=p % 2)
    """
    assert run_pass(WarnLanesOverQueues, kernel(body, head="queues 2", team="lsa"),
                    nranks=4) == []


def test_same_queue_promise_is_e013s() -> None:
    body = SPREAD.replace("queue=i)", 'queue=i, mode="same_queue")')
    assert run_pass(WarnLanesOverQueues, kernel(body, head="queues 8")) == []


def test_targets() -> None:
    text = kernel(SPREAD, head="queues 8")
    assert codes(run_pass(WarnLanesOverQueues, text, target="mori-sdma")) == ["W103"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnLanesOverQueues, text, target=target) == [], target
