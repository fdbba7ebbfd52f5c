"""Running a benchmark: plan every case, build, measure the ceilings, run the ranks, merge.

`run_bench(requests, settings)`:
1. plan: for each sweep value, check and generate the instance (kernels that count their
   own epochs: `codegen.Options.epoch_from_heap`), its link traffic and `ensure` checks,
   and the reference's manifest for the same instance (ccogen.bench.reference); for a
   protocol with run-time values, the contents it is verified and timed on, drawn to
   satisfy `require` (`--contents`, ccogen.bench.contents), and the checks and link
   traffic of the instance of those contents;
2. build every cubin and the engine shim in parallel (nvcc, cached);
3. measure the link ceilings in a process of their own (ccogen.bench.ceiling);
4. spawn one benchmark rank per GPU (ccogen.bench.worker) with every case, the empty
   kernel floors and the engine collectives (each run-time case's drawn contents staged
   in the shared directory as the draws of its verified epochs); wait for their reports;
5. merge the ranks' samples into `Point`s: per case, the statistics of the slowest rank.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ccogen.bench.cases import (
    CaseSpec,
    CaseTimes,
    CompareSpec,
    RankBench,
    Timing,
    WorkerConfig,
)
from ccogen.bench.contents import CONTENTS, DEFAULT_CONTENTS, BenchContents, draw_for, write_draw
from ccogen.bench.results import BenchResult, Point, slowest
from ccogen.bench.sweep import Sweep, parse_sweep
from ccogen.bench.traffic import Traffic, traffic_of
from ccogen.errors import CompileError, RunError, ToolchainError
from ccogen.rt.data import CheckSpec, instance_checks

if TYPE_CHECKING:
    from ccogen.rt.placement import Placement

COMPARES = ("auto", "alltoall", "allgather", "none")
EMPTY_KERNEL = 'extern "C" __global__ void ccogen_bench_empty() {}\n'
# The empty kernel takes no engine argument and links no device library, whatever the
# benchmark's target: it is built and described as code of the target whose build is one
# plain cubin.
FLOOR_TARGET = "nccl-lsa"


@dataclass(frozen=True)
class SweepRequest:
    """One protocol swept over one parameter (`sweep` is `PARAM=SPEC`)."""

    path: Path
    sweep: str
    params: tuple[str, ...] = ()   # fixed parameters, `K=V`
    compare: str = "auto"          # alltoall | allgather | none | auto (by protocol name)
    reference: str = "auto"        # auto | none | a directory
    ceiling: str = "auto"          # the ceiling shown: ce | ce-bidir | auto (ce-bidir when
                                   # some link carries bytes both ways)


@dataclass(frozen=True)
class Settings:
    target: str
    ranks: int = 2
    max_ctas: int | None = None        # the SM budget of the generated code (None: default)
    out_dir: Path = Path("bench-out")
    warmup: int = 5
    samples: int = 50
    epochs_per_graph: int = 10
    graph: bool = True
    graph_max: int = 4 << 20           # per-direction bytes up to which graphs replay
    ceiling: bool = True
    floors: bool = True
    verify_after_max: int = 64 << 20   # window bytes per rank up to which the timed
                                       # configuration is checked again afterwards
    seed: int = 0
    contents: str | None = None        # run-time protocols: the draw timed (CONTENTS;
                                       # None: DEFAULT_CONTENTS, `interior`)
    watchdog_s: float = 30.0
    jobs: int = 0                      # parallel nvcc builds (0: one per CPU)
    arch: str | None = None            # default: the GPU's
    work_dir: Path | None = None       # generated code (default: out_dir/build)

    @property
    def build_root(self) -> Path:
        return self.work_dir if self.work_dir is not None else self.out_dir / "build"


@dataclass(frozen=True)
class PlannedPoint:
    """One value of one sweep: its generated (and reference) instance, ready to build."""

    sweep: str                 # `protocol:param`
    protocol: str
    sweep_def: Sweep
    value: int
    traffic: Traffic
    window_bytes: int          # per rank
    checks: tuple[CheckSpec, ...]
    generated_dir: Path
    reference_dir: Path | None
    compare: str | None        # alltoall | allgather
    ceiling: str = "auto"
    contents: BenchContents | None = None  # run-time values: the drawn contents
    draw_file: Path | None = None           # ... pickled (ccogen.rt.drawn.load_epoch)

    @property
    def param(self) -> str:
        return self.sweep_def.param

    def key(self, impl: str) -> str:
        return f"{self.sweep}@{self.value}/{impl}"


@dataclass
class Plan:
    points: list[PlannedPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ planning


def resolve_compare(choice: str, protocol: str) -> str | None:
    """The collective to compare with: the explicit choice, or by protocol name (`auto`:
    a name with `alltoall` / `all_to_all` -> alltoall, `allgather` / `all_gather` ->
    allgather, else none)."""
    if choice not in COMPARES:
        raise ValueError(f"--compare is one of {', '.join(COMPARES)}, not {choice!r}")
    if choice == "none":
        return None
    if choice != "auto":
        return choice
    name = protocol.lower()
    if "alltoall" in name or "all_to_all" in name:
        return "alltoall"
    if "allgather" in name or "all_gather" in name:
        return "allgather"
    return None


def _reference_for(choice: str, protocol: str, target: str):  # type: ignore[no-untyped-def]
    from ccogen.bench.reference import find_reference, load_reference

    if choice == "none":
        return None
    if choice == "auto":
        return find_reference(protocol, target)
    directory = Path(choice)
    if (directory / "manifest.json").is_file():
        spec = load_reference(directory)
        if spec.target != target or spec.protocol != protocol:
            raise RunError(f"--reference {directory} is for {spec.protocol} on {spec.target}, "
                           f"not {protocol} on {target}")
        return spec
    found = find_reference(protocol, target, directory)
    if found is None:
        raise RunError(f"--reference {directory}: no {target}/{protocol}/manifest.json there")
    return found


def plan_request(request: SweepRequest, settings: Settings, plan: Plan) -> None:
    """Generate every instance of one sweep into settings.out_dir/build (raises
    SweepError / ValueError for bad arguments, DiagnosticError for protocol errors)."""
    from ccogen.bench.reference import write_case
    from ccogen.instantiate import parse_params
    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir

    protocol = load_ir(request.path)
    sweep = parse_sweep(request.sweep, protocol)
    fixed = parse_params(list(request.params), protocol)
    if sweep.param in fixed:
        raise ValueError(f"`{sweep.param}` is both swept and fixed with --param")
    compare = resolve_compare(request.compare, protocol.name)
    reference = _reference_for(request.reference, protocol.name, settings.target)
    if reference is None and request.reference == "auto":
        plan.notes.append(f"no hand-written reference for {protocol.name} on "
                          f"{settings.target} (benchmarks/reference/{settings.target}/"
                          f"{protocol.name})")
    label = f"{protocol.name}:{sweep.param}"
    kind = settings.contents or DEFAULT_CONTENTS
    if kind not in CONTENTS:
        raise ValueError(f"--contents is one of {', '.join(CONTENTS)}, not {kind!r}")
    for value in sweep.values:
        base = settings.build_root / settings.target / label.replace(":", "-") / str(value)
        params = {**fixed, sweep.param: value}
        instance = compile_for_run(protocol, request.path.name, settings.target, settings.ranks,
                                   params, base / "generated", debug=False,
                                   epoch_from_heap=True, max_ctas=settings.max_ctas)
        ref_dir = None
        if reference is not None:
            ref_dir = write_case(reference, base / "generated", base / "reference")
        drawn = draw_for(instance, kind, settings.seed)
        if drawn is None:
            if settings.contents is not None and value == sweep.values[0]:
                plan.notes.append(f"--contents {kind}: {protocol.name} reads no run-time "
                                  "values; its windows hold the seeded bytes")
            traffic, checks = traffic_of(instance), tuple(instance_checks(instance))
            contents, draw_file = None, None
        else:  # the bytes and checks of the drawn contents, not of the bounds
            contents, concrete = drawn
            traffic, checks = traffic_of(concrete), contents.draw.checks
            if contents.rewritten:
                plan.notes.append(f"{label} at {value}: {contents.rewritten}")
            draw_file = write_draw(contents.draw, base / "contents" / f"{kind}.pkl")
        plan.points.append(PlannedPoint(
            label, protocol.name, sweep, value, traffic,
            sum(size for _, size in instance.window_sizes), checks,
            base / "generated", ref_dir, compare, request.ceiling, contents, draw_file))


def plan_all(requests: Sequence[SweepRequest], settings: Settings) -> Plan:
    plan = Plan()
    for request in requests:
        plan_request(request, settings, plan)
    return plan


# ------------------------------------------------------------------------------ building


def floors_dir(settings: Settings) -> Path:
    """An instance of one empty kernel (no windows, no parameters): the launch floor."""
    directory = settings.build_root / "floors"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kernels.cu").write_text(EMPTY_KERNEL, encoding="utf-8")
    manifest = {"abi": 1, "protocol": "empty", "target": FLOOR_TARGET,
                "nranks": settings.ranks, "heap_size": 4096, "windows": [],
                "kernels": [{"name": "ccogen_bench_empty", "grid": 1, "block": 32,
                             "params": []}]}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n",
                                             encoding="utf-8")
    return directory


def build_all(jobs: Sequence[tuple[Path, str]], arch: str, parallel: int
              ) -> tuple[dict[Path, Path], dict[Path, str]]:
    """Cubins of the (manifest dir, target) jobs: ({dir: cubin}, {dir: error})."""
    from ccogen.toolchains.cubin import build_cubin

    def one(job: tuple[Path, str]) -> tuple[Path, Path | None, str]:
        directory, target = job
        try:
            return directory, build_cubin(directory, target, arch), ""
        except (CompileError, ToolchainError) as exc:
            return directory, None, str(exc)

    built: dict[Path, Path] = {}
    failed: dict[Path, str] = {}
    with ThreadPoolExecutor(max(1, parallel or (os.cpu_count() or 4))) as pool:
        for directory, cubin, error in pool.map(one, jobs):
            if cubin is not None:
                built[directory] = cubin
            else:
                failed[directory] = error
    return built, failed


# ------------------------------------------------------------------------------ cases


def timing_for(point: PlannedPoint, settings: Settings) -> Timing:
    graph = settings.graph and point.traffic.per_direction <= settings.graph_max
    return Timing(settings.warmup, settings.samples,
                  settings.epochs_per_graph if graph else 1, graph)


def cases_of(plan: Plan, cubins: dict[Path, Path], settings: Settings) -> list[CaseSpec]:
    from ccogen.bench.reference import timer_offset

    cases = []
    for p in plan.points:
        timing = timing_for(p, settings)
        again = p.window_bytes <= settings.verify_after_max
        drawn = {} if p.contents is None else {
            "drawn": p.contents.spec, "draw_file": str(p.draw_file),
            "contents": p.contents.draw.label, "untimed": p.contents.problem or ""}
        if p.generated_dir in cubins:
            cases.append(CaseSpec(p.key("generated"), "generated", str(p.generated_dir),
                                  str(cubins[p.generated_dir]), p.checks, timing,
                                  verify_after=again, **drawn))  # type: ignore[arg-type]
        if p.reference_dir is not None and p.reference_dir in cubins:
            manifest = json.loads((p.reference_dir / "manifest.json").read_text())
            cases.append(CaseSpec(p.key("reference"), "reference", str(p.reference_dir),
                                  str(cubins[p.reference_dir]), p.checks, timing,
                                  verify_after=again, timer_offset=timer_offset(manifest),
                                  **drawn))  # type: ignore[arg-type]
    return cases


def stage_draws(cases: Sequence[CaseSpec], shared: Path) -> list[CaseSpec]:
    """Each run-time case's drawn contents as the draws of its verified epochs, in the
    shared directory (`ccogen.rt.drawn.load_epoch` reads `draw-E.pkl`): epoch 0, before
    timing, and epoch 1 + `timing.epochs`, after it (the timed epochs refill nothing)."""
    staged = []
    for index, case in enumerate(cases):
        if case.drawn is None:
            staged.append(case)
            continue
        directory = shared / "draws" / str(index)
        directory.mkdir(parents=True, exist_ok=True)
        for epoch in (0, 1 + case.timing.epochs):  # links: a MoE draw is hundreds of MiB
            (directory / f"draw-{epoch}.pkl").symlink_to(Path(case.draw_file).resolve())
        staged.append(replace(case, drawn_dir=str(directory)))
    return staged


def floor_cases(directory: Path, cubin: Path, settings: Settings) -> list[CaseSpec]:
    stream = Timing(settings.warmup, max(settings.samples, 100), 1, False)
    graph = Timing(settings.warmup, settings.samples, max(settings.epochs_per_graph, 20), True)
    return [CaseSpec(f"floors/{mode}", "empty-kernel", str(directory), str(cubin), (), timing,
                     module_init=False, verify_after=False)
            for mode, timing in (("stream", stream), ("graph", graph))]


def compares_of(plan: Plan, settings: Settings) -> list[CompareSpec]:
    seen: dict[str, CompareSpec] = {}
    for p in plan.points:
        if p.compare is None or p.traffic.per_peer <= 0:
            continue
        key = compare_key(p.compare, p.traffic.per_peer)
        seen.setdefault(key, CompareSpec(key, p.compare, p.traffic.per_peer, settings.warmup,
                                         settings.samples))
    return list(seen.values())


def ceiling_for(plan: Plan, sweep: str) -> str:
    """The ceiling a sweep is read against: the request's choice, else both-ways copies
    when some point moves bytes both ways over a link (pingpong's two directions take
    turns: its campaign sweeps ask for `ce`)."""
    points = [p for p in plan.points if p.sweep == sweep]
    chosen = {p.ceiling for p in points} - {"auto"}
    if chosen:
        return chosen.pop()
    return "ce-bidir" if any(p.traffic.bidirectional for p in points) else "ce"


def compare_key(kind: str, per_peer: int) -> str:
    return f"nccl/{kind}/{per_peer}"


# ------------------------------------------------------------------------------ running


def run_bench(requests: Sequence[SweepRequest], settings: Settings, *,
              progress: Callable[[str], None] | None = None,
              build_only: bool = False) -> BenchResult:
    """Plan, build and (unless build_only) measure; see the module docstring."""
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    from ccogen.rt.engines import build_engine
    from ccogen.rt.launch import device_arch
    from ccogen.rt.placement import place

    started = time.time()
    placement = None if build_only else place(settings.ranks, settings.target)
    if placement is not None and placement.shared:
        settings = shared_gpu_settings(settings, placement)
    plan = plan_all(requests, settings)
    result = BenchResult(settings.target, settings.ranks)
    result.errors += plan.notes
    if placement is not None and placement.shared:
        result.errors.append(f"{placement.describe()}; no link ceilings and no NCCL "
                             "collectives beside it (NCCL needs a GPU per rank)")
    arch = settings.arch or ("sm_90" if build_only else device_arch(0))
    jobs = [(p.generated_dir, settings.target) for p in plan.points]
    jobs += [(p.reference_dir, settings.target) for p in plan.points if p.reference_dir]
    floors = floors_dir(settings) if settings.floors else None
    if floors is not None:
        jobs.append((floors, FLOOR_TARGET))
    say(f"bench: building {len(jobs)} cubins for {arch} ({settings.target})")
    t0 = time.time()
    with ThreadPoolExecutor(1) as shim:  # the engine shim builds beside the cubins
        engine_job = shim.submit(build_engine, settings.target, arch)
        cubins, failed = build_all(jobs, arch, settings.jobs)
        engine, library = engine_job.result()
    say(f"bench: built in {time.time() - t0:.0f} s")
    for directory, error in failed.items():
        if floors is not None and directory == floors:
            result.errors.append(f"no empty-kernel floor: {error.splitlines()[0]}")
        else:
            raise CompileError(error)
    result.info.update({"library": library.describe(), "arch": arch, "settings": {
        "warmup": settings.warmup, "samples": settings.samples,
        "epochs_per_graph": settings.epochs_per_graph, "graph_max": settings.graph_max,
        "seed": settings.seed}})
    result.info["ceiling"] = {p.sweep: ceiling_for(plan, p.sweep) for p in plan.points}
    contents = {p.sweep: p.contents.describe for p in plan.points if p.contents is not None}
    if contents:
        result.info["contents"] = contents
    if build_only:
        return result
    ceilings = None
    if settings.ceiling:
        from ccogen.bench.ceiling import CeilingSpec, measure_ceilings, sizes_for

        say("bench: measuring the link ceilings (copy engine, SM stores)")
        ceilings = measure_ceilings(CeilingSpec(sizes_for(
            [p.traffic.per_direction for p in plan.points])))
        result.info["ceiling_backend"] = ceilings.backend
        if ceilings.error:
            result.errors.append(ceilings.error)
    cases = cases_of(plan, cubins, settings)
    if floors is not None and floors in cubins:
        cases += floor_cases(floors, cubins[floors], settings)
    shared = placement is not None and placement.shared
    if placement is not None and shared:
        from ccogen.manifest import load_manifest
        from ccogen.rt.placement import check_residency

        for case in cases:  # every rank's kernels resident together, or they could hang
            check_residency(load_manifest(case.manifest_dir), Path(case.cubin), placement)
    compares = [] if shared else compares_of(plan, settings)
    say(f"bench: running {len(cases)} cases and {len(compares)} collectives on "
        f"{settings.ranks} {'ranks sharing GPUs (MPS)' if shared else 'GPUs'}")
    ranks = _run_ranks(cases, compares, settings, engine,
                       placement.devices if placement is not None else ())
    merge(result, plan, ranks, ceilings, settings)
    result.info["wall_s"] = round(time.time() - started, 1)
    return result


def shared_gpu_settings(settings: Settings, placement: Placement) -> Settings:
    """Ranks sharing a GPU under MPS (functional only, as `ccogen run` there): the SM
    budget that keeps every rank's kernels resident together (unless `--max-ctas` gave
    one); no link ceilings (there is no link) and no empty-kernel floor (no timing means
    anything there)."""
    from ccogen.codegen.backends.base import DEFAULT_MAX_CTAS
    from ccogen.rt.placement import shared_budget

    budget = settings.max_ctas
    if budget is None:
        budget = min(DEFAULT_MAX_CTAS, shared_budget(placement.sms, placement.per_gpu))
    return replace(settings, max_ctas=budget, ceiling=False, floors=False)


def _run_ranks(cases: Sequence[CaseSpec], compares: Sequence[CompareSpec], settings: Settings,
               engine: Path, devices: tuple[int, ...] = ()) -> list[RankBench]:
    from ccogen.bench.worker import worker_main
    from ccogen.manifest import load_manifest
    from ccogen.rt.launch import buffer_layout, spawn_ranks

    manifests = [load_manifest(c.manifest_dir) for c in cases]
    # one allocation serves every case: its heap and, after it, its local buffers
    heap = max((buffer_layout(m)[1] for m in manifests), default=4096)
    barriers = max((m.lsa_barrier_count for m in manifests), default=0)
    with tempfile.TemporaryDirectory(prefix="ccogen-bench-") as shared:
        staged = stage_draws(cases, Path(shared))
        config = WorkerConfig(settings.target, settings.ranks, str(engine), heap, barriers,
                              tuple(staged), tuple(compares), settings.seed,
                              rendezvous_dir=shared, shared_dir=shared,
                              watchdog_s=settings.watchdog_s,
                              init_timeout_s=settings.watchdog_s, devices=devices)
        deadline = config.init_timeout_s + 90.0 * len(cases) + 60.0 * len(compares) + 120.0
        return spawn_ranks(config, main=worker_main,
                      failed=lambda rank, text: RankBench(rank, error=text),
                      deadline_s=deadline)


# ------------------------------------------------------------------------------ merging


def _merged(entries: Sequence[CaseTimes], nranks: int
            ) -> tuple[object, bool | None, str, float | None, str]:
    stats = slowest([e.times_us for e in entries])
    if any(e.verified is False for e in entries):
        verified: bool | None = False
    elif len(entries) == nranks and all(e.verified is True for e in entries):
        verified = True
    else:
        verified = None
    notes = list(dict.fromkeys(e.note for e in entries if e.note))
    for e in entries:
        notes += [f for f in e.failures if f not in notes][:2]
    kernel = next((e.in_kernel_us for e in entries if e.in_kernel_us is not None), None)
    mode = next((e.mode for e in entries if e.mode), "")
    return stats, verified, "; ".join(notes), kernel, mode


def merge(result: BenchResult, plan: Plan, ranks: Sequence[RankBench], ceilings: object,
          settings: Settings) -> None:
    """Turn the ranks' reports (and the ceilings) into result.points."""
    from ccogen.bench.collective import INFO_KEY
    from ccogen.bench.results import stats_of

    by_key: dict[str, list[CaseTimes]] = {}
    for r in ranks:
        if r.error:
            result.errors.append(f"rank {r.rank}: {r.error}")
        for c in r.cases:
            by_key.setdefault(c.key, []).append(c)
        if r.library and "library" not in result.info:
            result.info["library"] = r.library
        if r.device:
            result.info.setdefault("devices", {})[str(r.rank)] = r.device
    info = by_key.pop(INFO_KEY, [])
    if info:
        result.info["collectives"] = info[0].note
    failed_rank = next((r.error for r in ranks if r.error), None)
    n = len(ranks)

    def point(p: PlannedPoint, impl: str, key: str, epochs: int) -> Point:
        entries = by_key.get(key, [])
        stats, verified, note, kernel, mode = _merged(entries, n)
        if not entries:
            note = "not run" + (f" (a rank failed: {failed_rank.splitlines()[0]})"
                                if failed_rank else "")
        return Point(p.sweep, p.protocol, result.target, impl, p.param, p.value,
                     p.sweep_def.bytes, p.traffic.per_direction, mode or "-", epochs,
                     stats, verified, kernel, note)  # type: ignore[arg-type]

    times = getattr(ceilings, "times", {}) or {}
    for p in plan.points:
        epochs = timing_for(p, settings).epochs_per_sample
        for impl, directory in (("generated", p.generated_dir), ("reference", p.reference_dir)):
            if directory is not None:
                result.points.append(point(p, impl, p.key(impl), epochs))
        if p.compare is not None and p.traffic.per_peer > 0:
            result.points.append(point(p, "nccl", compare_key(p.compare, p.traffic.per_peer), 1))
        for impl, per_size in times.items():
            samples = per_size.get(p.traffic.per_direction)
            if samples:
                result.points.append(Point(p.sweep, p.protocol, result.target, impl, p.param,
                                           p.value, p.sweep_def.bytes, p.traffic.per_direction,
                                           "copy", 1, stats_of(samples)))
    for mode in ("stream", "graph"):
        entries = by_key.get(f"floors/{mode}", [])
        if entries:
            stats, _, note, _, got = _merged(entries, n)
            if got and got != mode:
                note = "; ".join(filter(None, [note, f"ran as {got}"]))
            result.points.append(Point("floors", "empty", result.target, "empty-kernel", "", 0,
                                       False, 0, mode, 1, stats, None, None, note))  # type: ignore[arg-type]



__all__ = ["COMPARES", "Plan", "PlannedPoint", "Settings", "SweepRequest", "build_all",
           "cases_of", "ceiling_for", "compare_key", "compares_of", "floor_cases", "floors_dir",
           "merge", "plan_all", "plan_request", "resolve_compare", "run_bench", "stage_draws",
           "timing_for"]
