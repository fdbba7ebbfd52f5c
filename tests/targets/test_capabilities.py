"""The capability tables (`Target.capabilities`): the facts the seeds state, internal
consistency."""

from __future__ import annotations

import dataclasses

import pytest

from ccogen.ir.instance import IssuerLevel
from ccogen.ir.nodes import TeamKind
from ccogen.targets import TARGETS, UnknownTarget, get_target, providers
from ccogen.targets.base import (
    Alignment,
    Capabilities,
    Feature,
    QueueKind,
    SignalStorage,
    Support,
)
from tests.helpers import REPO_ROOT
from tests.passes.run_pass import instance_of

NAMES = ["mori-sdma", "nccl-cft", "nvshmem", "nccl-lsa"]
KiB, MiB = 1 << 10, 1 << 20


def caps_of(name: str) -> Capabilities:
    return get_target(name).capabilities


CAPS = {name: target.capabilities for name, target in TARGETS.items()}


def test_targets_are_the_four_of_the_spec() -> None:
    assert list(TARGETS) == NAMES
    assert all(TARGETS[name].name == CAPS[name].name == name for name in NAMES)


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(UnknownTarget, match="unknown target `foo`; known targets: mori-sdma, "
                       "nccl-cft, nvshmem, nccl-lsa"):
        get_target("foo")


@pytest.mark.parametrize("name", NAMES)
def test_tables_are_frozen(name: str) -> None:
    caps = caps_of(name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.queue_cap = 3  # type: ignore[misc]
    hash(caps.cost)
    hash(caps.alignment)


def test_queues() -> None:
    mori = caps_of("mori-sdma")
    assert (mori.queue_kind, mori.queue_cap) == (QueueKind.HARDWARE, 8)
    for name in NAMES[1:]:
        assert (CAPS[name].queue_kind, CAPS[name].queue_cap) == (QueueKind.EMULATED, None)


def test_signals() -> None:
    assert caps_of("mori-sdma").signal_storage is SignalStorage.QUEUE_SLOTS
    for name in NAMES[1:]:
        assert CAPS[name].signal_storage is SignalStorage.SIGNAL_WINDOW
    assert all(c.signal_after_data and c.completion_sender_side for c in CAPS.values())


def test_counted_writes() -> None:
    how = {name: caps.counted_writes for name, caps in CAPS.items()}
    assert how == {"mori-sdma": Support.EMULATED, "nccl-cft": Support.NATIVE,
                   "nvshmem": Support.EMULATED, "nccl-lsa": Support.EMULATED}


def test_alignment_rules() -> None:
    cft = Alignment(operand=16, length=16, counter=256)
    assert caps_of("nccl-cft").alignment == cft
    assert caps_of("nccl-cft").counted_alignment == cft
    assert caps_of("nvshmem").counted_alignment == cft
    for name in ("mori-sdma", "nvshmem", "nccl-lsa"):
        assert CAPS[name].alignment.unconstrained


def test_team_kinds_and_thread_modes() -> None:
    lsa_only = {n for n, c in CAPS.items() if c.team_kinds == frozenset({TeamKind.LSA})}
    assert lsa_only == {"mori-sdma", "nccl-lsa"}
    assert [n for n, c in CAPS.items() if c.thread_modes] == ["mori-sdma"]


@pytest.mark.parametrize("name", NAMES)
def test_every_issuer_scope_has_a_coop(name: str) -> None:
    caps = caps_of(name)
    assert {level for level, _ in caps.issuer_scopes} == set(IssuerLevel)
    assert caps.coop(IssuerLevel.BLOCK)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("feature", list(Feature))
def test_a_missing_feature_has_a_reason_and_only_then(name: str, feature: Feature) -> None:
    caps = caps_of(name)
    assert (caps.reason(feature) is None) == caps.supports(feature).available


def test_providers_name_native_targets_first() -> None:
    assert providers(Feature.COUNTED_WRITES) == [
        ("nccl-cft", Support.NATIVE), ("mori-sdma", Support.EMULATED),
        ("nvshmem", Support.EMULATED), ("nccl-lsa", Support.EMULATED)]
    assert [n for n, _ in providers(Feature.TEAM_WORLD)] == ["nccl-cft", "nvshmem"]


def test_barrier_slots_only_on_cft() -> None:
    slots = {n: c.barriers.slots_per_block for n, c in CAPS.items()}
    assert slots == {"mori-sdma": None, "nccl-cft": 1, "nvshmem": None, "nccl-lsa": None}
    assert caps_of("nccl-cft").barriers.requirement == "reqs.cftBarrierCount"


def test_mori_cost_model_is_the_seed() -> None:
    cost = caps_of("mori-sdma").cost
    assert (cost.per_packet_us, cost.dispatch_us, cost.small_op_bytes) == (2.0, 6.0, 256 * KiB)
    assert cost.shared_queue_slowdown == (8, 3.2) and cost.doorbell_batch == (8, 16)
    assert (cost.sgpr_same_queue, cost.sgpr_independent) == (5, 14)
    assert dict(cost.trigger_cycles_same_queue)[64] == 3220
    assert dict(cost.trigger_cycles_spread)[8] == 3377
    sizes = [size for size, _ in cost.bandwidth]
    assert sizes == sorted(sizes)
    assert cost.bandwidth_at(8 * MiB) == 60.0
    assert cost.bandwidth_at(3 * MiB) == 56.0  # the step at or below
    assert cost.bandwidth_at(4 * KiB) == 17.0  # below the table: its first row
    assert cost.op_time_us(4 * KiB) == 2.0  # one packet at least
    assert cost.signal_us == pytest.approx((248 - 132) / 64)


def test_h200_cost_model() -> None:
    for name in ("nvshmem", "nccl-lsa"):
        cost = caps_of(name).cost
        assert (cost.peak_gbps, cost.flag_latency_us, cost.launch_us) == (397.0, 0.66, 4.2)
        assert cost.bandwidth_at(1 * MiB) == 397.0
        assert cost.per_packet_us is None
    assert caps_of("nccl-cft").cost.peak_gbps is None  # never measured


@pytest.mark.parametrize("name", NAMES)
def test_heap_layout_honours_the_tables(name: str) -> None:
    """codegen/layout.py places windows and counters where every table says they are."""
    from ccogen.codegen.layout import plan_heap

    caps = caps_of(name)
    instance = instance_of("""
        protocol p():
            team lsa(2)
            window a: 1000
            window b: 3 B, align=512
            window c: 17
            counter x
            counter y

            kernel k(threads=32):
                pass
    """)
    heap = plan_heap(instance, 4)
    assert all(w.offset % caps.window_align == 0 for w in heap.windows)
    assert heap.window("b").offset % 512 == 0
    assert all(c.offset % caps.counted_alignment.counter == 0 for c in heap.counters)
    offsets = [c.offset for c in heap.counters]
    assert offsets[1] - offsets[0] == caps.counter_stride


def test_cli_rejects_an_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    from ccogen.cli import main

    assert main(["lint", str(REPO_ROOT / "protocols/pingpong.cco"), "--target", "foo"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --target: unknown target `foo`; known targets: mori-sdma, nccl-cft, "
                   "nvshmem, nccl-lsa\n")


def test_cli_accepts_a_known_target(capsys: pytest.CaptureFixture[str]) -> None:
    from ccogen.cli import main

    assert main(["lint", str(REPO_ROOT / "protocols/alltoall.cco"), "--target", "nvshmem"]) == 0
