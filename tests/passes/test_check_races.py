"""E031 (unordered writes) and E032 (read before arrival) (`check_races`)."""

from __future__ import annotations

from ccogen.analysis import analyse
from ccogen.analysis.races import ConflictKind
from ccogen.passes.check_races import CheckRaces
from tests.passes.run_pass import codes, instance_of, kernel, run_pass

W = "window send: 1 KiB\nwindow recv: 4 KiB\nwindow out: 1 KiB"
ONE = "between_launches: host_sync"  # one launch at a time: the races within one launch


def check(body: str, nranks: int = 2, **kw: object) -> list[str]:
    kw.setdefault("head", ONE)
    text = kernel(body, windows=W, team=f"lsa({nranks})", **kw)  # type: ignore[arg-type]
    return codes(run_pass(CheckRaces, text, nranks=nranks))


GATHER = """
if me != 0:
    put(0, dst=recv[{at} : {at} + 1024], src=send, queue=0, signal="remote")
else:
    for r in peers():
        wait_signal(r, queue=0)
"""


def test_two_ranks_write_the_same_bytes() -> None:
    text = kernel(GATHER.replace("{at}", "0"), windows=W, team="lsa(3)")
    [d] = run_pass(CheckRaces, text, nranks=3)
    assert (d.code, d.message) == ("E031", "data race: two writes to the same bytes in no "
                                           "fixed order")
    assert d.labels[0].message == "the `put`s of ranks 1 and 2 both write `recv@0[0:1024]`"
    assert d.notes[0] == ("nothing makes rank 2 wait for the `put` from rank 1 to land before "
                          "its own `put` lands")


def test_disjoint_writes_and_ordered_writes_are_fine() -> None:
    assert check(GATHER.replace("{at}", "me*1024 - 1024"), nranks=3) == []
    ordered = """
    if me == 0:
        put(1, dst=recv[0 : 1024], src=send, queue=0, signal="remote")
    else:
        wait_signal(0, queue=0)
        copy(dst=recv[512 : 1536], src=send)
    """
    assert check(ordered) == []


def test_partially_overlapping_writes_race() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[0 : 1024], src=send, queue=0, signal="remote")
    else:
        copy(dst=recv[512 : 1536], src=send)
        wait_signal(0, queue=0)
    """
    [d] = run_pass(CheckRaces, kernel(body, windows=W))
    assert d.code == "E031"
    assert "recv@1[512:1024]" in d.labels[0].message


def test_copy_before_the_wait_reads_before_arrival() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[0 : 1024], src=send, queue=0, signal="remote")
    else:
        {a}
        {b}
    """
    early = body.replace("{a}", "copy(dst=out, src=recv[0 : 1024])").replace(
        "{b}", "wait_signal(0, queue=0)")
    [d] = run_pass(CheckRaces, kernel(early, windows=W, head=ONE))
    assert (d.code, d.message) == ("E032", "read before arrival: nothing orders the write of "
                                           "these bytes before this read")
    assert d.help == "add `wait_signal(0, queue=0)` on rank 1 before the read"
    late = body.replace("{a}", "wait_signal(0, queue=0)").replace(
        "{b}", "copy(dst=out, src=recv[0 : 1024])")
    assert check(late) == []


def test_ensure_reads_at_the_end_of_the_readers_program() -> None:
    body = 'if me == 0:\n    put(1, dst=recv[0 : 1024], src=send, queue=0{sig})\n    quiet(1)'
    ensure = "\n    ensure:\n        if me == 1:\n            recv[0 : 1024] == init(send@0)\n"
    [d] = run_pass(CheckRaces, kernel(body.replace("{sig}", ""), windows=W) + ensure)
    assert d.code == "E032"
    assert d.labels[0].message == "`ensure` reads `recv@1[0:1024]` on rank 1"
    assert d.help == ("add `signal=\"remote\"` to the `put` and `wait_signal(0, queue=0)` on "
                      "rank 1 before the read")


def test_a_put_reading_bytes_still_arriving() -> None:
    body = """
    if me == 0:
        put(1, dst=recv[0 : 1024], src=send, queue=0, signal="remote")
    else:
        put(0, dst=recv[0 : 1024], src=recv[0 : 1024], queue=0)
        wait_signal(0, queue=0)
    """
    assert check(body) == ["E032"]


def test_conflicts_are_found_by_interval_overlap() -> None:
    inst = instance_of(kernel("""
    if me == 0:
        for i in range(4):
            put(1, dst=recv[i*1024 : (i+1)*1024], src=send, queue=0, signal="remote")
    """, windows=W))
    a = analyse(inst)
    assert a.conflicts == []
    inst = instance_of(kernel("""
    if me == 0:
        for i in range(4):
            put(1, dst=recv[i*512 : i*512 + 1024], src=send, queue=i % 2, signal="remote")
    """, windows=W, head="queues 2"))
    kinds = {c.kind for c in analyse(inst).conflicts}
    assert kinds == {ConflictKind.WRITE_WRITE}
