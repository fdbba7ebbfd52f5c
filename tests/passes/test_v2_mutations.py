"""Mutations of the language-v2 library protocols: each breaks what `reduce` and credits
promise, and each is an error of the checker (and, where it shows in one launch, of the
simulator too).

- dropping a contribution, doubling one: E033 (every element gets each contribution
  exactly once);
- reading a stale epoch (a landing slot before this launch's data arrived, or a peer's
  input before its caller wrote it): E032;
- reusing a landing slot before its credit came back: E032 (the peer may still read it);
- a credit never collected: E030.
"""

from __future__ import annotations

import pytest

from ccogen.driver import CheckOptions, check_text
from ccogen.sim import simulate
from tests.helpers import REPO_ROOT

LIB = REPO_ROOT / "protocols"


def _mutate(name: str, old: str, new: str) -> str:
    text = (LIB / f"{name}.cco").read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the mutation site is not unique in {name}: {old!r}"
    return text.replace(old, new)


def _errors(text: str, ranks: tuple[int, ...] = (3,)) -> set[str]:
    result = check_text(text, "mutant.cco", CheckOptions(ranks=ranks))
    return {d.code for d in result.diagnostics if d.is_error}


def _sim_errors(text: str, ranks: int = 3, **params: int) -> set[str]:
    report = simulate(text, ranks=[ranks], params=params, seeds=4)
    return {d.code for d in report.diagnostics if d.is_error}


RING_REDUCE = "reduce(dst=x[r * chunk : (r + 1) * chunk],"
RING_SRCS = "srcs=[x[r * chunk : (r + 1) * chunk], slot[s % 2 * chunk : (s % 2 + 1) * chunk]]"
RING_CREDIT = """            if s >= 2:
                wait_signal(right, queue=1)  # right has freed slot s % 2
"""
RING_ARRIVAL = "            wait_signal(left, queue=0)\n"


@pytest.mark.parametrize("name", ["allreduce_oneshot", "allreduce_twoshot",
                                  "reduce_scatter_ring", "broadcast_pipelined"])
def test_the_originals_are_clean(name: str) -> None:
    text = (LIB / f"{name}.cco").read_text(encoding="utf-8")
    assert _errors(text, (2, 3, 4)) == set()


def test_dropping_a_contribution_is_E033() -> None:
    text = _mutate("allreduce_oneshot", "srcs=[x@p for p in ranks()]",
                   "srcs=[x@p for p in peers()]")
    assert _errors(text) == {"E033"}
    assert _sim_errors(text, n=64) == {"E033"}


def test_dropping_a_contribution_of_a_chunk_is_E033() -> None:
    text = _mutate("allreduce_twoshot", "for p in ranks()], op=", "for p in peers()], op=")
    assert _errors(text) == {"E033"}
    assert _sim_errors(text, chunk=16) == {"E033"}


def test_doubling_a_contribution_is_E033() -> None:
    slot = "slot[s % 2 * chunk : (s % 2 + 1) * chunk]"
    text = _mutate("reduce_scatter_ring", RING_SRCS, RING_SRCS[:-1] + f", {slot}]")
    result = check_text(text, "mutant.cco")
    found = [d for d in result.diagnostics if d.is_error]
    assert {d.code for d in found} == {"E033"}
    assert any("too often" in label.message for d in found for label in d.labels)
    assert _sim_errors(text, chunk=16) == {"E033"}


def test_reading_the_slot_before_this_launchs_data_is_E032() -> None:
    text = _mutate("reduce_scatter_ring", RING_ARRIVAL, "")
    text = text.replace("            signal(left, queue=1)", RING_ARRIVAL
                        + "            signal(left, queue=1)")
    assert _errors(text) >= {"E032"}
    assert "E032" in _sim_errors(text, chunk=16)


def test_reading_a_peers_input_of_the_last_launch_is_E032() -> None:
    text = _mutate("allreduce_oneshot",
                   "        barrier()  # every peer's caller has written its `x`\n", "")
    assert _errors(text) == {"E032"}


def test_letting_a_peers_caller_overwrite_the_input_while_read_is_E032() -> None:
    # the read races the peer's caller writing the next launch's input (a read racing
    # a write: E032, as the simulator reports it too)
    text = _mutate("allreduce_oneshot", "        barrier()  # nobody's caller overwrites",
                   "        # ")
    assert _errors(text) == {"E032"}
    assert "E032" in _sim_errors(text, n=64)


def test_reusing_a_slot_before_its_credit_is_an_error() -> None:
    text = _mutate("reduce_scatter_ring", RING_CREDIT, "")
    # step s writes slot s % 2 of the right neighbour while it may still add it
    assert _errors(text, (4,)) == {"E032"}
    assert _sim_errors(text, ranks=4, chunk=16) == {"E032"}


def test_reusing_a_broadcast_slot_before_its_credit_is_an_error() -> None:
    text = _mutate("broadcast_pipelined", """                if k >= 2:
                    wait_signal(me + 1, queue=1)
""", "")
    assert _errors(text) == {"E032"}
    assert _sim_errors(text, chunk=16) == {"E032"}


def test_a_credit_never_collected_is_an_error() -> None:
    collect = ("        for s in range(min(2, nranks - 1)):\n"
               "            wait_signal(right, queue=1)  # collect every credit of the launch\n")
    text = _mutate("reduce_scatter_ring", collect, "")
    # the last credit wait of the loop then expects the launch's total, and the credits
    # it still needs only come after puts that wait behind it
    assert _errors(text, (4,)) == {"E030"}
    assert _sim_errors(text, ranks=4, chunk=16) == {"E030"}

