"""W102: several warps or blocks issuing concurrently on one queue."""

from __future__ import annotations

from ccogen.passes.warn_shared_queue import WarnSharedQueue
from tests.passes.run_pass import codes, kernel, run_pass

WARPS_ON_QUEUE_0 = """
if me == 0:
    warps w in range(8):
        put(1, dst=recv[w*1024 : (w+1)*1024], src=send[w*1024 : (w+1)*1024], queue=0)
"""


def test_eight_warps_on_one_queue() -> None:
    [d] = run_pass(WarnSharedQueue, kernel(WARPS_ON_QUEUE_0, threads=256))
    assert d.message == "several warps or blocks post to one peer on the same queue at once"
    assert d.labels[0].message == "warps 0 to 7 of block 0 all post to rank 1 on queue 0"
    assert "8 warps on one queue take ~3.2x as long as 8 warps on 8 queues" in d.notes[0]
    assert d.help is not None and d.help.startswith("declare `queues auto` and drop `queue=`")


def test_auto_queues_give_each_warp_its_own() -> None:
    body = WARPS_ON_QUEUE_0.replace(", queue=0", "")
    assert run_pass(WarnSharedQueue, kernel(body, head="queues auto", threads=256)) == []
    [d] = run_pass(WarnSharedQueue, kernel(body, head="queues 4", threads=256))
    assert d.labels[0].message == "warps 0 and 4 of block 0 all post to rank 1 on queue 0"


def test_blocks_on_one_queue() -> None:
    text = ("protocol p():\n    team lsa(2)\n    window send: 1 MiB\n    window recv: 1 MiB\n\n"
            "    kernel k(threads=32):\n        blocks b in range(2):\n"
            "            put(1 - me, dst=recv[b*64 : (b+1)*64], src=send[0:64], queue=0)\n")
    [d] = run_pass(WarnSharedQueue, text)
    assert d.labels[0].message == "blocks 0 and 1 all post to rank 1 on queue 0"


def test_warps_in_turn_do_not_share_at_once() -> None:
    body = """
    if me == 0:
        warps w in range(2):
            if w == 0:
                put(1, dst=recv[0:64], src=send[0:64], queue=0)
        warps w in range(2):
            if w == 1:
                put(1, dst=recv[64:128], src=send[0:64], queue=0)
    """
    assert run_pass(WarnSharedQueue, kernel(body, threads=64)) == []


def test_different_peers_are_different_queues() -> None:
    body = """
    warps w in range(2):
        put((me + 1 + w) % nranks, dst=recv[0:64], src=send[0:64], queue=0)
    """
    assert run_pass(WarnSharedQueue, kernel(body, team="lsa(3)", threads=64), nranks=3) == []


def test_only_hardware_queues_warn() -> None:
    text = kernel(WARPS_ON_QUEUE_0, threads=256)
    assert codes(run_pass(WarnSharedQueue, text, target="mori-sdma")) == ["W102"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnSharedQueue, text, target=target) == [], target
