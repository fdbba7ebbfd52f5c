"""W101: one contiguous transfer split into several ops."""

from __future__ import annotations

from ccogen.passes.warn_split_transfer import WarnSplitTransfer
from tests.helpers import REPO_ROOT
from tests.passes.run_pass import codes, instance_of, kernel, run_pass

WINDOWS = "window send: 8 MiB\nwindow recv: 8 MiB"
HALVES = """
if me == 0:
    put(1, dst=recv[0 : 4 MiB], src=send[0 : 4 MiB], queue=0)
    put(1, dst=recv[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB], queue=1)
"""


def test_two_halves_on_two_queues() -> None:
    [d] = run_pass(WarnSplitTransfer, kernel(HALVES, head="queues 2", windows=WINDOWS))
    assert d.message == "one contiguous transfer is split into several `put`s"
    assert d.labels[0].message == "2 `put`s of 4 MiB to rank 1 together move 8 MiB contiguously"
    assert d.labels[1].message == "continues the same transfer"
    assert "pieces of this size reach ~59 GB/s, one op of 8 MiB ~60 GB/s" in d.notes[0]
    assert d.help == "issue one `put(1, dst=recv[0 : 8 MiB], src=send[0 : 8 MiB])`"


def test_pieces_in_descending_order_and_gets() -> None:
    body = """
    if me == 0:
        get(1, dst=recv[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB])
        get(1, dst=recv[0 : 4 MiB], src=send[0 : 4 MiB])
    """
    [d] = run_pass(WarnSplitTransfer, kernel(body, windows=WINDOWS))
    assert d.message == "one contiguous transfer is split into several `get`s"


def test_permuted_layout_is_not_one_transfer() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[4 MiB : 8 MiB], src=send[0 : 4 MiB])
        put(1, dst=recv[0 : 4 MiB], src=send[4 MiB : 8 MiB])
    """
    assert run_pass(WarnSplitTransfer, kernel(body, windows=WINDOWS)) == []


def test_different_warps_are_different_issuers() -> None:
    body = """
    if me == 0:
        warps w in range(2):
            put(1, dst=recv[w*4 MiB : (w+1)*4 MiB], src=send[w*4 MiB : (w+1)*4 MiB])
    """
    assert run_pass(WarnSplitTransfer, kernel(body, head="queues auto", windows=WINDOWS,
                                              threads=64)) == []


def test_a_wait_between_the_pieces_splits_the_batch() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[0 : 4 MiB], src=send[0 : 4 MiB], signal="remote")
        wait_signal(1)
        put(1, dst=recv[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB])
    else:
        wait_signal(0)
        put(0, dst=recv[0:16], src=send[0:16], signal="remote")
    """
    assert run_pass(WarnSplitTransfer, kernel(body, windows=WINDOWS)) == []


def test_pipeline_consumed_piece_by_piece_is_legitimate() -> None:
    body = """
    if me == 0:
        put(1, dst=stage[0 : 4 MiB], src=send[0 : 4 MiB], signal="remote")
        put(1, dst=stage[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB], signal="remote")
    else:
        wait_signal(0)
        copy(dst=recv[0 : 4 MiB], src=stage[0 : 4 MiB])
        wait_signal(0)
        copy(dst=recv[4 MiB : 8 MiB], src=stage[4 MiB : 8 MiB])
    """
    windows = WINDOWS + "\nwindow stage: 8 MiB"
    assert run_pass(WarnSplitTransfer, kernel(body, windows=windows)) == []


def test_pieces_waited_together_are_not_a_pipeline() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[0 : 4 MiB], src=send[0 : 4 MiB], signal="remote")
        put(1, dst=recv[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB], signal="remote")
    else:
        wait_signal(0)
        wait_signal(0)
        copy(dst=send, src=recv)
    """
    assert codes(run_pass(WarnSplitTransfer, kernel(body, windows=WINDOWS))) == ["W101"]


def test_two_queue_pipeline_protocol_does_not_warn() -> None:
    from ccogen.passes.base import PassContext

    text = (REPO_ROOT / "protocols/two_queue_pipeline.cco").read_text(encoding="utf-8")
    for params in ({}, {"chunks": 2}, {"chunk": 4096}):
        ctx = PassContext(instance=instance_of(text, 2, params))
        WarnSplitTransfer().run(ctx)
        assert list(ctx.sink) == [], params


def test_targets_without_a_bandwidth_table_stay_silent() -> None:
    text = kernel(HALVES, head="queues 2", windows=WINDOWS)
    assert codes(run_pass(WarnSplitTransfer, text, target="mori-sdma")) == ["W101"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnSplitTransfer, text, target=target) == [], target
