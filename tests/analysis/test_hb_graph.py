"""The happens-before graph: events, edges, reachability, cycles (`ccogen.analysis.hb_graph`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import networkx as nx
import pytest

from ccogen.analysis import analyse
from ccogen.analysis.events import EdgeKind, Event, EventKind
from ccogen.analysis.hb_graph import HBGraph
from ccogen.instantiate import instantiate, team_sizes
from ccogen.ir.instance import Instance
from ccogen.syntax import parse_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]


def instance(body: str, *, nranks: int = 2, head: str = "", windows: str = "") -> Instance:
    """A protocol around one kernel `body` (4-space indented inside the kernel)."""
    wins = windows or "window send: 4 KiB\nwindow recv: 4 KiB\nwindow out: 4 KiB"
    decl = "\n".join("    " + x for x in textwrap.dedent(head + "\n" + wins).splitlines()
                     if x.strip())
    inner = "\n".join("        " + x for x in textwrap.dedent(body).strip("\n").splitlines())
    text = f"protocol t():\n    team lsa({nranks})\n{decl}\n\n    kernel k(threads=64):\n{inner}\n"
    inst, diags = instantiate(parse_ir(text, "t.cco"), nranks)
    assert inst is not None and not [d for d in diags if d.is_error], diags
    return inst


def graph(body: str, **kw: object) -> HBGraph:
    return HBGraph(instance(body, **kw))  # type: ignore[arg-type]


def ev(g: HBGraph, kind: EventKind, rank: int, op: int) -> int:
    e = g.event(kind, rank, op)
    assert e is not None, (kind, rank, op)
    return e


PUT_WAIT = """
    if me == 0:
        put(1, dst=recv, src=send, queue=0, signal="remote")
        quiet(1)
    else:
        wait_signal(0, queue=0)
        copy(dst=out, src=recv)
"""


def test_put_events_and_their_order() -> None:
    g = graph(PUT_WAIT)
    issue, read, land, rsig = (ev(g, k, 0, 0) for k in
                               (EventKind.ISSUE, EventKind.READ, EventKind.LAND, EventKind.RSIG))
    assert g.hb(issue, read) and g.hb(read, land) and g.hb(land, rsig)
    assert g.event_at(land) == Event(EventKind.LAND, 0, 0, 1)  # lands on rank 1
    assert g.edge_kind(land, rsig) is EdgeKind.TRANSFER


def test_a_wait_orders_the_data_before_what_follows_it() -> None:
    g = graph(PUT_WAIT)
    land = ev(g, EventKind.LAND, 0, 0)
    done = ev(g, EventKind.DONE, 1, 0)
    copy = ev(g, EventKind.ISSUE, 1, 1)
    assert g.hb(land, done) and g.hb(land, copy) and g.hb(land, g.end(1))
    assert g.edge_kind(ev(g, EventKind.RSIG, 0, 0), done) is EdgeKind.SIGNAL


def test_quiet_orders_the_read_not_the_landing() -> None:
    g = graph(PUT_WAIT)
    done = ev(g, EventKind.DONE, 0, 1)
    assert g.hb(ev(g, EventKind.READ, 0, 0), done)
    assert not g.hb(ev(g, EventKind.LAND, 0, 0), done)
    assert not g.hb(ev(g, EventKind.LAND, 0, 0), g.end(0))


def test_one_queue_completes_in_order_two_queues_do_not() -> None:
    body = """
        if me == 0:
            put(1, dst=recv[0 : 64], src=send[0 : 64], queue={q})
            put(1, dst=recv[64 : 128], src=send[64 : 128], queue=0, signal="remote")
    """
    same = graph(body.replace("{q}", "0"))
    assert same.hb(ev(same, EventKind.LAND, 0, 0), ev(same, EventKind.READ, 0, 1))
    other = graph(body.replace("{q}", "1"), head="queues 2")
    assert not other.ordered(ev(other, EventKind.LAND, 0, 0), ev(other, EventKind.LAND, 0, 1))


def test_queue_order_across_issuers_whose_issues_are_ordered() -> None:
    g = graph("""
        if me == 0:
            put(1, dst=recv[0 : 64], src=send[0 : 64], queue=0)
            warps w in range(2):
                put(1, dst=recv[64*(w+1) : 64*(w+2)], src=send[0 : 64], queue=0)
    """)
    first = ev(g, EventKind.LAND, 0, 0)
    assert g.hb(first, ev(g, EventKind.READ, 0, 1)) and g.hb(first, ev(g, EventKind.READ, 0, 2))
    assert not g.ordered(ev(g, EventKind.LAND, 0, 1), ev(g, EventKind.LAND, 0, 2))


def test_an_aggregate_op_is_read_only_after_its_commit() -> None:
    g = graph("""
        if me == 0:
            put(1, dst=recv, src=send, queue=0, aggregate=True)
            copy(dst=out, src=send)
            commit(1, queue=0)
    """)
    read, copy, commit = ev(g, EventKind.READ, 0, 0), ev(g, EventKind.ISSUE, 0, 1), \
        ev(g, EventKind.ISSUE, 0, 2)
    assert g.hb(copy, read) and g.hb(commit, read)
    assert g.edge_kind(commit, read) is EdgeKind.RING
    assert g.sure_ringers(0, 0) == [2]


def test_a_later_plain_op_on_the_queue_does_not_ring_it_but_spins_behind_it() -> None:
    # MORI's submitPacket waits for the committed pointer to reach the plain op's slot;
    # only commit moves it past reserved aggregate ops (mori/cco/cco.hpp)
    g = graph("""
        if me == 0:
            put(1, dst=recv[0 : 64], src=send[0 : 64], queue=0, aggregate=True)
            put(1, dst=recv[64 : 128], src=send[64 : 128], queue=0)
            commit(1, queue=0)
    """)
    plain = ev(g, EventKind.ISSUE, 0, 1)
    assert g.edge_kind(plain, ev(g, EventKind.READ, 0, 0)) is None
    assert g.behind_batch == [(0, 1, 0)]
    assert not g.executes(plain) and not g.executes(ev(g, EventKind.ISSUE, 0, 2))


def test_a_plain_op_after_the_commit_of_the_batch_runs() -> None:
    g = graph("""
        if me == 0:
            put(1, dst=recv[0 : 64], src=send[0 : 64], queue=0, aggregate=True)
            commit(1, queue=0)
            put(1, dst=recv[64 : 128], src=send[64 : 128], queue=0)
    """)
    assert g.behind_batch == []
    assert g.hb(ev(g, EventKind.LAND, 0, 0), ev(g, EventKind.READ, 0, 2))


def test_unordered_signals_are_not_necessarily_first() -> None:
    body = """
        if me == 0:
            warps w in range(2):
                put(1, dst=recv[64*w : 64*(w+1)], src=send[0 : 64], queue=0, signal="remote")
        else:
            wait_signal(0, queue=0, expected={e})
    """
    one = graph(body.replace("{e}", "1"))
    done = ev(one, EventKind.DONE, 1, 0)
    assert not any(one.hb(ev(one, EventKind.LAND, 0, i), done) for i in (0, 1))
    two = graph(body.replace("{e}", "2"))
    done = ev(two, EventKind.DONE, 1, 0)
    assert all(two.hb(ev(two, EventKind.LAND, 0, i), done) for i in (0, 1))


def test_the_kth_signal_of_one_queue_is_among_the_first_k() -> None:
    g = graph("""
        if me == 0:
            for i in range(3):
                put(1, dst=recv[64*i : 64*(i+1)], src=send[0 : 64], queue=0, signal="remote")
        else:
            wait_signal(0, queue=0, expected=2)
    """)
    done = ev(g, EventKind.DONE, 1, 0)
    assert g.hb(ev(g, EventKind.LAND, 0, 1), done)
    assert not g.hb(ev(g, EventKind.LAND, 0, 2), done)


def test_counted_writes_are_needed_by_bytes() -> None:
    body = """
        if me != 0:
            put(0, dst=recv[64*me : 64*(me+1)], src=send[0 : 64], queue=0, count=landed)
        else:
            wait_count(landed{e})
    """
    full = graph(body.replace("{e}", ""), nranks=3, head="counter landed")
    done = ev(full, EventKind.DONE, 0, 0)
    assert all(full.hb(ev(full, EventKind.COUNT, r, 0), done) for r in (1, 2))
    part = graph(body.replace("{e}", ", expected=64"), nranks=3, head="counter landed")
    done = ev(part, EventKind.DONE, 0, 0)
    assert not any(part.hb(ev(part, EventKind.COUNT, r, 0), done) for r in (1, 2))


def test_a_group_of_lanes_signals_once_after_every_lane_landed() -> None:
    g = graph("""
        if me == 0:
            lanes l in range(4):
                put(1, dst=recv[64*l : 64*(l+1)], src=send[0 : 64], queue=0, signal="remote")
    """)
    sig = ev(g, EventKind.RSIG, 0, 0)
    assert g.event(EventKind.RSIG, 0, 1) is None
    assert all(g.hb(ev(g, EventKind.LAND, 0, i), sig) for i in range(4))
    assert g.signal_event(0, 3, local=False) == sig


def test_barrier_orders_every_earlier_issue_before_every_later_op() -> None:
    g = graph("""
        if me == 0:
            copy(dst=out, src=send)
        barrier()
        if me == 1:
            copy(dst=out, src=send)
    """)
    assert g.hb(ev(g, EventKind.ISSUE, 0, 0), ev(g, EventKind.ISSUE, 1, 1))
    assert not g.barrier_mismatches


def test_barriers_reached_unequally_are_blocked() -> None:
    g = graph("""
        if me == 0:
            barrier()
    """)
    [m] = g.barrier_mismatches
    assert m.counts == {(0, 0): 1, (1, 0): 0}
    assert not g.executes(ev(g, EventKind.DONE, 0, 0))


def test_fence_orders_landing_across_queues() -> None:
    body = """
        if me == 0:
            put(1, dst=recv[0 : 64], src=send[0 : 64], queue=0)
            {fence}
            put(1, dst=recv[64 : 128], src=send[0 : 64], queue=1)
    """
    g = graph(body.replace("{fence}", "fence()"), head="queues 2")
    assert g.hb(ev(g, EventKind.LAND, 0, 0), ev(g, EventKind.LAND, 0, 2))
    g = graph(body.replace("{fence}", "pass"), head="queues 2")
    assert not g.ordered(ev(g, EventKind.LAND, 0, 0), ev(g, EventKind.LAND, 0, 1))


def test_kernel_boundaries_do_not_complete_transfers() -> None:
    text = textwrap.dedent("""\
        protocol t():
            team lsa(2)
            window a: 64 B
            window b: 64 B
            kernel one(threads=32):
                if me == 0:
                    put(1, dst=b, src=a, queue=0)
            kernel two(threads=32):
                if me == 1:
                    copy(dst=a, src=b)
    """)
    inst, _ = instantiate(parse_ir(text, "t.cco"), 2)
    assert inst is not None
    g = HBGraph(inst)
    assert not g.ordered(ev(g, EventKind.LAND, 0, 0), ev(g, EventKind.ISSUE, 1, 0))


def test_a_wait_for_more_than_is_sent_is_blocked_not_a_cycle() -> None:
    g = graph("""
        if me == 1:
            wait_signal(0, queue=0)
            copy(dst=out, src=recv)
    """)
    done = ev(g, EventKind.DONE, 1, 0)
    assert done in g.blocked
    assert not g.executes(ev(g, EventKind.ISSUE, 1, 1))
    assert g.cycles() == []


def test_wait_first_ring_is_a_cycle_with_one_edge_per_hop() -> None:
    g = graph("""
        wait_signal((me - 1) % nranks, queue=0)
        put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
    """, nranks=3)
    [cycle] = g.cycles()
    kinds = [e.kind for e in cycle]
    assert kinds.count(EdgeKind.SIGNAL) == 3
    assert all(cycle[i].dst == cycle[(i + 1) % len(cycle)].src for i in range(len(cycle)))
    assert not g.executes(ev(g, EventKind.DONE, 0, 0))


def test_networkx_view_has_events_and_edge_kinds() -> None:
    g = graph(PUT_WAIT)
    view = g.nx
    land = Event(EventKind.LAND, 0, 0, 1)
    rsig = Event(EventKind.RSIG, 0, 0, 1)
    assert view.edges[land, rsig]["kind"] is EdgeKind.TRANSFER
    assert nx.has_path(view, land, Event(EventKind.END, 1, -1, 1))
    assert view.nodes[land]["span"] is not None


def _reference(g: HBGraph) -> dict[int, set[int]]:
    ref = nx.DiGraph()
    ref.add_nodes_from(range(len(g)))
    ref.add_edges_from((u, v) for v in range(len(g)) for u in g.preds(v))
    return {v: nx.ancestors(ref, v) for v in ref}


@pytest.mark.parametrize("path", sorted((ROOT / "protocols").glob("*.cco")),
                         ids=lambda p: p.stem)
def test_vector_clocks_agree_with_graph_reachability(path: Path) -> None:
    protocol = parse_ir(path.read_text(encoding="utf-8"), str(path))
    for n in team_sizes(protocol)[:2]:
        inst, _ = instantiate(protocol, n, library_params(path))
        assert inst is not None
        g = analyse(inst).graph
        anc = _reference(g)
        wrong = [(a, b) for b in range(len(g)) for a in range(len(g))
                 if (a in anc[b]) != g.hb(a, b)]
        assert not wrong, [(g.describe(a), g.describe(b)) for a, b in wrong[:5]]


def test_a_wait_after_reset_count_needs_the_bytes_counted_after_the_reset() -> None:
    # the first put's bytes were counted before the reset: the second wait's 64 bytes
    # can only be the second put's
    g = graph("""
        if me == 0:
            put(1, dst=recv[64 : 128], src=send[0 : 64], queue=0, count=c)
            wait_signal(1, queue=0)
            put(1, dst=recv[0 : 64], src=send[64 : 128], queue=0, count=c)
        else:
            wait_count(c, expected=64)
            reset_count(c)
            put(0, dst=out[0 : 16], src=out[16 : 32], queue=0, signal="remote")
            wait_count(c, expected=64)
    """, head="counter c")
    assert g.hb(ev(g, EventKind.COUNT, 0, 2), ev(g, EventKind.DONE, 1, 3))
    assert g.hb(ev(g, EventKind.COUNT, 0, 0), ev(g, EventKind.DONE, 1, 0))
