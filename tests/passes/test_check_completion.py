"""E020 (aggregate ops committed in time) and E025 (sources not reused early)."""

from __future__ import annotations

from ccogen.passes.check_completion import CheckCompletion
from tests.passes.run_pass import codes, kernel, run_pass

BATCH = """
if me == 0:
    for i in range(4):
        put(1, dst=recv[i*c : (i+1)*c], src=send[i*c : (i+1)*c], queue=0, aggregate=True,
            signal="remote")
    {tail}
else:
    wait_signal(0, queue=0)
"""


def check(body: str) -> list[str]:
    return codes(run_pass(CheckCompletion, kernel(body)))


def test_committed_batch_is_fine() -> None:
    assert check(BATCH.replace("{tail}", "commit(1, queue=0)\n    quiet(1)")) == []


def test_never_committed() -> None:
    [d] = run_pass(CheckCompletion, kernel(BATCH.replace("{tail}", "quiet(1)")))
    assert d.code == "E020"
    assert d.message == "aggregate `put` is never committed"
    assert d.help == "add `commit(1, queue=0)` after the last aggregate op of the batch"
    assert [lb.message for lb in d.labels] == ["posted without ringing the doorbell",
                                               "returns without waiting for it"]


def test_committed_after_the_quiet() -> None:
    [d] = run_pass(CheckCompletion, kernel(BATCH.replace("{tail}",
                                                         "quiet(1)\n    commit(1, queue=0)")))
    assert d.message == ("aggregate `put` is committed only after a `quiet` that drains its "
                         "queue")


def test_a_later_plain_put_does_not_ring_the_batch_it_spins_behind_it() -> None:
    body = BATCH.replace("{tail}", "put(1, dst=out, src=send[0 : c], queue=0)\n    "
                         "commit(1, queue=0)\n    quiet(1)")
    windows = "window send: 1 MiB\nwindow recv: 1 MiB\nwindow out: 256 KiB"
    [d] = run_pass(CheckCompletion, kernel(body, windows=windows))
    assert d.code == "E020" and "posted behind uncommitted aggregate ops" in d.message


def test_a_plain_put_after_the_commit_is_fine() -> None:
    body = BATCH.replace("{tail}", "commit(1, queue=0)\n    put(1, dst=out, src=send[0 : c], "
                         "queue=0)\n    quiet(1)")
    windows = "window send: 1 MiB\nwindow recv: 1 MiB\nwindow out: 256 KiB"
    assert codes(run_pass(CheckCompletion, kernel(body, windows=windows))) == []


def test_a_commit_unordered_with_another_issuers_post_on_its_queue() -> None:
    body = """
    if me == 0:
        warps w in range(2):
            if w == 0:
                put(1, dst=recv[0 : 64], src=send[0 : 64], queue=0, aggregate=True)
                commit(1, queue=0)
            else:
                put(1, dst=recv[64 : 128], src=send[64 : 128], queue=0)
        quiet(1)
    """
    windows = "window send: 128 B\nwindow recv: 128 B\n"
    [d] = run_pass(CheckCompletion, kernel(body, windows=windows, threads=64))
    assert d.code == "E028"
    one_queue_each = body.replace("recv[64 : 128], src=send[64 : 128], queue=0",
                                  "recv[64 : 128], src=send[64 : 128], queue=1")
    assert codes(run_pass(CheckCompletion, kernel(one_queue_each, windows=windows, threads=64,
                                                  head="queues 2"))) == []
    ordered = body.replace("        warps w in range(2):\n            if w == 0:\n",
                           "        for w in range(2):\n            if w == 0:\n")
    assert codes(run_pass(CheckCompletion, kernel(ordered, windows=windows))) == []


def test_commit_in_a_later_kernel_is_too_late() -> None:
    text = kernel(BATCH.replace("{tail}", "pass")) + \
        "\n    kernel k2(threads=32):\n        if me == 0:\n            commit(1, queue=0)\n"
    assert codes(run_pass(CheckCompletion, text)) == ["E020"]


def test_commit_only_after_a_wait_that_needs_the_batch() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0, aggregate=True, signal="remote")
        wait_signal(1, queue=0)
        commit(1, queue=0)
    else:
        wait_signal(0, queue=0)
        put(0, dst=out, src=send, queue=0, signal="remote")
    """
    [d] = run_pass(CheckCompletion, kernel(body, windows="window send: 64 B\nwindow recv: 64 B\n"
                                                    "window out: 64 B"))
    assert d.message == "a wait needs aggregate `put`, which is committed only after the wait"


SOURCE = """
if me == 0:
    put(1, dst=recv, src=send, queue=0, signal="remote")
    {between}
    copy(dst=send, src=out)
else:
    wait_signal(0, queue=0)
"""
WINDOWS = "window send: 1 KiB\nwindow recv: 1 KiB\nwindow out: 1 KiB"


def test_source_overwritten_before_completion() -> None:
    [d] = run_pass(CheckCompletion, kernel(SOURCE.replace("{between}", "pass"), windows=WINDOWS))
    assert d.code == "E025"
    assert d.message == "`copy` overwrites the source of a `put` that may still be reading it"
    assert d.help == ("complete the `put` first: `quiet(1, queue=0)` before the bytes are "
                      "written again")
    assert d.labels[0].message == "writes `send@0[0:1024]`"


def test_quiet_or_local_signal_completes_the_source() -> None:
    assert codes(run_pass(CheckCompletion, kernel(SOURCE.replace("{between}", "quiet(1)"),
                                                  windows=WINDOWS))) == []
    local = SOURCE.replace('signal="remote")', 'signal="both")').replace(
        "{between}", "wait_signal(0, queue=0)")
    assert codes(run_pass(CheckCompletion, kernel(local, windows=WINDOWS))) == []


def test_quiet_does_not_complete_a_later_aggregate_op() -> None:
    body = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0, aggregate=True, signal="remote")
        quiet(1)
        copy(dst=send, src=out)
        commit(1, queue=0)
    else:
        wait_signal(0, queue=0)
    """
    assert sorted(codes(run_pass(CheckCompletion, kernel(body, windows=WINDOWS)))) == \
        ["E020", "E025"]


def test_an_incoming_put_into_a_source_still_being_read() -> None:
    # each rank tells its left neighbour "go" right after issuing its put, and the left
    # neighbour then writes into the source that put may still be reading
    body = """
    put((me + 1) % nranks, dst=recv, src=send, queue=0)
    put((me - 1) % nranks, dst=out, src=out, queue=1, signal="remote")
    wait_signal((me + 1) % nranks, queue=1)
    put((me + 1) % nranks, dst=send, src=out, queue=1)
    """
    found = run_pass(CheckCompletion, kernel(body, head="queues 2", team="lsa(3)",
                                             windows=WINDOWS), nranks=3)
    assert codes(found) == ["E025"]
    assert found[0].message == ("an incoming `put` overwrites the source of a `put` that may "
                                "still be reading it")
