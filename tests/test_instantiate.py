"""Instantiation: binding, evaluation, unrolling, issuers, queues, groups, diagnostics."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from ccogen.diag import Diagnostic
from ccogen.instantiate import MAX_OP_INSTANCES, instantiate, parse_param_value, team_sizes
from ccogen.ir import nodes as ir
from ccogen.ir.instance import Instance, Issuer, OpInst, RegionInst
from tests.helpers import library_params
from tests.pyir import protocol

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20

ALLTOALL = dict(
    params={"block": 1 * MiB},
    bytes_params=["block"],
    windows={"send": "nranks * block", "recv": "nranks * block"},
    kernels=[("exchange", 64, None, """
        for p in lanes(peers()):
            put(p, dst=recv[me*block : (me+1)*block], src=send[p*block : (p+1)*block],
                queue=0, signal="remote")
            quiet(p)
            wait_signal(p, queue=0)
    """)],
    ensure="""
        for p in peers():
            recv[p*block : (p+1)*block] == init(send @ p)[me*block : (me+1)*block]
    """,
)

STRIPED_PUT = dict(
    params={"stripe": 2 * MiB, "stripes": 4},
    bytes_params=["stripe"],
    team="2",
    queues=None,
    windows={"src": "stripes * stripe", "dst": "stripes * stripe"},
    kernels=[("push", 128, None, """
        if me == 0:
            for w in warps(range(stripes)):
                put(1, dst=dst[w*stripe : (w+1)*stripe], src=src[w*stripe : (w+1)*stripe],
                    signal="remote")
        else:
            for w in range(stripes):
                wait_signal(0, queue=w)
    """)],
    ensure="""
        if me == 1:
            dst == init(src @ 0)
    """,
)


def build(spec: dict[str, object], **changes: object) -> ir.Protocol:
    return protocol("t", **{**spec, **changes})  # type: ignore[arg-type]


def ok(p: ir.Protocol, nranks: int, params: dict[str, int] | None = None) -> Instance:
    inst, diags = instantiate(p, nranks, params)
    assert diags == [], [(d.code, d.message) for d in diags]
    assert inst is not None
    return inst


def one_kernel(text: str, threads: int | str = 64, blocks: int | str | None = None,
               **kw: object) -> ir.Protocol:
    spec: dict[str, object] = {"windows": {"buf": "64", "big": "1024"}, **kw}
    return protocol("t", kernels=[("k", threads, blocks, text)], **spec)  # type: ignore[arg-type]


def errors(p: ir.Protocol, nranks: int = 4,
           params: dict[str, int] | None = None) -> tuple[Instance | None, list[Diagnostic]]:
    inst, diags = instantiate(p, nranks, params)
    assert diags, "expected diagnostics"
    return inst, diags


def only(diags: list[Diagnostic], code: str) -> Diagnostic:
    assert [d.code for d in diags] == [code], [(d.code, d.message) for d in diags]
    return diags[0]


def kinds(ops: tuple[OpInst, ...]) -> list[str]:
    return [o.kind for o in ops]


# ============================================================================= alltoall (spec §3)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_alltoall_unrolls_one_lane_per_peer(n: int) -> None:
    inst = ok(build(ALLTOALL), n)
    assert inst.nranks == n and inst.queues == 1
    assert inst.params == (("block", MiB),)
    assert inst.window_sizes == (("send", n * MiB), ("recv", n * MiB))
    assert [(k.name, k.threads, k.blocks) for k in inst.kernels] == [("exchange", 64, 1)]
    assert inst.op_count == n * (n - 1) * 3
    for me, ops in enumerate(inst.ranks):
        peers = [p for p in range(n) if p != me]
        assert kinds(ops) == ["put", "quiet", "wait_signal"] * (n - 1)
        assert [o.index for o in ops] == list(range(len(ops)))
        for lane, peer in enumerate(peers):
            put, quiet, wait = ops[3 * lane : 3 * lane + 3]
            assert {o.issuer for o in (put, quiet, wait)} == {Issuer(block=0, lane=lane)}
            assert (put.peer, quiet.peer, wait.peer) == (peer, peer, peer)
            assert (put.queue, quiet.queue, wait.queue) == (0, None, 0)
            assert put.dst == RegionInst("recv", me * MiB, (me + 1) * MiB, peer)
            assert put.src == RegionInst("send", peer * MiB, (peer + 1) * MiB, me)
            assert put.signal is ir.SignalKind.REMOTE and put.expected is None
            assert (put.preds, quiet.preds, wait.preds) == ((), (put.index,), (quiet.index,))
            assert (put.rank, put.kernel, put.span.text[:4]) == (me, 0, "put(")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_alltoall_lanes_of_one_warp_post_together(n: int) -> None:
    inst = ok(build(ALLTOALL), n)
    for ops in inst.ranks:
        assert [o.group for o in ops] == [0, 1, 2] * (n - 1)
        assert {o.lanes_in_group for o in ops} == {n - 1}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_alltoall_ensure_checks(n: int) -> None:
    inst = ok(build(ALLTOALL), n)
    assert len(inst.checks) == n * (n - 1)
    first = inst.checks[0]
    assert (first.rank, first.op, first.left_init, first.right_init) == (0, "==", False, True)
    assert first.left == RegionInst("recv", MiB, 2 * MiB, 0)
    assert first.right == RegionInst("send", 0, MiB, 1)


def test_issuer_block_forks_and_joins() -> None:
    spec = dict(ALLTOALL, kernels=[
        ("exchange", 64, None, """
            fence()
            for p in lanes(peers()):
                put(p, dst=recv[me*block : (me+1)*block], src=send[p*block : (p+1)*block],
                    queue=0)
                quiet(p)
            barrier()
        """),
        ("second", 32, None, "fence()"),
    ])
    inst = ok(build(spec), 4)
    ops = inst.ranks[2]
    assert kinds(ops) == ["fence"] + ["put", "quiet"] * 3 + ["barrier", "fence"]
    assert [ops[i].preds for i in (1, 3, 5)] == [(0,), (0,), (0,)]  # every lane follows the fence
    assert ops[7].preds == (2, 4, 6)  # the barrier joins the last op of every lane
    assert ops[7].issuer == Issuer(block=0)
    assert (ops[8].preds, ops[8].kernel) == ((7,), 1)  # the next kernel follows the frontier


def test_issuer_that_issues_nothing_leaves_frontier() -> None:
    inst = ok(one_kernel("""
        fence()
        for x in lanes(range(4)):
            if x == 2:
                copy(dst=buf[0:8], src=buf[8:16])
        barrier()
        for x in lanes(range(4)):
            pass
        fence()
    """), 2)
    ops = inst.ranks[0]
    assert kinds(ops) == ["fence", "copy", "barrier", "fence"]
    assert ops[1].issuer == Issuer(lane=2) and ops[1].preds == (0,)
    assert ops[2].preds == (1,)
    assert ops[3].preds == (2,)  # an issuer block where nobody issued changes nothing


# ============================================================================= striped_put, queues


def test_striped_put_queues_auto_gives_one_queue_per_warp() -> None:
    inst = ok(build(STRIPED_PUT), 2)
    assert inst.queues == 4
    puts = inst.ranks[0]
    assert kinds(puts) == ["put"] * 4
    assert [o.issuer for o in puts] == [Issuer(block=0, warp=w) for w in range(4)]
    assert [o.queue for o in puts] == [0, 1, 2, 3]
    assert [o.dst for o in puts] == [RegionInst("dst", w * 2 * MiB, (w + 1) * 2 * MiB, 1)
                                     for w in range(4)]
    assert all(o.preds == () for o in puts)
    assert [o.group for o in puts] == [0, 1, 2, 3] and {o.lanes_in_group for o in puts} == {1}
    waits = inst.ranks[1]
    assert [(o.kind, o.peer, o.queue) for o in waits] == [("wait_signal", 0, w) for w in range(4)]
    assert [o.preds for o in waits] == [(), (0,), (1,), (2,)]
    assert len(inst.checks) == 1 and inst.checks[0].right == RegionInst("src", 0, 8 * MiB, 0)


def test_queues_auto_is_capped_at_8() -> None:
    body = STRIPED_PUT["kernels"][0][3]  # type: ignore[index]
    p = build(STRIPED_PUT, params={"stripe": 64, "stripes": 16},
              kernels=[("push", 1024, None, body)])
    inst = ok(p, 2)
    assert inst.queues == 8
    assert [o.queue for o in inst.ranks[0]] == [w % 8 for w in range(16)]


def test_queues_auto_counts_lanes_by_hardware_warp() -> None:
    p = one_kernel("""
        for x in lanes(range(70)):
            put(1 - me, dst=big[x*8 : x*8 + 8], src=big[x*8 : x*8 + 8])
    """, threads=96, queues=None)
    inst = ok(p, 2)
    assert inst.queues == 3  # threads 0-31, 32-63 and 64-69: three warps toward the peer
    ops = inst.ranks[0]
    assert [ops[i].queue for i in (0, 31, 32, 63, 64, 69)] == [0, 0, 1, 1, 2, 2]
    assert [ops[i].group for i in (0, 31, 32, 69)] == [0, 0, 1, 2]
    assert [ops[i].lanes_in_group for i in (0, 32, 64)] == [32, 32, 6]


def test_explicit_queue_count_round_robin_and_blocks() -> None:
    p = one_kernel("""
        for b in blocks(range(3)):
            put(1 - me, dst=buf[0:8], src=buf[0:8])
            for w in warps(range(2)):
                put(1 - me, dst=buf[8:16], src=buf[8:16])
                for x in lanes(range(2)):
                    commit(1 - me)
    """, queues=4)
    inst = ok(p, 2)
    assert inst.kernels[0].blocks == 3  # the grid is the `blocks` range
    ops = inst.ranks[0]
    leaders = [o for o in ops if o.issuer.warp is None]
    assert [(o.issuer.block, o.queue) for o in leaders] == [(0, 0), (1, 1), (2, 2)]
    warps = [o for o in ops if o.kind == "put" and o.issuer.warp is not None]
    assert [(o.issuer.block, o.issuer.warp, o.queue) for o in warps] == [
        (0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3), (2, 0, 0), (2, 1, 1)]
    lanes = [o for o in ops if o.kind == "commit"]
    assert lanes[2].issuer == Issuer(block=0, warp=1, lane=32)
    assert lanes[3].issuer == Issuer(block=0, warp=1, lane=33)
    assert [o.queue for o in lanes] == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1]
    assert [o.lanes_in_group for o in lanes] == [2] * 12
    assert len({o.group for o in lanes}) == 6


def test_wait_signal_without_queue() -> None:
    inst = ok(one_kernel("wait_signal(1 - me)"), 2)
    assert inst.ranks[0][0].queue == 0
    p = one_kernel("""
        fence()
        wait_signal(1 - me)
        barrier()
    """, queues=2)
    inst, diags = errors(p, 2)
    d = only(diags, "E002")
    assert d.message == "`wait_signal` needs `queue=` when the protocol has 2 queues"
    assert d.help == "add `queue=...`"
    assert d.span is not None and d.span.text == "wait_signal(1 - me)"
    assert "on every rank" in d.notes
    assert inst is not None
    assert kinds(inst.ranks[0]) == ["fence", "barrier"]
    assert inst.ranks[0][1].preds == (0,)  # the skipped wait's successor follows its predecessor


def test_quiet_forms() -> None:
    inst = ok(one_kernel("""
        quiet()
        quiet(1 - me)
        quiet(1 - me, queue=0)
    """), 2)
    assert [(o.peer, o.queue) for o in inst.ranks[1]] == [(None, None), (0, None), (0, 0)]


# ============================================================================= groups


def test_groups_count_inner_loop_iterations_and_outer_iterations() -> None:
    inst = ok(one_kernel("""
        for i in range(2):
            for x in lanes(range(3)):
                for j in range(x + 1):
                    fence()
    """), 2)
    ops = inst.ranks[0]
    # per outer i: lane 0 issues j=0; lane 1 j=0,1; lane 2 j=0,1,2 -> groups by (i, j)
    assert [(o.issuer.lane, o.group, o.lanes_in_group) for o in ops[:6]] == [
        (0, 0, 3), (1, 0, 3), (1, 1, 2), (2, 0, 3), (2, 1, 2), (2, 2, 1)]
    assert [o.group for o in ops[6:]] == [3, 3, 4, 3, 4, 5]


def test_non_lane_ops_have_groups_of_their_own() -> None:
    inst = ok(one_kernel("""
        for i in range(3):
            fence()
        for w in warps(range(2)):
            fence()
    """), 2)
    assert [(o.group, o.lanes_in_group) for o in inst.ranks[0]] == [(i, 1) for i in range(5)]


# ============================================================================= expressions


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_left_neighbour_uses_floor_modulo(n: int) -> None:
    inst = ok(one_kernel("""
        if nranks > 1:
            put((me + 1) % nranks, dst=buf[0:8], src=buf[0:8], queue=0)
            wait_signal((me - 1) % nranks, queue=0)
    """), n)
    for me, ops in enumerate(inst.ranks):
        assert (ops[0].peer, ops[1].peer) == ((me + 1) % n, (me - 1) % n)
    assert inst.ranks[0][1].peer == n - 1


def test_chained_comparisons_and_python_values() -> None:
    inst = ok(one_kernel("""
        if 0 < me < nranks - 1:
            fence()
        if me == 0 or nranks == 0:
            barrier()
        for i in [7 // -2, -7 % 3, 2 ** 9, abs(-3), min(peers()), max(1, 5, 2), len(ranks()),
                  (me and 5) or 9]:
            copy(dst=big[i + 8 : i + 16], src=big[0:8])
    """), 4)
    assert kinds(inst.ranks[0]) == ["barrier"] + ["copy"] * 8
    assert kinds(inst.ranks[1]) == ["fence"] + ["copy"] * 8
    assert kinds(inst.ranks[3]) == ["copy"] * 8
    starts = [o.dst.start - 8 for o in inst.ranks[1][1:] if o.dst]
    assert starts == [-4, 2, 512, 3, 0, 5, 4, 5]
    assert [o.dst.start - 8 for o in inst.ranks[0][1:] if o.dst] == [-4, 2, 512, 3, 1, 5, 4, 9]


def test_conditional_expression_and_ranges() -> None:
    inst = ok(one_kernel("""
        for i in range(nranks - 1, -1, -2):
            copy(dst=big[i*8 : i*8 + 8], src=big[512 if i > 1 else 0 : 8 + (512 if i > 1 else 0)])
    """), 4)
    assert [o.dst.start for o in inst.ranks[0] if o.dst] == [24, 8]
    assert [o.src.start for o in inst.ranks[0] if o.src] == [512, 0]


# ============================================================================= errors


def test_e002_unknown_parameter_lists_known_ones() -> None:
    inst, diags = errors(build(ALLTOALL), 2, {"blok": 4096})
    d = only(diags, "E002")
    assert inst is None
    assert d.message == "unknown parameter `blok`"
    assert d.span is not None and d.span.text == "protocol t"
    assert d.help == "the parameters of `t` are `block`"
    assert d.notes[-1] == "in the instance nranks=2, blok=4096"


def test_params_override_defaults_and_are_checked() -> None:
    inst = ok(build(ALLTOALL), 2, {"block": 4096})
    assert inst.params == (("block", 4096),) and inst.window_sizes[0] == ("send", 8192)
    _, diags = errors(build(ALLTOALL), 2, {"block": -1})
    assert only(diags, "E002").message == (
        "parameter `block` is a byte count and cannot be negative, not -1")


def test_e002_fixed_team_size() -> None:
    inst, diags = errors(build(STRIPED_PUT), 3)
    d = only(diags, "E002")
    assert inst is None and d.message == "the team is fixed at 2 ranks, not 3"
    assert d.help == "instantiate with `--ranks 2`, or write `team lsa` to allow any size"


def test_e002_queue_count_and_nesting() -> None:
    _, diags = errors(one_kernel("fence()", queues=0), 2)
    assert only(diags, "E002").message == "`queues` must be at least 1, not 0"
    inst, diags = errors(one_kernel("""
        if me == 0:
            for b in blocks(range(2)):
                fence()
        for x in lanes(range(2)):
            for w in warps(range(2)):
                fence()
        barrier()
    """), 2)
    assert [(d.code, d.message) for d in diags] == [
        ("E002", "`blocks` must be outermost"),
        ("E002", "`warps` cannot be nested inside `lanes`"),
    ]
    assert diags[1].labels[1].message == "inside this `lanes` block"
    assert inst is not None and kinds(inst.ranks[1]) == ["barrier"]


def test_e003_region_out_of_bounds() -> None:
    inst, diags = errors(one_kernel("""
        fence()
        copy(dst=buf[96:128], src=big[0:32])
        barrier()
    """), 2)
    d = only(diags, "E003")
    assert d.message == "region `buf[96:128]` is outside window `buf` of 64 bytes"
    assert d.span is not None and d.span.text == "buf[96:128]"
    assert d.labels[0].message == "ends 64 bytes past the end of the window"
    assert d.notes == ("with nranks=2, me=0", "on every rank", "in the instance nranks=2")
    assert inst is not None and kinds(inst.ranks[0]) == ["fence", "barrier"]
    assert inst.ranks[0][1].preds == (0,)


def test_e003_negative_and_empty_regions() -> None:
    _, diags = errors(one_kernel("copy(dst=buf[8:8], src=buf[0:0])"), 2)
    assert [d.message for d in diags] == ["region `buf[8:8]` is empty",
                                          "region `buf[0:0]` is empty"]
    assert diags[0].labels[0].message == "starts where it ends"
    _, diags = errors(one_kernel("copy(dst=buf[-8:0], src=buf[16:8])"), 2)
    assert [(d.code, d.message, d.labels[0].message) for d in diags] == [
        ("E003", "region `buf[-8:0]` is outside window `buf` of 64 bytes",
         "starts 8 bytes before the window"),
        ("E003", "region `buf[16:8]` is empty", "ends at 8, before 16"),
    ]


def test_e003_length_mismatch_labels_both_regions() -> None:
    _, diags = errors(one_kernel("put(1 - me, dst=buf[0:16], src=big[0:32], queue=0)"), 2)
    d = only(diags, "E003")
    assert d.message == "`dst` and `src` differ in length: 16 and 32 bytes"
    assert [(lb.span.text, lb.message, lb.primary) for lb in d.labels] == [
        ("buf[0:16]", "`dst` is 16 bytes", True), ("big[0:32]", "`src` is 32 bytes", False)]


def test_e003_window_size_and_ensure() -> None:
    inst, diags = errors(one_kernel("fence()", windows={"buf": "nranks - 2"}), 2)
    assert inst is None
    assert only(diags, "E003").message == "window `buf` must have a positive size, not 0"
    _, diags = errors(one_kernel("fence()", ensure="buf[0:8] == init(big @ 0)[0:16]"), 2)
    assert only(diags, "E003").message == "the two sides of `==` differ in length: 8 and 16 bytes"


def test_e004_division_by_zero_names_the_bindings() -> None:
    inst, diags = errors(one_kernel("""
        for p in peers():
            copy(dst=buf[0 : 64 // (p - 1)], src=buf[0:8])
    """), 3)
    d = diags[0]
    assert (d.code, d.message) == ("E004", "division by zero")
    assert d.span is not None and d.span.text == "64 // (p - 1)"
    assert d.labels[0].message == "`p - 1` is 0"
    assert d.notes[0] == "with nranks=3, me=0, p=1"
    assert d.notes[1] == "on ranks 0, 2"
    assert inst is not None  # only the bad op instances are skipped


def test_e004_bad_types_point_at_the_operand() -> None:
    cases = {
        "for i in range(peers()):\n    fence()": ("`range` must be an integer, not a sequence",
                                                    "peers()"),
        "for i in 3:\n    fence()": ("`for` needs a sequence, not an integer", "3"),
        "for i in range(len(3)):\n    fence()": ("`len` needs a sequence, not an integer", "3"),
        "put(peers(), dst=buf, src=buf)": ("the peer must be an integer, not a sequence",
                                           "peers()"),
        "copy(dst=buf[0:2 ** -1], src=buf[0:8])": ("`**` with a negative exponent", "2 ** -1"),
        "copy(dst=buf[0:2 ** 70], src=buf[0:8])": ("the result of `**` does not fit in 64 bits",
                                                   "2 ** 70"),
        "if ranks() < 3:\n    fence()": ("cannot compare a sequence with an integer using `<`",
                                         "ranks() < 3"),
        "for i in range(min([])):\n    fence()": ("`min` of an empty sequence", "[]"),
        "for i in range(0, 4, 0):\n    fence()": ("`range` step must not be zero", "0"),
    }
    for text, (message, where) in cases.items():
        _, diags = errors(one_kernel(text), 2)
        d = only(diags, "E004")
        assert d.message == message, text
        assert d.span is not None and d.span.text == where, text
        assert d.notes[0].startswith("with nranks=2, me=0"), text


def test_e004_window_size_must_not_use_me() -> None:
    inst, diags = errors(one_kernel("fence()", windows={"buf": "64 * (me + 1)"}), 2)
    d = only(diags, "E004")
    assert inst is None
    assert d.message == "window sizes are symmetric: must not depend on `me`"
    assert d.span is not None and d.span.text == "me"
    assert d.notes == ("with nranks=2", "in the instance nranks=2")


def test_e006_loop_unrolling_limit() -> None:
    inst, diags = errors(one_kernel("""
        for i in range(1000):
            for j in range(1000):
                fence()
    """), 2)
    d = only(diags, "E006")
    assert inst is None
    assert d.message == f"this loop unrolls to more than {MAX_OP_INSTANCES:,} op instances"
    assert d.span is not None and d.span.text.startswith("for i in range(1000)")
    assert d.help is not None and "--limit op-instances=N" in d.help


def test_e006_limits_are_raised_and_lowered() -> None:
    from ccogen.limits import Limits

    protocol = one_kernel("""
        for i in range(100):
            fence()
    """)
    inst, diags = instantiate(protocol, 2, {}, Limits(op_instances=150))
    assert inst is None and only(diags, "E006")
    inst, diags = instantiate(protocol, 2, {}, Limits(op_instances=200))
    assert inst is not None
    inst, diags = instantiate(protocol, 3, {}, Limits(ranks=2))
    d = only(diags, "E006")
    assert inst is None and d.message == "a team of 3 ranks is over the limit of 2"
    assert d.help == "raise the limit with `--limit ranks=3`"


def test_range_bound_past_64_bits_is_a_diagnostic() -> None:
    _, diags = errors(one_kernel("""
        for i in range(100000000000000000000000):
            fence()
    """), 2)
    d = only(diags, "E004")
    assert d.message == "`range` of 100,000,000,000,000,000,000,000 elements is too long to unroll"
    _, diags = errors(one_kernel("""
        for i in range(0, -100000000000000000000000, -3):
            fence()
    """), 2)
    assert only(diags, "E004").message.startswith("`range` of 33,333,333,333,333,333,333,334 ")


def test_e005_launch_sizes() -> None:
    inst, diags = errors(one_kernel("fence()", threads=2048), 2)
    assert inst is None
    d = only(diags, "E005")
    assert d.message == "kernel `k` has `threads=2048`, over the device limit of 1024"
    _, diags = errors(one_kernel("fence()", threads=0, blocks=0), 2)
    assert [d.message for d in diags] == ["kernel `k` needs `threads=` of at least 1, not 0",
                                          "kernel `k` needs `blocks=` of at least 1, not 0"]


def test_e005_too_many_lanes_warps_and_blocks() -> None:
    cases = {
        "for x in lanes(range(65)):\n    fence()":
            "`lanes` runs 65 lanes, but kernel `k` has `threads=64`",
        "for w in warps(range(3)):\n    fence()":
            "`warps` runs 3 warps (96 threads), but kernel `k` has `threads=64`",
        "for w in warps(range(2)):\n    for x in lanes(range(33)):\n        fence()":
            "`lanes` inside `warps` runs 33 lanes, but a warp has 32",
    }
    for text, message in cases.items():
        inst, diags = errors(one_kernel(text), 2)
        d = only(diags, "E005")
        assert d.message == message
        assert d.span is not None and d.span.text.startswith("range(")
        assert inst is not None and inst.op_count == 0
    _, diags = errors(one_kernel("for b in blocks(range(5)):\n    fence()", blocks=4), 2)
    assert only(diags, "E005").message == "`blocks` runs 5 blocks, but kernel `k` has `blocks=4`"
    _, diags = errors(one_kernel("fence()", threads="64 * (me + 1)"), 2)
    assert only(diags, "E004").message == "launch sizes are symmetric: must not depend on `me`"


def test_e010_peer_outside_team_and_me_as_peer() -> None:
    inst, diags = errors(one_kernel("""
        for p in range(2):
            put(nranks + p, dst=buf, src=buf, queue=0)
        put(5, dst=buf, src=buf, queue=0)
        quiet(me)
        wait_signal(me, queue=0)
    """), 4)
    assert [d.code for d in diags] == ["E010"] * 3
    messages = [d.message for d in diags]
    # the two iterations of the loop are one mistake: one finding, the other counted
    assert messages[0] == "peer `nranks + p` is 4, outside the team of 4 ranks"
    assert ("1 more finding here differs only in the numbers (other ranks or iterations)"
            in diags[0].notes)
    assert messages[1] == "peer 5 is outside the team of 4 ranks"
    assert messages[2] == "`me` used as a peer"
    assert diags[2].span is not None and diags[2].span.text == "me"
    assert "on every rank" in diags[2].notes
    assert inst is not None
    assert [(o.kind, o.peer) for o in inst.ranks[0]] == [("wait_signal", 0)]  # own slot is fine


def test_e010_me_as_peer_of_a_put_and_ensure_rank() -> None:
    _, diags = errors(one_kernel("""
        for p in ranks():
            put(p, dst=buf, src=buf, queue=0)
    """), 3)
    d = only(diags, "E010")
    assert d.message == "`me` used as a peer"
    assert d.labels[0].message == "this is rank 0, `me` itself"
    assert d.notes[:2] == ("with nranks=3, me=0, p=0", "on every rank")
    _, diags = errors(one_kernel("fence()", ensure="buf == init(buf @ (me + 1))"), 2)
    d = only(diags, "E010")
    assert d.message == "rank `me + 1` is 2, outside the team of 2 ranks"
    assert "on rank 1" in d.notes


def test_findings_that_differ_only_in_numbers_are_merged() -> None:
    _, diags = errors(one_kernel("""
        for i in range(10):
            copy(dst=buf[64 + i : 72 + i], src=buf[0:8])
    """), 4)
    assert [d.code for d in diags] == ["E003"]
    assert diags[0].message == "region `buf[64:72]` is outside window `buf` of 64 bytes"
    assert "on every rank" in diags[0].notes
    assert ("9 more findings here differ only in the numbers (other ranks or iterations)"
            in diags[0].notes)
    _, diags = errors(one_kernel("""
        for i in range(3):
            copy(dst=buf[64 - 8 * i : 72 - 16 * i], src=buf[0:8])
    """), 2)  # outside, then empty twice: two different mistakes at one place
    assert [d.message for d in diags] == [
        "region `buf[64:72]` is outside window `buf` of 64 bytes", "region `buf[56:56]` is empty"]
    assert ("1 more finding here differs only in the numbers (other ranks or iterations)"
            in diags[1].notes)


# ============================================================================= API helpers


def test_team_sizes() -> None:
    assert team_sizes(build(ALLTOALL)) == [2, 3, 4, 8]
    assert team_sizes(build(ALLTOALL), [5, 6]) == [5, 6]
    assert team_sizes(build(STRIPED_PUT)) == [2]
    fixed = build(ALLTOALL, params={"block": 64, "n": 3}, team="n")
    assert team_sizes(fixed) == [3] and team_sizes(fixed, params={"n": 5}) == [5]


def test_parse_param_value() -> None:
    b, i = ir.ParamType.BYTES, ir.ParamType.INT
    assert parse_param_value("4KiB", b) == 4096
    assert parse_param_value(" 4 KiB ", b) == 4096
    assert parse_param_value("2 MiB", b) == 2 * MiB
    assert parse_param_value("1GiB", b) == 1 << 30
    assert parse_param_value("64 B", b) == 64
    assert parse_param_value("1_024", i) == 1024
    assert parse_param_value("0x10", i) == 16
    assert parse_param_value("0x1B", b) == 27
    assert parse_param_value("-3", i) == -3
    with pytest.raises(ValueError, match="unknown unit `KB`"):
        parse_param_value("4KB", b)
    with pytest.raises(ValueError, match="units are only for `bytes` parameters"):
        parse_param_value("4KiB", i)
    with pytest.raises(ValueError, match="not an integer"):
        parse_param_value("1.5MiB", b)
    with pytest.raises(ValueError, match="cannot be negative"):
        parse_param_value("-4KiB", b)


# ============================================================================= benchmark protocol


def _bench_module() -> object:
    path = REPO / "benchmarks" / "bench_instantiate.py"
    spec = importlib.util.spec_from_file_location("bench_instantiate", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_protocol_is_instantiated_correctly() -> None:
    bench = _bench_module()
    p = bench.build_protocol()  # type: ignore[attr-defined]
    start = time.process_time()
    inst = ok(p, bench.NRANKS)  # type: ignore[attr-defined]
    elapsed = time.process_time() - start  # CPU seconds: load on the machine does not count
    n, iters, chunk = bench.NRANKS, bench.ITERATIONS, bench.CHUNK  # type: ignore[attr-defined]
    assert inst.op_count == n * (iters + 2)
    for me, ops in enumerate(inst.ranks):
        assert kinds(ops) == ["put"] * iters + ["quiet", "wait_signal"]
        i = 1234
        put = ops[i]
        assert (put.peer, put.queue, put.preds) == ((me + 1) % n, 0, (i - 1,))
        assert put.dst == RegionInst("recv", i * chunk, (i + 1) * chunk, (me + 1) % n)
        assert put.src == RegionInst("send", i * chunk, (i + 1) * chunk, me)
        assert ops[-1].peer == (me - 1) % n and ops[-1].expected == iters
    assert elapsed < 5  # generous: the benchmark itself reports the real figure


# ============================================================================= the example library


def test_example_protocols_instantiate_cleanly() -> None:
    syntax = pytest.importorskip("ccogen.syntax")
    files = sorted((REPO / "protocols").glob("*.cco"))
    if not files:
        pytest.skip("no example protocols")
    for path in files:
        try:
            p = syntax.load_ir(path)
        except Exception as exc:  # the parser is developed separately
            pytest.skip(f"{path.name} does not parse: {exc}")
        for n in team_sizes(p):
            inst = ok(p, n, library_params(path))
            assert inst.op_count > 0, path.name
