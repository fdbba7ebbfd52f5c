"""W107: more queues declared than the protocol uses."""

from __future__ import annotations

from ccogen.passes.warn_unused_queues import WarnUnusedQueues
from tests.passes.run_pass import codes, kernel, run_pass

ONE_ISSUER = """
if me == 0:
    put(1, dst=recv, src=send, queue=0)
    quiet(1)
"""


def test_eight_queues_for_one_issuer() -> None:
    [d] = run_pass(WarnUnusedQueues, kernel(ONE_ISSUER, head="queues 8"))
    assert d.message == "`queues 8` declares more queues than the protocol uses"
    assert d.labels[0].message == ("8 queues per peer, but only 1 issuer posts to a peer at a "
                                   "time, on 1 queue")
    assert d.help == "declare `queues 1`, or `queues auto`"


def test_queues_used_by_issuers_or_by_id_are_needed() -> None:
    warps = """
    if me == 0:
        warps w in range(2):
            put(1, dst=recv[w*64 : (w+1)*64], src=send[0:64])
    """
    assert run_pass(WarnUnusedQueues, kernel(warps, head="queues 2", threads=64)) == []
    ids = """
    if me == 0:
        put(1, dst=recv[0:64], src=send[0:64], queue=0, signal="remote")
        put(1, dst=recv[64:128], src=send[0:64], queue=1, signal="remote")
    else:
        wait_signal(0, queue=0)
        wait_signal(0, queue=1)
    """
    assert run_pass(WarnUnusedQueues, kernel(ids, head="queues 2")) == []
    [d] = run_pass(WarnUnusedQueues, kernel(ids, head="queues 4"))
    assert d.help == "declare `queues 2`, or `queues auto`"


def test_queues_auto_never_warns() -> None:
    assert run_pass(WarnUnusedQueues, kernel(ONE_ISSUER.replace(", queue=0", ""),
                                             head="queues auto")) == []


def test_targets() -> None:
    text = kernel(ONE_ISSUER, head="queues 8")
    assert codes(run_pass(WarnUnusedQueues, text, target="mori-sdma")) == ["W107"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnUnusedQueues, text, target=target) == [], target
