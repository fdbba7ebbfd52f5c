"""Run-time peers at instantiation (ccogen/instantiate/unroll.py, language reference §14,
"Run-time peers"): one op instance per candidate peer that `require` allows, each moving
its bytes only when the peer read is that candidate (code generation:
tests/codegen/test_rtpeer.py)."""

from __future__ import annotations

import numpy as np

from ccogen.instantiate import instantiate
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt
from ccogen.sim.runtime import contents_with
from ccogen.syntax import parse_ir

SOURCE = """\
protocol route(n: int = 16):
    team lsa(4)
    queues 1
    between_launches: host_sync
    window out: u8[4 * n]
    buffer data: u8[n]
    buffer dest: i32[1]

    require:
        1 <= dest[0] <= 2

    kernel k(threads=32):
        put(load(dest[0]), dst=out[me * n : me * n + n], src=data[0:n], queue=0)
        lanes p in peers():
            signal(p, queue=0)
        lanes p in peers():
            wait_signal(p, queue=0)
"""
PROTOCOL = parse_ir(SOURCE, "route.cco")


def _transfers(ops: tuple[object, ...]) -> list[object]:
    return [o for o in ops if o.kind in (OpKind.PUT, OpKind.COPY)]  # type: ignore[attr-defined]


def test_every_rank_is_a_candidate_and_those_the_bound_excludes_move_nothing() -> None:
    inst, diags = instantiate(PROTOCOL, 4, {})
    assert inst is not None and not [d for d in diags if d.is_error]
    r0 = _transfers(inst.ranks[0])  # rank 0: a copy to itself, then puts to 1, 2 and 3
    assert [(o.kind, o.peer) for o in r0] == [(OpKind.COPY, None), (OpKind.PUT, 1),  # type: ignore[attr-defined]
                                              (OpKind.PUT, 2), (OpKind.PUT, 3)]
    assert [o.rt_peer.first for o in r0] == [False, True, False, False]  # type: ignore[attr-defined]
    # `1 <= dest[0] <= 2`: ranks 0 and 3 get a static empty region, 1 and 2 the row
    assert [(o.dst.start, o.dst.stop, o.dst.runtime is None) for o in r0] == [  # type: ignore[attr-defined]
        (0, 0, True), (0, 16, False), (0, 16, False), (0, 0, True)]
    start, stop = r0[1].dst.runtime  # type: ignore[attr-defined]
    assert start == 0 and isinstance(stop, Rt) and stop.lo == 0 and stop.hi == 16
    # on rank 1 the candidate 1 is me (a local copy); the first remote one in the bound, 2
    r1 = _transfers(inst.ranks[1])
    assert [o.rt_peer.first for o in r1] == [False, False, True, False]  # type: ignore[attr-defined]
    assert r1[1].kind is OpKind.COPY and r1[1].dst.runtime is not None  # type: ignore[attr-defined]


def test_a_concrete_instance_moves_bytes_to_the_drawn_peer_only() -> None:
    dest = [np.array([v], dtype=np.int32) for v in (2, 1, 1, 2)]
    contents = contents_with(PROTOCOL, 4, {}, {"dest": dest})
    inst, _ = instantiate(PROTOCOL, 4, {}, contents=contents)
    assert inst is not None
    for rank, want in enumerate((2, 1, 1, 2)):
        moved = [(o.peer if o.kind is OpKind.PUT else rank, o.dst.size)  # type: ignore[attr-defined]
                 for o in _transfers(inst.ranks[rank])]
        assert len(moved) == 4  # every rank a candidate: the same ops at every draw
        assert [p for p, size in moved if size] == [want]
