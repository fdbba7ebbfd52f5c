"""Window contents, `ensure` evaluation, debug records and report text (no GPU)."""

from __future__ import annotations

import numpy as np

from ccogen.rt.data import (
    CheckSpec,
    RegionSpec,
    evaluate,
    first_difference,
    initial_bytes,
    make_reader,
    remote_finals,
)
from ccogen.rt.debug import RECORD_SIZE, DebugRecord, describe_wait
from ccogen.rt.report import RankResult, RunReport


def test_initial_bytes_deterministic_and_distinct() -> None:
    a = initial_bytes(7, 3, 1, "send", 4096)
    assert a.dtype == np.uint8 and a.size == 4096
    assert np.array_equal(a, initial_bytes(7, 3, 1, "send", 4096))
    for other in [(8, 3, 1, "send"), (7, 4, 1, "send"), (7, 3, 0, "send"), (7, 3, 1, "recv")]:
        assert not np.array_equal(a, initial_bytes(*other, 4096))
    assert np.array_equal(initial_bytes(7, 3, 1, "send", 100), a[:100])


def test_first_difference() -> None:
    a = np.zeros(32, np.uint8)
    b = a.copy()
    assert first_difference(a, b) == (0, 0, 0)
    b[5:9] = 1
    b[20] = 1
    assert first_difference(a, b) == (5, 9, 5)
    b[30:] = 1
    assert first_difference(a[28:], b[28:]) == (2, 4, 2)


def _putsig_checks() -> list[CheckSpec]:
    size = 64
    return [CheckSpec(r, "==", RegionSpec("dst", 0, size, r, False),
                      RegionSpec("src", 0, size, 1 - r, True), "putsig.cco:14",
                      "dst == init(src@peer)") for r in (0, 1)]


def test_evaluate_holds_and_fails() -> None:
    seed, epoch, sizes = 1, 2, {"src": 64, "dst": 64}
    good = {("dst", 0): initial_bytes(seed, epoch, 1, "src", 64),
            ("src", 0): initial_bytes(seed, epoch, 0, "src", 64)}
    checks = [c for c in _putsig_checks() if c.rank == 0]
    assert evaluate(checks, make_reader(seed, epoch, sizes, good), epoch) == []
    bad = dict(good)
    broken = good[("dst", 0)].copy()
    broken[10:12] ^= 0xFF
    bad[("dst", 0)] = broken
    [failure] = evaluate(checks, make_reader(seed, epoch, sizes, bad), epoch)
    assert failure.rank == 0 and failure.epoch == 2 and failure.location == "putsig.cco:14"
    assert "2 of 64 bytes differ; first at dst@0[0:64] bytes [10:12)" in failure.detail
    assert "rank 0, epoch 2: ensure at putsig.cco:14 failed" in failure.format()


def test_not_equal() -> None:
    same = {("a", 0): np.arange(8, dtype=np.uint8), ("b", 0): np.arange(8, dtype=np.uint8)}
    check = CheckSpec(0, "!=", RegionSpec("a", 0, 8, 0, False), RegionSpec("b", 0, 8, 0, False),
                      "x.cco:1", "a != b")
    [failure] = evaluate([check], make_reader(0, 0, {"a": 8, "b": 8}, same), 0)
    assert failure.detail == "all 8 bytes are equal"


def test_remote_finals() -> None:
    local = CheckSpec(0, "==", RegionSpec("dst", 0, 8, 0, False),
                      RegionSpec("src", 0, 8, 1, True), "x.cco:1", "")
    remote = CheckSpec(0, "==", RegionSpec("dst", 0, 8, 1, False),
                       RegionSpec("src", 0, 8, 0, True), "x.cco:2", "")
    assert remote_finals([local]) == set()
    assert remote_finals([local, remote]) == {("dst", 1)}


def test_debug_record_round_trip_and_text() -> None:
    rec = DebugRecord(hit=1, rank=1, line=7, src=0, queue=0, kind=1, expected=1, observed=0,
                      epoch=0)
    data = rec.pack()
    assert len(data) == RECORD_SIZE
    assert DebugRecord.parse(data) == rec
    assert describe_wait(rec, "hang.cco") == (
        "rank 1: wait at hang.cco:7 for (src 0, queue 0) expected 1, observed 0 (epoch 0)")
    count = DebugRecord(1, 0, 12, -1, 1, 2, 4096, 2048, 3)
    assert "for counter `landed`" in describe_wait(count, "g.cco", ["x", "landed"])
    assert "for a counter" in describe_wait(DebugRecord(1, 0, 12, -1, -1, 2, 1, 0, 0), "g.cco")


def test_a_require_record_names_the_line_the_element_and_the_value() -> None:
    from ccogen.rt.debug import KIND_REQUIRE

    over = DebugRecord(1, 0, 13, 1, 0, KIND_REQUIRE, 0, 69, 2)
    assert describe_wait(over, "alltoallv.cco") == (
        "rank 0: require at alltoallv.cco:13 does not hold: element 1 is 69 (epoch 2)")
    negative = DebugRecord(1, 3, 13, -1, 0, KIND_REQUIRE, 0, (1 << 64) - 5, 0)
    assert describe_wait(negative, "a.cco") == (
        "rank 3: require at a.cco:13 does not hold: a value is -5 (epoch 0)")


def test_report_text() -> None:
    ok = RunReport("putsig", "nccl-lsa", 2, 3, [
        RankResult(0, 0, epochs=3, times_ms=[0.010, 0.012, 0.011], checks_per_epoch=1),
        RankResult(1, 1, epochs=3, times_ms=[0.020, 0.013, 0.014], checks_per_epoch=1)])
    assert ok.ok and ok.median_ms == 0.014
    text = ok.format()
    assert "time per epoch: median 14.0 us (rank 0 11.0 us, rank 1 14.0 us)" in text
    assert "2 comparisons per epoch held on every rank in every epoch" in text
    hung = RunReport("hang", "nccl-lsa", 2, 3, [
        RankResult(0, 0, wait="rank 0: wait at hang.cco:7 ..."),
        RankResult(1, 1, error="stopped: another rank had failed")])
    assert not hung.ok
    assert "timed-out wait: rank 0: wait at hang.cco:7" in hung.format()
    assert "FAILED" in hung.format()
