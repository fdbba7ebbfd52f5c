"""Run-time peers at instantiation (ccogen/instantiate/unroll.py, language reference §14,
"Run-time peers"): one op instance per candidate peer that `require` allows, each moving
its bytes only when the peer read is that candidate (code generation:
tests/codegen/test_rtpeer.py)."""

from __future__ import annotations

import numpy as np

from ccogen.driver import check_text
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


NARROW = """\
protocol narrow(n: int = 16):
    team lsa(3)
    queues 1
    between_launches: host_sync
    window out: u8[n]
    buffer data: u8[n]
    buffer dest: i32[1]

    require:
        dest[0] == 1

    kernel k(threads=32):
        if me == 0:
            put(load(dest[0]), dst=out[0:n], src=data[0:n], queue=0)
            lanes p in peers():
                signal(p, queue=0)
        elif me == 1:
            put(2, dst=out[0:n], src=data[0:n], queue=0, signal="remote")
        if me != 0:
            wait_signal(0, queue=0)
        if me == 2:
            wait_signal(1, queue=0)
"""


def test_a_rank_the_bound_excludes_is_never_written() -> None:
    # rank 1 writes rank 2's `out` too; `require` keeps rank 0's put off rank 2: no race
    result = check_text(NARROW, "narrow.cco")
    assert [d.code for d in result.diagnostics if d.is_error] == []
    widened = check_text(NARROW.replace("dest[0] == 1", "1 <= dest[0] <= 2"), "narrow.cco")
    assert "E036" in {d.code for d in widened.diagnostics}
