"""Group steps split over CTAs (codegen.ctasplit): which barriers stay, and the scales."""

from __future__ import annotations

import random
import re

import pytest

from ccogen.codegen.ctasplit import Footprint, _conflict, _ranges, split_segments
from ccogen.codegen.model import LOCAL, Segment, Step
from ccogen.codegen.steps import RT_PEER, StepKind
from tests.helpers import REPO_ROOT
from tests.helpers import generated_kernels as kernels

BARRIER_FORM = REPO_ROOT / "benchmarks" / "b2b" / "alltoall_barrier.cco"
# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")


def program(text: str, rank: int) -> str:
    """The body of rank `rank`'s first block function."""
    m = re.search(rf"_r{rank}_b0\(const ccogen_ctx& c\) \{{\n(.*?)\n\}}", text, re.S)
    assert m is not None
    return m.group(1)


def calls(body: str) -> list[str]:
    return re.findall(r"ccogen_(\w+?)_group\(", body)


def test_alltoall_meets_no_other_cta() -> None:
    text = kernels("alltoall", params={"block": 1 << 20})
    body = program(text, 0)
    # the credit out and the peer's credit in (back to back since issue 30, no barrier),
    # then the split put
    assert "barrier" not in calls(body)
    assert calls(body) == ["copy", "ctasync", "csignal", "cwait", "ctasync",
                           "copy", "ctasync", "csignal", "quiet", "cwait", "ctasync"]
    ctas = int(re.search(r"(\d+) CTA\(s\)", text).group(1))  # type: ignore[union-attr]
    assert ctas > 1
    # each CTA adds 1, each wait (the credit's on queue 1, the block's on queue 0)
    # compares with 1 signal x ctas
    assert len(re.findall(r"ccogen_csignal_group\(c, 1, \d+ULL, 1ULL\)", body)) == 2
    assert re.search(rf"cwait_group\(c, \d+ULL, 1ULL, 1ULL, \d+, 1, 1, 1, {ctas}ULL\)", body)
    assert re.search(rf"cwait_group\(c, \d+ULL, 1ULL, 1ULL, \d+, 1, 0, 1, {ctas}ULL\)", body)
    assert "kSyncs = 0" in body


def test_small_alltoall_is_one_narrow_cta() -> None:
    text = kernels("alltoall", params={"block": 8})
    assert "1 logical block(s) x 1 CTA(s) x 64 threads" in text


def test_small_puts_ordered_by_a_credit_keep_the_ll_path() -> None:
    body = program(kernels("pingpong"), 0)  # back to back by a credit, not a barrier
    assert calls(body)[:2] == ["wait", "sync"]  # rank 1's credit
    assert calls(body)[2:].count("llput") == 4 and "barrier" not in calls(body)


def test_alltoall_by_credits_keeps_the_ll_path_of_its_small_puts() -> None:
    """Issue 30: the library `alltoall` (a credit per pair since issue 30, instead of the
    leading barrier it had before, benchmarks/b2b/alltoall_barrier.cco) puts its 8-byte
    block as an LL put at 2 ranks, as it did while it declared `host_sync`; the barrier
    form's barrier orders memory, which keeps them off the LL path (codegen.ll)."""
    body = program(kernels("alltoall", params={"block": 8}), 0)
    assert "barrier" not in calls(body)
    # the credit out (a 16-byte copy and its signal), the peer's credit in, then LL
    assert calls(body)[:4] == ["copy", "sync", "signal", "wait"]
    assert calls(body).count("llput") == 1 and calls(body).count("llwait") == 1
    barrier = program(kernels(BARRIER_FORM.read_text(), params={"block": 8}), 0)
    assert calls(barrier) == ["barrier", "copy", "sync", "signal", "quiet", "wait", "sync"]


def test_rotating_alltoall_copies_out_of_its_slot_with_the_whole_group() -> None:
    """Issue 30: `alltoall_rotating`'s copy out of the landing slot ran on one thread per
    peer (0.05x `alltoall` at 64 KiB per peer); it is now split over the CTA group, at
    every team size, like its puts."""
    for nranks in (2, 4, 8):
        text = kernels("alltoall_rotating", nranks=nranks, params={"block": 65536})
        assert "ccogen_copy_thread(c, " not in text and "ccogen_copy_warp(c, " not in text
        body = program(text, 1)
        # the puts to the peers, then the blocks below and above rank 1 out of the slot
        assert calls(body).count("copy") == nranks - 1 + (2 if nranks > 2 else 1)


def test_packing_keeps_one_barrier_before_the_put_that_reads_it() -> None:
    body = program(kernels("pack_then_send"), 0)
    found = calls(body)
    # 64 local copies into disjoint pieces need no cross-CTA barrier between them; the
    # put reads every piece, so the group meets once, right before it
    assert found.count("sync") == 1
    assert found.index("sync") == len(found) - found[::-1].index("copy") - 2
    assert "kSyncs = 1" in body and "ccogen_sync_group(c, 1ULL, kSyncs)" in body


HEAD = """protocol p(size: bytes = 1 MiB):
    team lsa(2)
    window a: size
    window b: size
    counter landed
"""


def test_a_counted_put_signals_once_after_a_barrier() -> None:
    body = program(kernels(HEAD + """
    kernel k(threads=32):
        if me == 0:
            put(1, dst=b, src=a, queue=0, count=landed)
            quiet(1)
        else:
            wait_count(landed)
"""), 0)
    # the counter gets the group's byte count once, from the leader, after every CTA
    assert calls(body)[:3] == ["copy", "sync", "signal"]


def test_a_reset_is_fenced_by_group_barriers() -> None:
    text = kernels(HEAD + """
    kernel k(threads=32):
        if me == 1:
            wait_count(landed)
            reset_count(landed)
            copy(dst=b, src=a)
        else:
            put(1, dst=b, src=a, queue=0, count=landed)
            quiet(1)
""")
    found = calls(program(text, 1))
    i = found.index("reset")
    assert found[i - 1] == "sync" and found[i + 1] == "sync"
    assert found[0] == "cwait"


def test_scales_are_the_lcm_of_the_signalling_groups() -> None:
    # kernel one: a 1 MiB put (many CTAs) and kernel two: a 64 B put (one CTA) signal
    # the same slot; rank 1 waits for both
    text = kernels(HEAD + """
    kernel one(threads=32):
        if me == 0:
            put(1, dst=b, src=a, queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)

    kernel two(threads=32):
        if me == 0:
            put(1, dst=b[0:64], src=a[0:64], queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)
""")
    ctas = int(re.search(r"kernel `one`.*?(\d+) CTA\(s\)", text).group(1))  # type: ignore[union-attr]
    assert ctas > 1
    one, two = text.split("======== kernel `two`")
    # kernel one: every CTA adds 1 (= 1 x S / ctas with S = ctas); kernel two: 1 x S
    assert re.search(r"ccogen_csignal_group\(c, 1, \d+ULL, 1ULL\)", one)
    assert re.search(rf"ccogen_signal_group\(c, 1, \d+ULL, {ctas}ULL\)", two)
    # both waits count signals (1 then 2 per epoch of 2) and compare times S
    assert re.search(rf"ccogen_cwait_group\(c, \d+ULL, 1ULL, 2ULL, \d+, 0, 0, 1, {ctas}ULL\)", one)
    assert re.search(rf"ccogen_wait_group\(c, \d+ULL, 2ULL, 2ULL, \d+, 0, 0, 1, {ctas}ULL\)", two)


def copy(dst: int, src: int, n: int = 64, dst_peer: int = LOCAL) -> Step:
    return Step(StepKind.COPY, dst_peer=dst_peer, dst_off=dst, src_off=src, nbytes=n, vec=True)


def test_independent_copies_need_no_barrier_but_a_reader_does() -> None:
    seg = Segment(steps=(copy(0, 1000), Step(StepKind.SYNC, seq=1), copy(64, 1064),
                         Step(StepKind.SYNC, seq=2), copy(2000, 0, 128, dst_peer=1),
                         Step(StepKind.SYNC, seq=3)))
    out, syncs = split_segments([seg], frozenset())
    kinds = [s.kind.value for s in out[0].steps]
    # copy 2 touches other bytes than copy 1; copy 3 reads both: one barrier, before it
    assert kinds == ["copy", "ctasync", "copy", "sync", "copy", "ctasync"]
    assert syncs == 1 and out[0].steps[3].seq == 1


def test_a_write_after_read_keeps_the_barrier() -> None:
    seg = Segment(steps=(copy(2000, 0, 128, dst_peer=1), Step(StepKind.SYNC, seq=1),
                         Step(StepKind.QUIET), copy(0, 4000)))
    out, _ = split_segments([seg], frozenset())
    # the put still reads what copy 2 overwrites
    assert [s.kind for s in out[0].steps][1] is StepKind.SYNC


def test_a_put_to_a_run_time_peer_conflicts_with_every_rank() -> None:
    put = copy(2000, 0, 128, dst_peer=RT_PEER)  # codegen.rtpeer: the peer is read on the device
    for other in (copy(2000, 512, 128, dst_peer=1), copy(2064, 512, 16)):
        assert _conflict([put], [other]) and _conflict([other], [put])
    assert not _conflict([put], [copy(4000, 512, 128, dst_peer=1)])
    seg = Segment(steps=(put, Step(StepKind.SYNC, seq=1), copy(2000, 512, 128, dst_peer=1)))
    out, _ = split_segments([seg], frozenset())
    assert [s.kind for s in out[0].steps][1] is StepKind.SYNC  # kept: the same bytes of rank 1


def _pairwise(before: list[Step], after: list[Step]) -> bool:
    """The definition `_conflict` implements: the old pairwise scan (a run-time peer,
    `RT_PEER`, is any rank)."""
    return any((pa == pb or RT_PEER in (pa, pb)) and (wa or wb) and lo_a < hi_b and lo_b < hi_a
               for a in before for b in after
               for pa, lo_a, hi_a, wa in _ranges(a) for pb, lo_b, hi_b, wb in _ranges(b))


def _random_copy(rng: random.Random) -> Step:
    lo = rng.randrange(0, 64)
    n = rng.choice([0, 0, 1, 2, 4, 8, 16, 32, -3]) if rng.random() < 0.2 else rng.randrange(1, 24)
    kind = rng.choice([StepKind.COPY, StepKind.COPY, StepKind.PUTSIG, StepKind.LLWAIT,
                       StepKind.LLPUT])
    return Step(kind, dst_peer=rng.choice([LOCAL, 0, 1, 1, RT_PEER]), dst_off=lo,
                src_peer=rng.choice([LOCAL, 0, 1]), src_off=rng.randrange(0, 64),
                off=rng.randrange(0, 64), nbytes=n)


def test_conflict_index_agrees_with_the_pairwise_scan() -> None:
    rng = random.Random(25)
    hits = 0
    for _ in range(3000):
        before = [_random_copy(rng) for _ in range(rng.randrange(0, 8))]
        after = [_random_copy(rng) for _ in range(rng.randrange(0, 6))]
        want = _pairwise(before, after)
        hits += want
        assert _conflict(before, after) == want, (before, after)
        index = Footprint()  # grown one copy at a time, queried as it grows
        for k, s in enumerate(before):
            index.add(s)
            assert index.conflicts(after) == _pairwise(before[:k + 1], after)
    assert 300 < hits < 2700  # both answers are common

