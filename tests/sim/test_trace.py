"""Traces: the alltoall trace passes the trace-event format's schema and Perfetto's rules."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ccogen.sim import find_counterexample, simulate
from ccogen.sim.cost import model_for
from ccogen.sim.plan import build_plan
from ccogen.sim.schedule import Setup
from ccogen.sim.state import random_image
from ccogen.sim.trace import to_notes
from tests.helpers import REPO_ROOT
from tests.sim.util import setup_of

SCHEMA = json.loads((Path(__file__).parent / "trace_event_schema.json").read_text())
ALLTOALL = REPO_ROOT / "protocols" / "alltoall.cco"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("trace") / "alltoall.json"
    report = simulate(ALLTOALL, ranks=4, seeds=1, trace=out)
    assert report.trace == str(out)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _events(trace: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def test_the_schema_is_a_valid_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_trace_passes_the_schema(trace: dict[str, Any]) -> None:
    jsonschema.validate(trace, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_the_schema_rejects_broken_events() -> None:
    broken = [{"ph": "X", "name": "put", "pid": 0, "tid": 1, "ts": 0}]  # no dur, no cat
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"traceEvents": broken}, SCHEMA)


def test_one_process_per_rank_with_named_threads(trace: dict[str, Any]) -> None:
    names = {e["pid"]: e["args"]["name"] for e in _events(trace, "M")
             if e["name"] == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 2", 3: "rank 3", 4: "host"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in _events(trace, "M")
               if e["name"] == "thread_name"}
    assert threads[(0, 1)] == "block 0"  # the issuer of alltoall's credit puts and waits
    assert "block 0 lane 0" in {name for (pid, _), name in threads.items() if pid == 0}
    assert threads[(0, 1000)] == "queue → rank 1 q0"
    used = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] != "M"}
    assert used <= set(threads)  # every track has a name


def test_ops_and_transfers_are_slices(trace: dict[str, Any]) -> None:
    slices = _events(trace, "X")
    kinds = defaultdict(int)
    for e in slices:
        kinds[e["cat"]] += 1
    # alltoall.cco at 4 ranks (3 peers each), 2 launches: per rank and launch 3 credit
    # puts + 3 credit waits, then 3 lanes of (put, quiet, wait_signal): 2 x 4 x (3 + 3 + 3 x 3)
    # = 120 ops; transfers are the 3 credits and the 3 blocks, each signalled: 2 x 4 x (3 + 3)
    # = 48 transfers and 48 signals; one launch slice per rank and launch: 2 x 4 = 8
    launches, ranks, peers = 2, 4, 3
    ops = launches * ranks * (peers + peers + peers * 3)
    transfers = launches * ranks * (peers + peers)
    assert kinds == {"op": ops, "transfer": transfers, "signal": transfers,
                     "launch": launches * ranks}


def test_slices_on_one_track_nest(trace: dict[str, Any]) -> None:
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in _events(trace, "X"):
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_: list[float] = []
        for start, end in spans:
            while open_ and open_[-1] <= start + 1e-9:
                open_.pop()
            assert not open_ or end <= open_[-1] + 1e-9, "partially overlapping slices"
            open_.append(end)


def test_every_flow_starts_and_ends_inside_a_slice(trace: dict[str, Any]) -> None:
    slices = defaultdict(list)
    for e in _events(trace, "X"):
        slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    flows: dict[object, list[dict[str, Any]]] = defaultdict(list)
    for e in _events(trace, "s") + _events(trace, "f"):
        flows[e["id"]].append(e)
        inside = any(a <= e["ts"] <= b for a, b in slices[(e["pid"], e["tid"])])
        assert inside, e
    assert all(sorted(x["ph"] for x in pair) == ["f", "s"] for pair in flows.values())
    cats = defaultdict(int)
    for pair in flows.values():
        cats[pair[0]["cat"]] += 1
    # every transfer is posted once and signals once: 2 launches x 4 ranks x (3 credits + 3
    # blocks) = 48 of each (test_ops_and_transfers_are_slices)
    transfers = 2 * 4 * (3 + 3)
    assert cats == {"post": transfers, "signal": transfers}


def test_signals_point_from_a_queue_to_the_wait_they_release(trace: dict[str, Any]) -> None:
    ends = {e["id"]: e for e in _events(trace, "f") if e["cat"] == "signal"}
    for start in (e for e in _events(trace, "s") if e["cat"] == "signal"):
        end = ends[start["id"]]
        assert start["tid"] >= 1000 and end["tid"] < 1000  # queue -> issuer
        assert start["pid"] != end["pid"]  # a remote signal
        assert end["ts"] >= start["ts"]


def test_times_follow_the_cost_model(trace: dict[str, Any]) -> None:
    assert trace["otherData"]["cost_model"] == "mori-sdma"
    cost = model_for("mori-sdma")
    transfers = [e for e in _events(trace, "X") if e["cat"] == "transfer"]
    # Each transfer starts on an idle queue (the credits alone on queue 1, one block per
    # lane on queue 0), so it costs dispatch + engine time + its one signal.
    blocks = [e for e in transfers if e["args"]["bytes"] == 1 << 20]
    credits = [e for e in transfers if e["args"]["bytes"] == 16]
    assert len(blocks) == len(credits) == len(transfers) // 2
    expected = cost.dispatch_us + cost.engine_us(1 << 20) + cost.atomic_us
    assert all(e["dur"] == pytest.approx(expected) for e in blocks)
    assert 20 < expected < 40  # ~6 us dispatch + 1 MiB at 52 GB/s + a signal
    # a 16-byte credit takes one packet (2 us on MORI), not 16 B over the bandwidth
    assert cost.engine_us(16) == cost.figures.per_packet_us
    credit = cost.dispatch_us + cost.engine_us(16) + cost.atomic_us
    assert all(e["dur"] == pytest.approx(credit) for e in credits)
    assert 9 < credit < 10  # 6 us dispatch + 2 us (one packet) + a 1.8 us signal


def test_a_target_without_figures_borrows_mori_sdma() -> None:
    assert model_for("nccl-cft").name == "nccl-cft (mori-sdma figures)"
    with pytest.raises(ValueError, match="unknown target"):
        model_for("cuda-magic")


def test_notes_describe_a_counterexample() -> None:
    s = setup_of((REPO_ROOT / "tests/sim/fixtures/read_before_arrival.cco").read_text())
    found = find_counterexample(s.plan.instance, "E032")
    assert found is not None
    result, notes = found
    assert result.seed == 0 and not result.passed
    assert notes[0].startswith("schedule: launch 1: rank ")
    assert any("runs `copy(dst=out, src=recv)`" in n for n in notes)
    plan = build_plan(s.plan.instance)
    again = to_notes(Setup(plan, random_image(plan, 0), 2), result.schedule, limit=3)
    assert len(again) == 4 and again[-1].startswith("schedule: ... and ")
