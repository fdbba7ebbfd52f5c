"""The benchmark rank's control flow on the CPU, with a fake driver and engine.

Nothing here touches a GPU: `ccogen._ccogen_rt` is replaced by a fake that records launches
(executed, or captured into a graph and executed when the graph is replayed), and the
`ensure` evaluation by a stub.  What is checked is the order of things: one verified
epoch, warm-up and timed samples (graph replay or launches), the epoch count, the
in-kernel timer read-out, the agreement on failures, and hangs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccogen.bench import worker as worker_module
from ccogen.bench.cases import CaseSpec, RankBench, Timing, WorkerConfig
from ccogen.bench.runner import Settings, SweepRequest, cases_of, plan_all
from ccogen.rt import launch
from ccogen.rt.data import CheckFailure
from tests.runtime.fakes import FakeEngine, fake_runtime, install

ROOT = Path(__file__).resolve().parents[2]


def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sweep: str, protocol: str = "alltoall",
          fixed: tuple[str, ...] = (), **fake: Any) -> tuple[WorkerConfig, Any, FakeEngine]:
    settings = Settings(target="nccl-lsa", out_dir=tmp_path, warmup=2, samples=4,
                        epochs_per_graph=3, graph_max=1 << 20, verify_after_max=1 << 20)
    plan = plan_all([SweepRequest(ROOT / "protocols" / f"{protocol}.cco", sweep, fixed)], settings)
    cubin = tmp_path / "fake.cubin"
    cubin.write_bytes(b"\0")
    cubins = {d: cubin for q in plan.points for d in (q.generated_dir, q.reference_dir) if d}
    cases = cases_of(plan, cubins, settings)
    heap = 1 << 22
    if any(c.timer_offset for c in cases):
        fake["timer_offset"] = next(c.timer_offset for c in cases if c.timer_offset)
    config = WorkerConfig("nccl-lsa", 1, "fake-engine.so", heap, 0, tuple(cases), (), 0,
                          rendezvous_dir=str(tmp_path), shared_dir=str(tmp_path))
    rt = fake_runtime(heap, **fake)
    engine = FakeEngine()
    install(monkeypatch, rt, engine)
    monkeypatch.setattr(launch, "evaluate", lambda checks, read, epoch: [])
    return config, rt, engine


def run(config: WorkerConfig) -> RankBench:
    hung: list[Any] = []
    result = worker_module.run_bench_rank(config, 0, 0, None, hung.append)
    assert not hung
    return result


def test_graph_timing_runs_the_right_number_of_epochs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config, rt, engine = setup(tmp_path, monkeypatch, "block=8B")
    result = run(config)
    assert result.error is None, result.error
    assert [c.key for c in result.cases] == ["alltoall:block@8/generated",
                                             "alltoall:block@8/reference"]
    for c in result.cases:
        assert c.mode == "graph" and c.verified is True and len(c.times_us) == 4
        assert all(t == pytest.approx(1.0) for t in c.times_us)  # 3 epochs per 3 ticks
    # per case: 1 verified + (2 warm-up + 4 timed) * 3 epochs + 1 verified again
    per_case = 1 + (2 + 4) * 3 + 1
    assert rt.executed == (["ccogen_alltoall_exchange"] * per_case + ["ref_alltoall"] * per_case)
    assert engine.modules == 0  # every module registered was finalized
    assert result.library == "NCCL 0.0 (fake)" and result.device == "Fake GPU"
    # the library's alltoall is back to back (issue 30); its hand-written reference
    # orders nothing between launches and says `host_sync`: its row says how it was timed
    generated, reference = result.cases
    assert generated.note == "" and reference.note == worker_module.HOST_SYNC_NOTE


def test_large_sizes_launch_each_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, rt, _ = setup(tmp_path, monkeypatch, "block=4MiB")
    result = run(config)
    assert result.error is None, result.error
    gen = result.cases[0]
    assert gen.mode == "stream" and len(gen.times_us) == 4
    # 16 MiB of windows > verify_after_max: no checked epoch after the timed ones
    assert rt.executed.count("ccogen_alltoall_exchange") == 1 + 2 + 4


def test_refused_capture_falls_back_to_launches(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    config, rt, _ = setup(tmp_path, monkeypatch, "block=8B", capture_fails=True)
    result = run(config)
    gen = result.cases[0]
    assert gen.mode == "stream" and "no CUDA graph" in gen.note and gen.verified is True
    assert rt.executed.count("ccogen_alltoall_exchange") == 1 + (2 + 4) * 3 + 1


def test_reference_timer_is_read_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _, _ = setup(tmp_path, monkeypatch, "rounds=2", "pingpong", ("size=8B",))
    result = run(config)
    assert result.error is None, result.error
    ref = next(c for c in result.cases if c.key.endswith("/reference"))
    assert ref.in_kernel_us == pytest.approx(1000 / 4 / 1e3)  # fake: 1000 ns per 4 trips
    assert next(c for c in result.cases if c.key.endswith("/generated")).in_kernel_us is None


def test_a_failed_ensure_is_not_timed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, rt, _ = setup(tmp_path, monkeypatch, "block=8B")
    failure = CheckFailure(0, 0, "alltoall.cco:17", "recv == send", "8 of 8 bytes differ")
    monkeypatch.setattr(launch, "evaluate", lambda checks, read, epoch: [failure])
    result = run(config)
    assert result.error is None
    for c in result.cases:
        assert c.verified is False and c.times_us == []
        assert "not timed" in c.note and "ensure at alltoall.cco:17 failed" in c.failures[0]
    assert rt.executed == ["ccogen_alltoall_exchange", "ref_alltoall"]


def test_a_hang_stops_the_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _, _ = setup(tmp_path, monkeypatch, "block=8B", hang_after=1)
    result = run(config)
    assert result.error is not None and "did not finish" in result.error
    assert result.cases == []


def test_case_keys_are_unique(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _, _ = setup(tmp_path, monkeypatch, "block=8B,64B")
    keys = [c.key for c in config.cases]
    assert len(keys) == len(set(keys)) == 4
    assert all(isinstance(c, CaseSpec) and isinstance(c.timing, Timing) for c in config.cases)


def test_local_buffers_are_passed_to_every_launch(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """allreduce_oneshot (window x, buffer out): the verified and the timed epochs of the
    generated and the reference kernels all get `out` where `ccogen run` keeps it."""
    import struct

    from ccogen.manifest import load_manifest

    config, rt, _ = setup(tmp_path, monkeypatch, "n=1024", "allreduce_oneshot")
    result = run(config)
    assert result.error is None, result.error
    assert all(c.verified is True and len(c.times_us) == 4 for c in result.cases)
    assert len(rt.executed) == 2 * (1 + (2 + 4) * 3 + 1)
    assert len(rt.arguments) == 2 * (1 + 3 + 1)  # verified, 3 captured in the graph, verified
    for i, case in enumerate(config.cases):  # generated, then reference: 5 launches each
        offsets, end = launch.buffer_layout(load_manifest(case.manifest_dir))
        assert end <= config.heap_size
        want = struct.pack("<Q", 0x7000_0000 + offsets["out"])
        assert all(dict(a)["buffer:out"] == want for a in rt.arguments[5 * i:5 * i + 5])


def test_the_allocation_holds_every_case_s_buffers(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.bench import runner
    from ccogen.manifest import load_manifest

    config, _, _ = setup(tmp_path, monkeypatch, "n=1024,4096", "allreduce_oneshot")
    seen: list[WorkerConfig] = []
    monkeypatch.setattr(launch, "spawn_ranks", lambda c, **kw: seen.append(c) or [])
    settings = Settings(target="nccl-lsa", out_dir=tmp_path)
    runner._run_ranks(config.cases, (), settings, Path("fake-engine.so"))
    manifests = [load_manifest(c.manifest_dir) for c in config.cases]
    largest = max(m.heap_size for m in manifests)
    assert seen[0].heap_size == max(launch.buffer_layout(m)[1] for m in manifests)
    assert seen[0].heap_size >= largest + 4096 * 2  # 4096 bf16 elements of `out`
