"""`ccogen bench` of protocols with run-time values (ccogen.bench.contents), on the CPU.

The benchmark rank runs against the fake driver and engine of tests/runtime/fakes.py:
every launch (verified, captured into the timed graph, verified again) is recorded with
the device memory it would read, so the tests see what the kernels would get: the drawn
contents, which satisfy `require`, the same for the generated and the reference kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ccogen.bench import worker as worker_module
from ccogen.bench.cases import CaseSpec, RankBench, WorkerConfig
from ccogen.bench.contents import (
    draw_for,
    draw_name,
    relaunch_problem,
    required_names,
    written_names,
)
from ccogen.bench.report import sweep_report
from ccogen.bench.results import BenchResult
from ccogen.bench.runner import (
    Plan,
    Settings,
    SweepRequest,
    cases_of,
    merge,
    plan_all,
    stage_draws,
)
from ccogen.instantiate import instantiate, preconditions
from ccogen.instantiate.runtime import unsatisfied
from ccogen.ir.dtype import DType
from ccogen.ir.values import decode
from ccogen.manifest import load_manifest
from ccogen.rt import launch
from ccogen.syntax import load_ir
from tests.runtime.fakes import FakeEngine, fake_runtime, install

ROOT = Path(__file__).resolve().parents[2]
CLOBBER = Path(__file__).resolve().parent / "data" / "clobber.cco"
HEAP = 1 << 22


def plan_of(tmp_path: Path, path: Path, sweep: str, contents: str | None = None,
            fixed: tuple[str, ...] = (), ranks: int = 2) -> tuple[Plan, Settings]:
    settings = Settings(target="nccl-lsa", ranks=ranks, out_dir=tmp_path, warmup=2, samples=4,
                        epochs_per_graph=3, graph_max=1 << 20, verify_after_max=1 << 20,
                        contents=contents)
    return plan_all([SweepRequest(path, sweep, fixed)], settings), settings


def staged_cases(tmp_path: Path, plan: Plan, settings: Settings) -> list[CaseSpec]:
    cubin = tmp_path / "fake.cubin"
    cubin.write_bytes(b"\0")
    cubins = {d: cubin for q in plan.points for d in (q.generated_dir, q.reference_dir) if d}
    return stage_draws(cases_of(plan, cubins, settings), tmp_path / "shared")


class Recorder:
    """Rank 0 of the benchmark on the fake driver; per launch, the device memory then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cases: list[CaseSpec],
                 tmp_path: Path) -> None:
        self.config = WorkerConfig("nccl-lsa", 1, "fake-engine.so", HEAP, 0, tuple(cases), (),
                                   0, rendezvous_dir=str(tmp_path), shared_dir=str(tmp_path))
        self.rt = fake_runtime(HEAP)
        install(monkeypatch, self.rt, FakeEngine())
        self.launches: list[tuple[str, bytes]] = []
        self.evaluated: list[tuple[int, tuple[Any, ...]]] = []
        launch_kernel = self.rt.launch

        def record(fn: str, *args: Any, **kw: Any) -> None:
            self.launches.append((fn, bytes(self.rt.memory)))
            launch_kernel(fn, *args, **kw)

        def evaluate(checks: Any, read: Any, epoch: int) -> list[Any]:
            self.evaluated.append((epoch, tuple(checks)))
            return []

        self.rt.launch = record
        monkeypatch.setattr(launch, "evaluate", evaluate)
        # rank 0 alone: the other rank's final windows are not there to exchange
        monkeypatch.setattr(launch.RankRunner, "_exchange", lambda self, epoch, finals: None)

    def run(self) -> RankBench:
        hung: list[Any] = []
        result = worker_module.run_bench_rank(self.config, 0, 0, None, hung.append)
        assert not hung
        return result


def _element(memory: bytes, case: CaseSpec, name: str) -> np.ndarray:
    """Buffer `name` of rank 0 as the case's kernels find it in `memory`."""
    manifest = load_manifest(case.manifest_dir)
    offsets, _ = launch.buffer_layout(manifest)
    size = next(b.size for b in manifest.buffers if b.name == name)
    start = offsets[name]  # from the heap's start (fakes.BASE in device addresses)
    return decode(np.frombuffer(memory[start:start + size], dtype=np.uint8), DType.I32)


def _require_holds(protocol: Any, nranks: int, params: dict[str, Any],
                   arrays: dict[tuple[int, str], np.ndarray]) -> list[str]:
    from ccogen.instantiate import Contents

    _, memories, bound = preconditions(protocol, nranks, params)
    contents = Contents(arrays, {n: m.dtype for n, m in memories.items()}, "seen")
    return unsatisfied(protocol, nranks, bound, memories, contents)


def test_every_launch_reads_the_drawn_contents(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """alltoallv: the generated and the reference kernels, verified, timed (graph) and
    verified again, all read rank 0's drawn `counts` (within `cap`), and the checks
    evaluated are those of the drawn instance, not the symbolic bounds."""
    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64")
    point = plan.points[0]
    assert point.contents is not None and point.contents.draw.label == "interior-0"
    assert point.reference_dir is not None  # benchmarks/reference/nccl-lsa/alltoallv
    cases = staged_cases(tmp_path, plan, settings)
    assert [c.impl for c in cases] == ["generated", "reference"]
    assert all(c.drawn == point.contents.spec and c.contents == "interior-0" for c in cases)
    recorder = Recorder(monkeypatch, cases, tmp_path)
    result = recorder.run()
    assert result.error is None, result.error
    for c in result.cases:
        assert c.verified is True and len(c.times_us) == 4 and c.contents == "interior-0"
    drawn = point.contents.draw.arrays
    want = decode(drawn[(0, "counts")], DType.I32)
    assert all(0 <= v <= 64 for v in want) and len(set(want.tolist())) >= 1
    # per case: the verified epoch, 3 launches captured into the graph, verified again
    assert [fn for fn, _ in recorder.launches] == \
        ["ccogen_alltoallv_exchange"] * 5 + ["ref_alltoallv"] * 5
    for i, (_, memory) in enumerate(recorder.launches):
        case = cases[i // 5]
        assert np.array_equal(_element(memory, case, "counts"), want)
        send = _element(memory, case, "send").view(np.uint8)
        assert np.array_equal(send, drawn[(0, "send")].view(np.uint8))
    # the checks of the drawn instance: regions as long as the drawn counts
    mine = tuple(c for c in point.checks if c.rank == 0)
    assert mine and all(checks == mine for _, checks in recorder.evaluated)
    recv = next(c for c in mine if c.left.window == "recv")
    assert recv.left.stop - recv.left.start == 2 * int(want[0])  # bf16 elements
    assert [e for e, _ in recorder.evaluated] == [0, 1 + 18, 0, 1 + 18]


@pytest.mark.parametrize("kind", ["low", "high", "mixed", "interior"])
def test_the_chosen_contents_satisfy_require_and_set_the_link_bytes(tmp_path: Path,
                                                                     kind: str) -> None:
    plan, _ = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64", kind)
    point = plan.points[0]
    assert point.contents is not None
    spec, draw = point.contents.spec, point.contents.draw
    assert draw.label == draw_name(kind)
    assert _require_holds(spec.protocol, 2, dict(spec.params), dict(draw.arrays)) == []
    counts = [decode(draw.arrays[(r, "counts")], DType.I32) for r in range(2)]
    sent = max(int(counts[r][1 - r]) for r in range(2))  # elements to the peer
    assert point.traffic.per_direction == 2 * sent + 4  # bf16 elements and one i32 `got`
    if kind == "low":
        assert all((c == 0).all() for c in counts)
    if kind == "high":
        assert all((c == 64).all() for c in counts)
    assert point.contents.problem is None


def test_generated_and_reference_get_the_same_draw_file(tmp_path: Path) -> None:
    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64,128")
    cases = staged_cases(tmp_path, plan, settings)
    assert len(cases) == 4
    for gen, ref in (cases[0:2], cases[2:4]):
        assert gen.draw_file == ref.draw_file and Path(gen.draw_file).is_file()
        for case in (gen, ref):
            staged = sorted(p.name for p in Path(case.drawn_dir).iterdir())
            assert staged == sorted(["draw-0.pkl", f"draw-{1 + case.timing.epochs}.pkl"])
            assert (Path(case.drawn_dir) / "draw-0.pkl").read_bytes() == \
                Path(case.draw_file).read_bytes()
    assert cases[0].draw_file != cases[2].draw_file  # one draw per value


def test_a_run_time_case_without_contents_is_never_launched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random bytes as counts would write past `recv`: the rank refuses the case."""
    from dataclasses import replace

    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64")
    bare = [replace(c, drawn=None, drawn_dir="") for c in staged_cases(tmp_path, plan, settings)]
    recorder = Recorder(monkeypatch, bare, tmp_path)
    result = recorder.run()
    assert result.error is None
    assert recorder.launches == [] and recorder.rt.executed == []
    for c in result.cases:
        assert c.verified is False and c.times_us == [] and "no drawn contents" in c.note


def test_a_draw_that_is_not_staged_stops_the_rank(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_epoch` would silently draw `ccogen run`'s contents of that epoch instead."""
    from dataclasses import replace

    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64")
    cases = [replace(c, drawn_dir=str(tmp_path / "nowhere"))
             for c in staged_cases(tmp_path, plan, settings)]
    recorder = Recorder(monkeypatch, cases, tmp_path)
    result = recorder.run()
    assert result.error is not None and "no staged draw for epoch 0" in result.error
    assert recorder.launches == []


def test_the_shipped_run_time_protocols_can_be_relaunched_unrefilled() -> None:
    """Their launches write only outputs: what `require` constrains stays in place."""
    for name, params in (("alltoallv", {"cap": 16}),
                         ("moe_dispatch", {"tokens": 4, "hidden": 8, "k": 2}),
                         ("moe_combine", {"tokens": 4, "hidden": 8, "k": 2})):
        protocol = load_ir(ROOT / "protocols" / f"{name}.cco")
        instance, _ = instantiate(protocol, 2, params)
        assert instance is not None
        drawn = draw_for(instance, "interior", 0)
        assert drawn is not None
        contents, concrete = drawn
        assert required_names(protocol) and not required_names(protocol) & \
            written_names(concrete), name
        assert contents.problem is None


def test_a_launch_that_breaks_require_for_the_next_is_not_timed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """clobber.cco copies `junk` over `total` (require: total == counts): verified once,
    never timed, and the report says why."""
    plan, settings = plan_of(tmp_path, CLOBBER, "cap=8", ranks=1)
    point = plan.points[0]
    assert point.contents is not None
    problem = point.contents.problem
    assert problem is not None and "`total`" in problem and "violate" in problem
    assert relaunch_problem(point.contents.spec, point.contents.draw,
                            _concrete(point.contents)) == problem
    cases = staged_cases(tmp_path, plan, settings)
    assert [c.untimed for c in cases] == [problem]
    recorder = Recorder(monkeypatch, cases, tmp_path)
    result = recorder.run()
    assert result.error is None, result.error
    [times] = result.cases
    assert times.verified is True and times.times_us == []
    assert times.note == f"not timed: {problem}"
    assert [fn for fn, _ in recorder.launches] == ["ccogen_clobber_k"]
    bench = BenchResult("nccl-lsa", 1)
    merge(bench, plan, [result], None, settings)
    assert not bench.succeeded()
    assert f"generated at 8: not timed: {problem}" in sweep_report(bench, point.sweep)


def test_a_launch_that_rewrites_require_s_inputs_validly_is_timed_with_a_note(
        tmp_path: Path) -> None:
    """rewrite.cco copies over `total` the value `require` asks of it."""
    plan, settings = plan_of(tmp_path, CLOBBER.parent / "rewrite.cco", "cap=8", ranks=1)
    point = plan.points[0]
    assert point.contents is not None and point.contents.problem is None
    assert "`total`" in point.contents.rewritten and "still satisfies" in point.contents.rewritten
    assert plan.notes[-1] == f"rewrite:cap at 8: {point.contents.rewritten}"
    assert [c.untimed for c in staged_cases(tmp_path, plan, settings)] == [""]


def _concrete(contents: Any) -> Any:
    from ccogen.instantiate import Contents

    spec = contents.spec
    _, memories, _ = preconditions(spec.protocol, spec.nranks, dict(spec.params))
    given = Contents(dict(contents.draw.arrays), {n: m.dtype for n, m in memories.items()},
                     contents.draw.label)
    instance, _ = instantiate(spec.protocol, spec.nranks, dict(spec.params), contents=given)
    return instance


def test_the_report_names_the_contents_timed(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.bench import runner

    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64", "high")
    monkeypatch.setattr(runner, "plan_all", lambda requests, s: plan)
    monkeypatch.setattr(runner, "build_all", lambda jobs, arch, parallel: ({}, {}))
    monkeypatch.setattr("ccogen.rt.engines.build_engine",
                        lambda target, arch: (Path("x"), _Library()))
    result = runner.run_bench([], settings, build_only=True)
    assert result.info["contents"] == {
        "alltoallv:cap": "high (every bounded value at its upper bound, seed 0)"}
    head = sweep_report(_with_point(result, plan), "alltoallv:cap").splitlines()[0]
    assert head.endswith("; contents timed: high (every bounded value at its upper bound, "
                         "seed 0)")


def test_a_static_protocol_is_benchmarked_as_before(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.bench import runner
    from ccogen.rt.data import instance_checks

    plan, settings = plan_of(tmp_path, ROOT / "protocols" / "alltoall.cco", "block=64B",
                             "high")
    point = plan.points[0]
    assert point.contents is None and point.draw_file is None
    assert plan.notes[-1].startswith("--contents high: alltoall reads no run-time values")
    protocol = load_ir(ROOT / "protocols" / "alltoall.cco")
    instance, _ = instantiate(protocol, 2, {"block": 64})
    assert instance is not None and point.checks == tuple(instance_checks(instance))
    cases = staged_cases(tmp_path, plan, settings)
    assert all(c.drawn is None and c.drawn_dir == "" and c.contents == "" for c in cases)
    monkeypatch.setattr(runner, "plan_all", lambda requests, s: plan)
    monkeypatch.setattr(runner, "build_all", lambda jobs, arch, parallel: ({}, {}))
    monkeypatch.setattr("ccogen.rt.engines.build_engine",
                        lambda target, arch: (Path("x"), _Library()))
    result = runner.run_bench([], settings, build_only=True)
    assert "contents" not in result.info
    head = sweep_report(_with_point(result, plan), "alltoall:block").splitlines()[0]
    assert "contents" not in head


class _Library:
    def describe(self) -> str:
        return "NCCL 0.0 (fake)"


def _with_point(result: BenchResult, plan: Plan) -> BenchResult:
    from ccogen.bench.results import Point

    p = plan.points[0]
    result.points.append(Point(p.sweep, p.protocol, result.target, "generated", p.param,
                               p.value, True, p.traffic.per_direction, "graph", 3, None))
    return result


def test_an_unknown_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--contents is one of interior, low, high, mixed"):
        plan_of(tmp_path, ROOT / "protocols" / "alltoallv.cco", "cap=64", "skewed")
