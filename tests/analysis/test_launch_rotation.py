"""`launch % K` (language reference section 8): landing slots rotated by launch.

The instance carries the regions of every launch of its period; the checker builds
period + 1 launches (a rotation of K slots needs K + 1 launches to show a race).
"""

from __future__ import annotations

import ccogen as cg
from ccogen.analysis import analyse
from ccogen.driver import CheckOptions, check_text
from ccogen.instantiate import instantiate

ROTATED = '''\
protocol alltoall(block: bytes = 64 B):
    """Every rank sends one block to every other rank: one lane per peer."""
    team lsa
    buffer send: u8[nranks * block]
    buffer recv: u8[nranks * block]
    window land: SLOTS * nranks * block

    kernel exchange(threads=64):
        slot = launch % SLOTS * nranks * block
        lanes p in peers():
            put(p, dst=land[slot + me * block : slot + (me + 1) * block],
                src=send[p * block : (p + 1) * block], queue=0, signal="remote")
            quiet(p)
            wait_signal(p, queue=0)
            copy(dst=recv[p * block : (p + 1) * block],
                 src=land[slot + p * block : slot + (p + 1) * block])

    ensure:
        for p in peers():
            recv[p * block : (p + 1) * block] == init(send@p)[me * block : (me + 1) * block]
'''


def _codes(text: str, ranks: tuple[int, ...] = (2, 3)) -> set[str]:
    result = check_text(text, "rot.cco", CheckOptions(ranks=ranks))
    return {d.code for d in result.diagnostics if d.is_error}


def test_two_slots_are_safe_back_to_back() -> None:
    assert _codes(ROTATED.replace("SLOTS", "2")) == set()


def test_one_slot_races_with_the_peers_previous_launch() -> None:
    assert _codes(ROTATED.replace("SLOTS", "1")) & {"E031", "E032"}


def test_the_instance_carries_every_launch_of_its_period() -> None:
    p = cg.parse(ROTATED.replace("SLOTS", "3"))
    inst, diags = instantiate(p.ir if hasattr(p, "ir") else p, 2)
    assert inst is not None and not [d for d in diags if d.is_error]
    assert inst.period == 3 and [r.launch for r in inst.rotation] == [1, 2]
    puts = [o for o in inst.at_launch(4).ranks[0] if o.kind.traits.transfer]
    assert puts[0].dst is not None and puts[0].dst.start == 1 * 2 * 64
    launches = analyse(inst).launches
    assert launches.launches == 4  # K + 1
    starts = [o.dst.start for o in launches.ranks[0] if o.kind.traits.transfer
              and o.dst is not None and o.dst.window == "land"]
    assert starts == [0, 128, 256, 0]


def test_print_and_parse_agree() -> None:
    p = cg.parse(ROTATED.replace("SLOTS", "2"))
    assert cg.parse(p.to_source()) == p
    assert "launch % 2 * nranks * block" in p.to_source()


def test_the_builder_builds_the_same_ir() -> None:
    b = cg.Protocol("r", team=cg.lsa(2))
    w = b.window("land", 2 * 8)
    with b.kernel("k", threads=32) as k:
        slot = k.let(k.launch % 2 * 8, name="slot")
        with k.if_(k.me == 0):
            k.put(1, dst=w[slot:slot + 8], src=w[slot:slot + 8], queue=0, signal="remote")
            k.quiet(1)
        with k.else_():
            k.wait_signal(0, queue=0)
    text = b.to_source()
    assert "slot = launch % 2 * 8" in text
    assert cg.parse(text) == b


def test_launch_outside_a_modulus_is_refused() -> None:
    text = ROTATED.replace("SLOTS", "2").replace("slot = launch % 2 *", "slot = launch *")
    assert "E004" in _codes(text, (2,))


def test_launch_may_not_decide_control_flow() -> None:
    text = ROTATED.replace("SLOTS", "2").replace(
        "            quiet(p)\n", "            if launch % 2 == 0:\n                quiet(p)\n")
    result = check_text(text, "rot.cco", CheckOptions(ranks=(2,)))
    messages = [d.message for d in result.diagnostics if d.code == "E004"]
    assert any("decides which ops run" in m for m in messages), messages
