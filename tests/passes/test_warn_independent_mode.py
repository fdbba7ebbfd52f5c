"""W106: mode="independent" where same-queue is provable."""

from __future__ import annotations

from ccogen.passes.warn_independent_mode import WarnIndependentMode
from tests.passes.run_pass import codes, kernel, run_pass

ONE_QUEUE = """
if me == 0:
    lanes i in range(32):
        put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], queue=0, mode="independent")
"""


def test_independent_lanes_on_one_queue() -> None:
    [d] = run_pass(WarnIndependentMode, kernel(ONE_QUEUE))
    assert d.message == '`mode="independent"` where every lane targets the same queue'
    assert d.span is not None and d.span.file.text[d.span.start:d.span.end] == \
        'mode="independent"'
    assert d.labels[0].message == "all 32 lanes post to rank 1 on queue 0"
    assert "+14 SGPR against +5" in d.notes[0]


def test_lanes_to_different_peers_need_independent() -> None:
    body = """
    lanes p in peers():
        put(p, dst=recv[0:64], src=send[0:64], queue=0, mode="independent")
    """
    assert run_pass(WarnIndependentMode, kernel(body, team="lsa"), nranks=4) == []


def test_one_lane_and_auto_mode_are_fine() -> None:
    body = """
    if me == 0:
        lanes i in range(1):
            put(1, dst=recv[0:64], src=send[0:64], queue=0, mode="independent")
    """
    assert run_pass(WarnIndependentMode, kernel(body)) == []
    auto = ONE_QUEUE.replace(', mode="independent"', "")
    assert run_pass(WarnIndependentMode, kernel(auto)) == []


def test_targets() -> None:
    assert codes(run_pass(WarnIndependentMode, kernel(ONE_QUEUE), target="mori-sdma")) == [
        "W106"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnIndependentMode, kernel(ONE_QUEUE), target=target) == [], target
