"""Bytes per link per epoch for every library protocol (counted by hand from the .cco)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.bench.traffic import Traffic, traffic_of
from ccogen.instantiate import instantiate
from ccogen.syntax import load_ir
from tests.helpers import RUNTIME_PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
KIB, MIB = 1 << 10, 1 << 20


def traffic(name: str, nranks: int = 2, **params: int) -> Traffic:
    instance, diags = instantiate(load_ir(ROOT / "protocols" / f"{name}.cco"), nranks, params)
    assert instance is not None, diags
    return traffic_of(instance)


# protocol -> (links at 2 ranks with default parameters, both directions used)
EXPECTED = {
    "alltoall": ({(0, 1): MIB + 16, (1, 0): MIB + 16}, True),      # a block, a 16 B credit
    "alltoall_rotating": ({(0, 1): MIB, (1, 0): MIB}, True),       # the copy-out is local
    "pingpong": ({(0, 1): 4 * 8, (1, 0): 4 * 8 + 16}, True),  # 4 rounds of 8 B, a 16 B credit
    # the one-feature examples: each writer's 16-byte credit the other way (issue 30)
    "ring_allgather": ({(0, 1): 256 * KIB + 16, (1, 0): 256 * KIB + 16}, True),
    "aggregated_batch": ({(0, 1): 8 * 256 * KIB, (1, 0): 16}, True),  # 8 pieces, one commit
    "lane_ship": ({(0, 1): 8 * 256 * KIB, (1, 0): 16}, True),
    "counted_gather": ({(1, 0): MIB, (0, 1): 16}, True),           # rank 0's copy is local
    "two_queue_pipeline": ({(0, 1): 8 * MIB, (1, 0): 16}, True),   # the unpacking copies too
    "pack_then_send": ({(0, 1): 64 * 4 * KIB, (1, 0): 16}, True),  # packing is local
    "counted_broadcast": ({(0, 1): 8 * MIB, (1, 0): 16}, True),
    "striped_put": ({(0, 1): 4 * 2 * MIB, (1, 0): 16}, True),
    # language v2: a `reduce` loading a peer's region moves it over the link
    "allreduce_oneshot": ({(0, 1): 128 * KIB, (1, 0): 128 * KIB}, True),  # 64Ki bf16 each way
    "allreduce_oneshot_rotating": ({(0, 1): 128 * KIB, (1, 0): 128 * KIB}, True),  # staging local
    "allreduce_twoshot": ({(0, 1): 64 * KIB, (1, 0): 64 * KIB}, True),  # a chunk loaded + put
    "reduce_scatter_ring": ({(0, 1): MIB, (1, 0): MIB}, True),      # one step of 256Ki f32
    "broadcast_pipelined": ({(0, 1): 8 * 128 * KIB}, False),        # 8 chunks of 64Ki bf16
    # f32 partial sums of 256Ki elements (1 MiB), then the bf16 chunk (512 KiB), each way
    "allreduce_ring_bf16": ({(0, 1): MIB + 512 * KIB, (1, 0): MIB + 512 * KIB}, True),
}


def test_every_library_protocol_is_counted() -> None:
    # run-time amounts (language v2 §3) have no static traffic: not counted here
    assert set(EXPECTED) == {p.stem for p in (ROOT / "protocols").glob("*.cco")
                             if p.stem not in RUNTIME_PROTOCOLS}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_library_protocol_links(name: str) -> None:
    links, both = EXPECTED[name]
    t = traffic(name)
    assert {(s, d): b for s, d, b in t.links} == links
    assert t.bidirectional is both
    assert t.per_direction == max(links.values())
    assert t.total == sum(links.values()) == sum(t.sent(r) for r in range(2))


def test_alltoall_at_four_ranks_one_block_per_pair() -> None:
    t = traffic("alltoall", 4, block=64 * KIB)
    # each pair: a block and the receiver's 16-byte credit the other way
    assert len(t.links) == 12 and {b for _, _, b in t.links} == {64 * KIB + 16}
    assert t.per_direction == 64 * KIB + 16 and t.per_peer == 64 * KIB + 16
    assert all(t.received(r) == 3 * (64 * KIB + 16) for r in range(4))


def test_ring_allgather_at_four_ranks_forwards_three_chunks_per_link() -> None:
    t = traffic("ring_allgather", 4, chunk=KIB)
    # three chunks to the right, a 16-byte credit to the left
    assert {(s, d): b for s, d, b in t.links} == {
        **{(r, (r + 1) % 4): 3 * KIB for r in range(4)},
        **{((r + 1) % 4, r): 16 for r in range(4)}}
    assert t.per_direction == 3 * KIB
    assert t.bidirectional


def test_gather_and_broadcast_at_four_ranks() -> None:
    gather = traffic("counted_gather", 4, block=KIB)
    # rank 0 sends each sender a 16-byte credit; each receiver sends the root one
    assert gather.received(0) == 3 * KIB and gather.per_direction == KIB
    assert gather.sent(0) == 3 * 16
    bcast = traffic("counted_broadcast", 4, size=KIB)
    assert bcast.sent(0) == 3 * KIB and all(bcast.received(p) == KIB for p in (1, 2, 3))
    assert bcast.received(0) == 3 * 16


def test_sizes_follow_the_parameters() -> None:
    assert traffic("alltoall", block=8).per_direction == 8 + 16  # a block, a credit
    # 64 rounds of 16 B each way, and rank 1's 16-byte credit (back to back, issue 30)
    assert traffic("pingpong", size=16, rounds=64).per_direction == 64 * 16 + 16


def test_empty_traffic() -> None:
    t = Traffic(1, ())
    assert t.per_direction == 0 and t.total == 0 and t.per_peer == 0 and not t.bidirectional
