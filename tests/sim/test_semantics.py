"""The simulator's semantics, op by op (the device APIs' rules, see docs/simulator.md)."""

from __future__ import annotations

import numpy as np

from ccogen.sim.dpor import explore
from tests.sim.util import (
    bytes_of,
    codes,
    drain,
    init_of,
    issuer,
    queue,
    run_while,
    setup_of,
    step,
)

ONE_PUT = """
protocol one(size: bytes = 8):
    team lsa(2)
    between_launches: host_sync
    window src: size
    window dst: size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)

    ensure:
        if me == 1:
            dst == init(src@0)
"""


def test_put_is_non_blocking() -> None:
    s = setup_of(ONE_PUT)
    m = s.machine()
    step(m, issuer(s, 0))  # the post
    assert np.array_equal(bytes_of(m, 1, "dst"), init_of(s, 1, "dst"))
    assert queue(s, 0, 1) in m.enabled
    assert issuer(s, 1) not in m.enabled  # nothing to see yet


def test_transfer_lands_piece_by_piece_then_signals() -> None:
    s = setup_of(ONE_PUT)
    m = s.machine()
    q = queue(s, 0, 1)
    step(m, issuer(s, 0), q, q, q)  # post, read both pieces, write the first
    assert np.array_equal(bytes_of(m, 1, "dst", 0, 4), init_of(s, 0, "src", 0, 4))
    assert np.array_equal(bytes_of(m, 1, "dst", 4, 8), init_of(s, 1, "dst", 4, 8))
    assert m.state.slots.get((1, 0, 0), 0) == 0
    step(m, q)  # second piece
    assert m.state.slots.get((1, 0, 0), 0) == 0  # the signal comes after the data
    step(m, q)
    assert m.state.slots[(1, 0, 0)] == 1
    assert issuer(s, 1) in m.enabled


def test_quiet_waits_for_the_source_to_be_read_not_for_arrival() -> None:
    s = setup_of(ONE_PUT)
    m = s.machine()
    p, q = issuer(s, 0), queue(s, 0, 1)
    step(m, p, q)
    assert p not in m.enabled  # half the source is still unread
    step(m, q)
    assert p in m.enabled  # consumed: quiet returns, though nothing has landed
    assert np.array_equal(bytes_of(m, 1, "dst"), init_of(s, 1, "dst"))


def test_a_launch_runs_to_completion_and_checks_ensure() -> None:
    s = setup_of(ONE_PUT, epochs=2)
    m = s.machine()
    drain(m)
    assert m.over and not m.findings
    assert m.state.slots[(1, 0, 0)] == 2  # slots are never reset


TWO_WRITES = """
protocol two(size: bytes = 8):
    team lsa(2)
    queues 2
    window a: size
    window b: size
    window dst: size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=a, queue=0)
            put(1, dst=dst, src=b, queue={q}, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue={q})

    ensure:
        if me == 1:
            dst == init(b@0)
"""


def test_one_queue_drains_in_order() -> None:
    s = setup_of(TWO_WRITES.replace("{q}", "0"))
    explored = explore(s)
    assert explored.complete
    assert {r.digest for r in explored.runs} == {explored.runs[0].digest}
    assert all(not r.findings for r in explored.runs)


def test_different_queues_are_unordered() -> None:
    s = setup_of(TWO_WRITES.replace("{q}", "1"))
    explored = explore(s)
    # each of the two pieces may end up from either put
    assert len({r.digest for r in explored.runs}) == 4
    assert all("E031" in {f.diagnostic.code for f in r.findings} for r in explored.runs)


AGGREGATE = """
protocol agg(size: bytes = 8):
    team lsa(2)
    window a: size
    window b: size
    window dst: 2 * size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst[0 : size], src=a, queue=0, aggregate=True)
            {then}
            quiet(1)
        else:
            wait_signal(0, queue=0)
"""


def test_an_aggregate_op_moves_nothing_until_commit() -> None:
    s = setup_of(AGGREGATE.replace("{then}", "put(1, dst=dst[size : 2*size], src=b, queue=0, "
                                   "aggregate=True, signal=\"remote\")\n            commit(1, "
                                   "queue=0)"))
    m = s.machine()
    p, q = issuer(s, 0), queue(s, 0, 1)
    step(m, p, p)  # both posts
    assert q not in m.enabled
    step(m, p)  # commit
    assert q in m.enabled
    drain(m)
    assert m.over and not m.findings


def test_a_plain_post_behind_an_uncommitted_batch_spins() -> None:
    # MORI's submitPacket: the plain op waits for the committed pointer to reach its
    # slot, and only commit moves it past the reserved aggregate op
    s = setup_of(AGGREGATE.replace("{then}", "put(1, dst=dst[size : 2*size], src=b, queue=0, "
                                   "signal=\"remote\")"))
    m = s.machine()
    p, q = issuer(s, 0), queue(s, 0, 1)
    step(m, p)
    assert q not in m.enabled
    step(m, p)  # the plain put does not ring the queue: it spins behind the batch
    assert m.state.queues[0].rung == 0 and p not in m.enabled
    drain(m)
    assert not m.over and codes(m) == ["E020"]


def test_a_commit_rings_what_was_posted_before_it() -> None:
    s = setup_of(AGGREGATE.replace("{then}", "commit(1, queue=0)\n            put(1, "
                                   "dst=dst[size : 2*size], src=b, queue=0, "
                                   "signal=\"remote\")"))
    m = s.machine()
    p = issuer(s, 0)
    step(m, p, p)  # post, commit
    assert m.state.queues[0].rung == 1
    step(m, p)
    assert m.state.queues[0].rung == 2
    drain(m)
    assert m.over and not m.findings


def test_quiet_does_not_wait_for_an_uncommitted_op() -> None:
    s = setup_of(AGGREGATE.replace("{then}", "pass"))
    m = s.machine()
    p = issuer(s, 0)
    step(m, p, p)  # the post, then quiet returns at once
    drain(m)
    assert not m.over  # rank 1 waits for a signal that never comes
    m.explain_deadlock()
    assert codes(m) == ["E020"]


LANES = """
protocol lanes(chunk: bytes = 4):
    team lsa(2)
    window src: 4 * chunk
    window dst: 4 * chunk

    kernel k(threads=32):
        if me == 0:
            lanes l in range(4):
                put(1, dst=dst[l*chunk : (l+1)*chunk], src=src[l*chunk : (l+1)*chunk], queue=0,
                    signal="remote"{per_copy})
            quiet(1)
        else:
            wait_signal(0, queue=0)

    ensure:
        if me == 1:
            dst == init(src@0)
"""


def test_lanes_posting_together_signal_once() -> None:
    s = setup_of(LANES.replace("{per_copy}", ""))
    assert s.plan.waits[(1, 0)].base == 1
    m = s.machine()
    step(m, issuer(s, 0, lane=0))  # the group posts in one step
    assert len(m.state.queues[0].items) == 4
    drain(m)
    assert m.over and not m.findings
    assert m.state.slots[(1, 0, 0)] == 1


def test_signal_per_copy_signals_once_per_lane() -> None:
    s = setup_of(LANES.replace("{per_copy}", ", signal_per_copy=True"))
    assert s.plan.waits[(1, 0)].base == 4
    m = s.machine()
    drain(m)
    assert m.over and not m.findings
    assert m.state.slots[(1, 0, 0)] == 4


def test_a_group_waits_for_all_its_lanes() -> None:
    s = setup_of(LANES.replace("{per_copy}", ""))
    m = s.machine()
    assert issuer(s, 0, lane=0) in m.enabled
    assert all(issuer(s, 0, lane=i) not in m.enabled for i in (1, 2, 3))  # the leader posts


COUNTED = """
protocol counted(size: bytes = 16):
    team lsa(2)
    between_launches: host_sync
    window src: size
    window dst: size
    counter c

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0, count=c)
            quiet(1)
        else:
            wait_count(c)

    ensure:
        if me == 1:
            dst == init(src@0)
"""


def test_a_counted_write_adds_its_bytes_after_the_payload() -> None:
    s = setup_of(COUNTED, epochs=2)
    assert s.plan.waits[(1, 0)].base == 16
    m = s.machine()
    q = queue(s, 0, 1)
    step(m, issuer(s, 0), q, q, q, q)  # post, two reads, two writes
    assert m.state.counters.get((1, "c"), 0) == 0
    step(m, q)
    assert m.state.counters[(1, "c")] == 16
    drain(m)
    assert m.over and not m.findings
    assert m.state.counters[(1, "c")] == 32  # counters are never reset either


GREATER_EQUAL = """
protocol ge(size: bytes = 8):
    team lsa(2)
    window src: 2 * size
    window dst: 2 * size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst[0 : size], src=src[0 : size], queue=0, signal="remote")
            put(1, dst=dst[size : 2*size], src=src[size : 2*size], queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0, expected=1)
"""


def test_waits_compare_with_greater_or_equal() -> None:
    s = setup_of(GREATER_EQUAL, epochs=2)
    assert s.plan.waits[(1, 0)].expected(1) == 3  # 1 + one launch's total of 2
    m = s.machine()
    run_while(m, lambda en: en[-1])  # engines and the host first: the slot overshoots
    assert m.over and not m.findings


PAIRING = """
protocol pairing(size: bytes = 8):
    team lsa(2)
    window src: 3 * size
    window dst: 3 * size

    kernel k(threads=32):
        if me == 0:
            for i in range(3):
                put(1, dst=dst[i*size : (i+1)*size], src=src[i*size : (i+1)*size], queue=0,
                    signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)
            wait_signal(0, queue=0)
            {third}
"""


def test_the_kth_wait_expects_k_and_the_last_the_total() -> None:
    s = setup_of(PAIRING.replace("{third}", "pass"))
    assert [s.plan.waits[(1, i)].base for i in (0, 1)] == [1, 3]


def test_a_wait_with_nothing_to_pair_never_passes() -> None:
    s = setup_of(PAIRING.replace("{third}", "wait_signal(0, queue=0)\n            "
                                 "wait_signal(0, queue=0)"))
    assert [s.plan.waits[(1, i)].base for i in range(4)] == [1, 2, 3, None]
    m = s.machine()
    drain(m)
    m.explain_deadlock()
    assert codes(m) == ["E021"]


BARRIER = """
protocol sync(size: bytes = 8):
    team lsa(2)
    window buf: size

    kernel k(threads=32):
        barrier()
"""


def test_nobody_leaves_a_barrier_before_everyone_arrived() -> None:
    s = setup_of(BARRIER)
    m = s.machine()
    p0, p1 = issuer(s, 0), issuer(s, 1)
    step(m, p0)  # rank 0 arrives
    assert p0 not in m.enabled
    step(m, p1)
    assert p0 in m.enabled and p1 in m.enabled
    drain(m)
    assert m.over and not m.findings


GET = """
protocol pull(size: bytes = 8):
    team lsa(2)
    between_launches: host_sync
    window src: size
    window dst: size

    kernel k(threads=32):
        if me == 1:
            get(0, dst=dst, src=src, queue=0, signal="local")
            wait_signal(1, queue=0)
            quiet(0)

    ensure:
        if me == 1:
            dst == init(src@0)
"""


def test_get_reads_the_peer_and_signals_its_own_slot() -> None:
    s = setup_of(GET, epochs=2)
    assert s.plan.waits[(1, 1)].base == 1  # a local signal lands on [me, queue]
    m = s.machine()
    drain(m)
    assert m.over and not m.findings
    assert m.state.slots[(1, 1, 0)] == 2
    assert np.array_equal(bytes_of(m, 1, "dst"), init_of(s, 0, "src"))


RACY_COPY = """
protocol racy(size: bytes = 8):
    team lsa(2)
    window src: size
    window dst: size
    window out: size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0, signal="remote")
            quiet(1)
        else:
            copy(dst=out, src=dst)
            wait_signal(0, queue=0)
"""


def test_a_read_between_pieces_sees_old_and_new_bytes() -> None:
    s = setup_of(RACY_COPY)
    m = s.machine()
    q = queue(s, 0, 1)
    step(m, issuer(s, 0), q, q, q, issuer(s, 1))  # the copy runs after half has landed
    out = bytes_of(m, 1, "out")
    assert np.array_equal(out[:4], init_of(s, 0, "src", 0, 4))
    assert np.array_equal(out[4:], init_of(s, 1, "dst", 4, 8))
    assert codes(m) == ["E032"]


def test_races_are_found_whatever_the_interleaving() -> None:
    s = setup_of(RACY_COPY)
    m = s.machine()
    q = queue(s, 0, 1)
    step(m, issuer(s, 0), q, q, q, q, q)  # the put has fully landed before the copy
    step(m, issuer(s, 1))
    assert codes(m) == ["E032"]  # but nothing orders them: another schedule reads early


COPY = """
protocol local(size: bytes = 8):
    team lsa(2)
    window a: size
    window b: size

    kernel k(threads=32):
        copy(dst=b, src=a)

    ensure:
        b == init(a)
"""


def test_copy_is_local_and_done_when_it_returns() -> None:
    s = setup_of(COPY)
    m = s.machine()
    step(m, issuer(s, 0))
    assert np.array_equal(bytes_of(m, 0, "b"), init_of(s, 0, "a"))
    assert np.array_equal(bytes_of(m, 1, "b"), init_of(s, 1, "b"))


QUIET_ONLY = """
protocol push(size: bytes = 8):
    team lsa(2)
    window src: size
    window dst: size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0)
            quiet(1)

    ensure:
        if me == 1:
            dst == init(src@0)
"""


def test_transfers_outlive_their_launch() -> None:
    s = setup_of(QUIET_ONLY)
    m = s.machine()
    hosts = range(s.plan.host, s.plan.nprocs)
    # end every rank's launch as soon as possible
    run_while(m, lambda en: next((p for p in en if p in hosts), en[0]))
    # `ensure` read bytes still in flight (quiet is sender-side); the failed postcondition
    # that follows is left out of reports as a consequence
    assert codes(m) == ["E032", "E033"]


TWO_KERNELS = """
protocol late(size: bytes = 8):
    team lsa(2)
    window src: size
    window dst: size

    kernel first(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0, aggregate=True, signal="remote")

    kernel second(threads=32):
        if me == 0:
            commit(1, queue=0)
            quiet(1)
        else:
            wait_signal(0, queue=0)
"""


def test_an_aggregate_op_must_be_rung_in_its_own_kernel() -> None:
    s = setup_of(TWO_KERNELS)
    m = s.machine()
    drain(m)
    assert m.over
    assert codes(m) == ["E020"]


FORK_AFTER = """
protocol fork(size: bytes = 64):
    team lsa(2)
    window a: size
    window b: size
    window recv: size

    kernel k(threads=64):
        {before}
        lanes p in peers():
            put(p, dst=recv, src=b, queue=0, signal="remote")
            quiet(p)
            wait_signal(p, queue=0)
"""


def test_program_order_holds_across_the_issuers_of_a_fork() -> None:
    # a block-level op, then a `lanes` block: the lanes start after it (their clocks
    # know it), so reading what the copy wrote is no race; same after a barrier
    for before in ("copy(dst=b, src=a)", "barrier()\n        copy(dst=b, src=a)"):
        s = setup_of(FORK_AFTER.format(before=before))
        for seed in range(4):
            m = s.machine()
            run_while(m, lambda en, k=seed: en[k % len(en)])
            assert m.over and not m.findings, codes(m)


FENCED = """
protocol fenced(size: bytes = 8):
    team lsa(2)
    queues 2
    window src: size
    window flag: 16
    window dst: size
    window got: 16
    window out: size

    kernel k(threads=32):
        if me == 0:
            put(1, dst=dst, src=src, queue=0)
            {fence}
            put(1, dst=got, src=flag, queue=1, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=1)
            copy(dst=out, src=dst)

    ensure:
        if me == 1:
            out == init(src@0)
"""


def test_a_fence_lands_earlier_transfers_before_later_ones_on_other_queues() -> None:
    # as the checker has it (language reference section 8): with the fence, the signal
    # on queue 1 proves the data on queue 0 landed; without it, it does not (E024)
    s = setup_of(FENCED.format(fence="fence()"))
    m = s.machine()
    q0, q1 = queue(s, 0, 1, 0), queue(s, 0, 1, 1)
    p = issuer(s, 0)
    step(m, p, p, p)  # put, fence, put
    step(m, q1, q1)  # queue 1 reads its source (8 bytes: two pieces)
    assert q1 not in m.enabled  # its first write waits for queue 0's data to land
    run_while(m, lambda en: q1 if q1 in en else (q0 if q0 in en else en[0]))
    assert m.over and not m.findings
    s = setup_of(FENCED.format(fence="pass"))
    m = s.machine()
    run_while(m, lambda en: q1 if q1 in en else en[-1])
    assert "E024" in codes(m)


def test_a_rank_starts_its_next_launch_while_its_peer_is_in_this_one() -> None:
    # no host barrier between launches: rank 0 ends launch 1 and puts again into rank 1's
    # `dst` while rank 1 still waits in launch 1 (its caller has not read `dst` yet)
    s = setup_of(COUNTED.replace("    between_launches: host_sync\n", ""), epochs=2)
    m = s.machine()
    p0, q, host0 = issuer(s, 0), queue(s, 0, 1), s.plan.host_of(0)
    step(m, p0, q, q, q, q, q, p0, host0)  # launch 1 of rank 0: post, transfer, quiet; its end
    assert m.state.epochs == [1, 0]
    step(m, p0)  # rank 0 posts launch 2's put; rank 1 has not ended launch 1
    drain(m)
    assert m.over and "E032" in codes(m)  # rank 1's caller may read `dst` as it is rewritten
    s = setup_of(COUNTED, epochs=2)  # with the host barrier, rank 0 waits for rank 1
    m = s.machine()
    step(m, p0, q, q, q, q, q, p0)
    assert host0 not in m.enabled  # rank 1 has not ended launch 1
    step(m, issuer(s, 1), host0)
    assert p0 not in m.enabled  # nor has rank 1's caller stepped in
    drain(m)
    assert m.over and not m.findings
