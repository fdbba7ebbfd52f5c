"""W100: many small copies to one peer."""

from __future__ import annotations

from ccogen.passes.warn_small_copies import WarnSmallCopies
from tests.passes.run_pass import codes, kernel, run_pass

WINDOWS = "window table: 1 MiB\nwindow inbox: 1 MiB"


def scatter(n: int, piece: str = "4 KiB", between: str = "") -> str:
    body = f"""
    if me == 0:
        for i in range({n}):
            put(1, dst=inbox[i*{piece} : (i+1)*{piece}], src=table[2*i*{piece} : (2*i+1)*{piece}])
            {between or 'pass'}
        quiet(1)
    """
    return kernel(body, windows=WINDOWS)


def test_many_scattered_small_puts() -> None:
    [d] = run_pass(WarnSmallCopies, scatter(64))
    assert d.message == "many small puts to one peer: pack them locally and send once"
    assert d.labels[0].message == "64 puts of 4 KiB each to rank 1 (256 KiB in all)"
    assert "these 64 puts take ~128 µs of engine time" in d.notes[0]
    assert d.help is not None and "pack_then_send" in d.help


def test_few_or_large_pieces_are_fine() -> None:
    assert run_pass(WarnSmallCopies, scatter(7)) == []
    assert run_pass(WarnSmallCopies, scatter(2, piece="256 KiB")) == []


def test_adjacent_pieces_are_w101s() -> None:
    body = """
    if me == 0:
        for i in range(64):
            put(1, dst=inbox[i*4096 : (i+1)*4096], src=table[i*4096 : (i+1)*4096])
    """
    assert run_pass(WarnSmallCopies, kernel(body, windows=WINDOWS)) == []


def test_waits_between_puts_split_batches() -> None:
    assert run_pass(WarnSmallCopies, scatter(64, between="wait_signal(1, queue=0)")) == []


def test_lanes_of_one_warp_count_together() -> None:
    body = """
    if me == 0:
        lanes i in range(32):
            put(1, dst=inbox[i*4096 : (i+1)*4096], src=table[2*i*4096 : (2*i+1)*4096])
    """
    assert codes(run_pass(WarnSmallCopies, kernel(body, windows=WINDOWS))) == ["W100"]


def test_pieces_consumed_one_by_one_are_a_pipeline() -> None:
    body = """
    if me == 0:
        for i in range(8):
            put(1, dst=inbox[i*8192 : (i+1)*8192], src=table[2*i*8192 : (2*i+1)*8192],
                signal="remote")
        quiet(1)
    else:
        for i in range(8):
            wait_signal(0)
            copy(dst=table[i*8192 : (i+1)*8192], src=inbox[i*8192 : (i+1)*8192])
    """
    assert run_pass(WarnSmallCopies, kernel(body, windows=WINDOWS)) == []


def test_targets() -> None:
    assert codes(run_pass(WarnSmallCopies, scatter(64), target="mori-sdma")) == ["W100"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnSmallCopies, scatter(64), target=target) == [], target
