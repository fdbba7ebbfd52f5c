"""Instantiating run-time values (ccogen/instantiate/runtime.py): symbolic footprints,
what a `load` reads, bounds from `require`, and concrete instances for given contents."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ccogen.instantiate import instantiate, preconditions, uses_runtime
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt
from ccogen.sim.runtime import contents_with
from ccogen.syntax import load_ir, parse_ir

ROOT = Path(__file__).resolve().parent.parent
A2AV = load_ir(ROOT / "protocols" / "alltoallv.cco")


def test_only_run_time_protocols_are_run_time() -> None:
    assert uses_runtime(A2AV)
    assert not uses_runtime(load_ir(ROOT / "protocols" / "alltoall.cco"))


def test_require_bounds_every_named_element() -> None:
    bounds, memories, params = preconditions(A2AV, 3, {"cap": 8})
    assert bounds[("counts", 1, 2)] == (0, 8)
    assert len(bounds) == 9 and params["cap"] == 8 and memories["recv"].count == 24


def test_a_symbolic_instance_holds_footprints_and_exact_forms() -> None:
    inst, diags = instantiate(A2AV, 3, {"cap": 8})
    assert inst is not None and not [d for d in diags if d.is_error]
    assert inst.runtime == "symbolic"
    puts = [op for op in inst.ranks[0] if op.kind is OpKind.PUT and op.queue == 1]
    assert [(op.peer, op.dst.start, op.dst.stop) for op in puts] == [(1, 0, 16), (2, 0, 16)]  # type: ignore[union-attr]
    start, stop = puts[0].dst.runtime  # type: ignore[misc, union-attr]
    assert start == 0 and isinstance(stop, Rt) and stop.text() == "2 * counts@0[1]"
    # `got[p]` in `ensure` is the count its sender put there: followed back to `counts`
    assert inst.unchecked == 3 * 3 and any(c.runtime for c in inst.checks)


def test_a_concrete_instance_takes_the_contents_lengths() -> None:
    counts = [np.array([0, 3, 8]), np.array([1, 0, 2]), np.array([5, 5, 0])]
    contents = contents_with(A2AV, 3, {"cap": 8}, {"counts": counts})
    inst, diags = instantiate(A2AV, 3, {"cap": 8}, contents=contents)
    assert inst is not None and not [d for d in diags if d.is_error]
    assert inst.runtime == "concrete" and inst.unchecked == 0
    sizes = {(op.rank, op.peer): op.dst.size for ops in inst.ranks for op in ops  # type: ignore[union-attr]
             if op.kind is OpKind.PUT and op.queue == 1}
    assert sizes == {(0, 1): 6, (0, 2): 16, (1, 0): 2, (1, 2): 4, (2, 0): 10, (2, 1): 10}
    # the ensure line of rank 1 about rank 2 compares got[2] = counts@2[1] = 5 elements
    lengths = {c.left.size for c in inst.checks if c.rank == 1 and c.left.window == "recv"
               and c.left.start >= 2 * 16}
    assert lengths == {10}


def test_a_run_time_length_pinned_to_zero_by_require_is_no_empty_region() -> None:
    # at one rank every token goes to rank 0: `require` pins `hit` to 1, and combine's
    # row-clearing copy `back[row + hit * hidden : row + hidden]` has length 0 for every
    # token -- a run-time length that is 0 here, not an empty region written as such
    combine = load_ir(ROOT / "protocols" / "moe_combine.cco")
    inst, diags = instantiate(combine, 1, {"tokens": 4, "hidden": 8, "k": 1})
    assert inst is not None and not [d for d in diags if d.is_error], diags
    clears = [op for op in inst.ranks[0] if op.kind is OpKind.COPY and op.dst.window == "back"  # type: ignore[union-attr]
              and op.dst.size == 0]  # type: ignore[union-attr]
    assert len(clears) == 4


def test_an_empty_region_of_static_bounds_stays_e003() -> None:
    text = ('protocol p():\n    team lsa\n    window w: u8[16]\n    buffer b: i32[1]\n'
            '    require:\n        0 <= b[0] < 2\n'
            '    kernel k(threads=32):\n'
            '        n = 4\n'
            '        m = load(b[0])\n'
            '        copy(dst=w[n:n], src=w[0:0 + m])\n')
    _inst, diags = instantiate(parse_ir(text, "p.cco"), 1, {})
    empty = [d for d in diags if d.code == "E003"]
    assert [d.message for d in empty] == ["region `w[4:4]` is empty"]


def test_require_loops_bound_every_element_as_families_and_deferred_sums() -> None:
    """`for i in range(tokens * k): 0 <= topk[i] < nranks` is one family of bounds, and
    `counts[p] == sum(...)` is evaluated when asked for: the bounds are those of every
    element evaluated one by one (topk in [0, nranks - 1], counts in [0, tokens])."""
    from ccogen.instantiate import preconditions
    from ccogen.syntax import parse_ir

    text = (
        "protocol routed(tokens: int = 6, k: int = 2):\n"
        "    team lsa\n"
        "    buffer topk: i32[tokens * k]\n"
        "    buffer counts: i32[nranks]\n"
        "    window out: u8[64]\n"
        "    require:\n"
        "        for i in range(tokens * k):\n"
        "            0 <= topk[i] < nranks\n"
        "        for p in ranks():\n"
        "            counts[p] == sum(max(topk[t * k + j] == p for j in range(k)) "
        "for t in range(tokens))\n"
        "    kernel go(threads=32):\n"
        "        barrier()\n")
    bounds, _, _ = preconditions(parse_ir(text, "routed.cco"), 3)
    assert {c: b for c, b in bounds.items() if c[0] == "topk"} == {
        ("topk", r, i): (0, 2) for r in range(3) for i in range(12)}
    assert {c: b for c, b in bounds.items() if c[0] == "counts"} == {
        ("counts", r, p): (0, 6) for r in range(3) for p in range(3)}


def test_a_deferred_require_bound_that_fails_is_reported_at_its_line() -> None:
    from ccogen.driver import check_text

    text = (
        "protocol broken(n: int = 4):\n"
        "    team lsa(2)\n"
        "    buffer counts: i32[2]\n"
        "    window out: u8[64]\n"
        "    require:\n"
        "        for p in ranks():\n"
        "            counts[p] == sum(t // (t - t) for t in range(n))\n"
        "    kernel go(threads=32):\n"
        "        m = load(counts[0])\n"
        "        copy(dst=out[0:m], src=out[8:8 + m])\n")
    found = {(d.code, d.span.line) for d in check_text(text, "broken.cco").diagnostics
             if d.span is not None}
    assert ("E004", 7) in found, found
