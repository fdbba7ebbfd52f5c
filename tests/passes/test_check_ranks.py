"""E011: a world rank where an LSA rank is required."""

from __future__ import annotations

from ccogen.passes.check_ranks import CheckRanks
from tests.passes.run_pass import codes, kernel, run_pass

OWN_SLOT = """
put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="local")
wait_signal(me, queue=0)
"""


def test_world_team_waiting_on_its_own_slot() -> None:
    [d] = run_pass(CheckRanks, kernel(OWN_SLOT, team="world"), nranks=3)
    assert d.code == "E011"
    assert d.message == "`wait_signal` on one's own slot names a world rank"
    assert d.span is not None and d.span.file.text[d.span.start:d.span.end] == "me"
    secondary = [label.message for label in d.labels[1:]]
    assert secondary == ["`me` and every peer are world ranks in this team",
                         "signals completion into this rank's own slot"]
    assert d.notes[-1] == "on every rank"
    assert d.help is not None and "team lsa" in d.help and "quiet(peer)" in d.help


def test_lsa_team_may_wait_on_its_own_slot() -> None:
    assert run_pass(CheckRanks, kernel(OWN_SLOT, team="lsa"), nranks=3) == []


def test_world_team_waiting_on_a_peer_is_fine() -> None:
    body = """
    put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
    wait_signal((me - 1) % nranks, queue=0)
    """
    assert run_pass(CheckRanks, kernel(body, team="world"), nranks=3) == []


def test_world_capable_target_still_reports() -> None:
    assert codes(run_pass(CheckRanks, kernel(OWN_SLOT, team="world"), target="nvshmem")) == [
        "E011"]


def test_one_node_target_leaves_the_team_to_e042() -> None:
    assert run_pass(CheckRanks, kernel(OWN_SLOT, team="world"), target="mori-sdma") == []
