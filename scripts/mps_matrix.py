#!/usr/bin/env python3
"""Issue 20's tests on ONE GPU shared by several NVSHMEM ranks under CUDA MPS.

Run from the repository root of a GPU machine with MPS up (`nvidia-cuda-mps-control -d`);
scripts/gpu_mps_session.sh runs every stage in order.  Stages:

  repro    counted_broadcast (default 8 MiB) at 3 ranks on one GPU: the launch shape that
           hung (--max-ctas 128, the residency check skipped, a debug build whose waits
           trap after ~2 s: expected to fail within 100 launches; reported, not judged),
           what the residency check says about it (must refuse), then the default budget
           for 100 back-to-back launches (must pass).
  repro-spin  the launch shape that hung as it hung (release build: spins until the
           watchdog).  Run it last: the killed ranks leave kernels spinning in MPS.
  matrix   every protocol of protocols/ x ranks (2, 4, 8) x {default parameters, largest
           size} x 100 back-to-back launches; the table of pass/fail.
  hog      a compute kernel holding most SMs for several seconds (another MPS client)
           while a protocol runs 100 launches at 2 ranks: it must finish; the report says
           whether it finished while the compute kernel still ran.
  budget   what the SM budget costs: alltoall at 2 ranks (64 MiB blocks) for several
           --max-ctas values, median time per launch and the put bandwidth (both ranks
           share the GPU: the figures compare budgets, they are not NVLink figures).

"Largest size": each protocol's size parameter scaled so that its largest copy is 8 MiB
(counted_broadcast, whose default is already 8 MiB: 32 MiB).  From 8 MiB per copy on,
the launch shape no longer changes (128 CTAs of 64 KiB is the most a group ever takes,
and any budget of 32 or less is reached at 2 MiB), so larger sizes only add bytes: the
bench campaign's 1 GiB points would need 8 GiB of window per rank at 8 ranks and minutes
of seeded data per verified epoch, for no new co-residency case.

A "launch" is one epoch of the protocol: every kernel once.  100 launches = one verified
epoch (windows filled with seeded bytes, every `ensure` checked on every rank), 98
epochs launched back to back with nothing on the host between them (no barrier, no
refill), then one more verified epoch (ccogen.bench.worker does exactly this).  Each
case's kernels pass the residency check (ccogen.rt.placement) before they run.

Every stage prints a markdown table, appends it to --out (default mps-matrix.md) and
writes its cases to <out>.json; exit status 0 when every case came out as expected.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MIB = 1 << 20
LARGEST = {  # protocol -> the parameters whose largest copy is 8 MiB (module docstring)
    "aggregated_batch": {"piece": 8 * MIB},
    "alltoall": {"block": 8 * MIB},
    "counted_broadcast": {"size": 32 * MIB},
    "counted_gather": {"block": 8 * MIB},
    "lane_ship": {"chunk": 8 * MIB},
    "pack_then_send": {"piece": 128 << 10},  # 64 pieces packed into one 8 MiB put
    "pingpong": {"size": 8 * MIB},
    "ring_allgather": {"chunk": 8 * MIB},
    "striped_put": {"stripe": 8 * MIB},
    "two_queue_pipeline": {"chunk": 8 * MIB},
}
HOG_SOURCE = r"""
extern "C" __global__ void ccogen_hog(unsigned long long cycles) {
  extern __shared__ unsigned char held[];  // the whole SM's shared memory: one CTA per SM
  const long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {
    if (threadIdx.x == 0) held[0] += 1;
  }
}
"""
CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13  # kHz
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


@dataclass
class Case:
    key: str
    protocol: str
    nranks: int
    size: str                   # default | largest | budget N
    params: dict[str, int]
    max_ctas: int | None = None  # None: what `ccogen run` picks for the placement
    launches: int = 100
    check: bool = True          # the residency check before running
    debug: bool = False         # bounded waits: a hang traps after ~2 s instead of spinning
    cooperative: bool = True    # False: launch every kernel with cuLaunchKernel (experiment)
    expect: str = "pass"        # pass | hang | refused
    directory: str = ""
    cubin: str = ""
    grid: int = 0
    budget: int = 0
    status: str = "not run"
    detail: str = ""
    median_us: float | None = None
    checks: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        return self.status.split(" ")[0] == self.expect


# ------------------------------------------------------------------------------ planning


def plan_matrix(protocols: Sequence[str], ranks: Sequence[int], launches: int) -> list[Case]:
    from ccogen.instantiate import team_sizes
    from ccogen.syntax import load_ir

    cases = []
    for name in protocols:
        protocol = load_ir(ROOT / "protocols" / f"{name}.cco")
        for n in ranks:
            for size, params in (("default", {}), ("largest", LARGEST.get(name, {}))):
                case = Case(f"{name}/n{n}/{size}", name, n, size, dict(params), launches=launches)
                fixed = team_sizes(protocol, None, params=params)
                if protocol.team.size is not None and n not in fixed:
                    case.status = f"n/a (team of {'/'.join(map(str, fixed))})"
                cases.append(case)
    return cases


def generate(cases: Sequence[Case], work: Path, target: str) -> None:
    """Generate each case (the budget `ccogen run` would pick unless the case fixes one)."""
    from ccogen.errors import DiagnosticError
    from ccogen.manifest import load_manifest
    from ccogen.rt.api import compile_for_run, placement_and_budget
    from ccogen.rt.data import instance_checks
    from ccogen.syntax import load_ir

    for case in cases:
        if case.status != "not run":
            continue
        _, budget = placement_and_budget(target, case.nranks, case.max_ctas)
        out = work / case.key.replace("/", "-")
        try:
            instance = compile_for_run(load_ir(ROOT / "protocols" / f"{case.protocol}.cco"),
                                       f"{case.protocol}.cco", target, case.nranks,
                                       case.params, out, debug=case.debug, max_ctas=budget)
        except DiagnosticError as exc:
            case.status = "n/a (refused by the checker)"
            case.detail = "; ".join(d.message for d in exc.diagnostics)[:200]
            continue
        if not case.cooperative:  # what a launcher that ignores the manifest's flag does
            data = json.loads((out / "manifest.json").read_text())
            for k in data["kernels"]:
                k["cooperative"] = False
            (out / "manifest.json").write_text(json.dumps(data, indent=2))
        manifest = load_manifest(out)
        case.directory, case.checks = str(out), tuple(instance_checks(instance))
        case.grid = max(k.grid[0] * k.grid[1] * k.grid[2] for k in manifest.kernels)
        case.budget = manifest.max_ctas or 0


def build(cases: Sequence[Case], target: str, jobs: int) -> tuple[Path, str]:
    """Cubins for every generated case (in parallel) and the engine shim."""
    from concurrent.futures import ThreadPoolExecutor

    from ccogen.bench.runner import build_all
    from ccogen.rt.engines import build_engine
    from ccogen.rt.launch import device_arch

    arch = device_arch(0)
    todo = [c for c in cases if c.directory and c.status == "not run"]
    with ThreadPoolExecutor(1) as shim:
        engine_job = shim.submit(build_engine, target, arch)
        built, failed = build_all([(Path(c.directory), target) for c in todo], arch, jobs)
        engine, library = engine_job.result()
    for c in todo:
        if Path(c.directory) in built:
            c.cubin = str(built[Path(c.directory)])
        else:
            c.status, c.detail = "FAIL (build)", failed.get(Path(c.directory), "")[:300]
    return engine, library.describe()


def check(cases: Sequence[Case], target: str) -> None:
    """The residency check of each runnable case (a refusal is the case's result)."""
    from ccogen.errors import RunError
    from ccogen.manifest import load_manifest
    from ccogen.rt import native
    from ccogen.rt.placement import ResidencyError, check_residency, place

    rt = native.load()

    ctx = rt.Context(0)  # held across the checks: each one then retains it cheaply
    try:
        for c in cases:
            if c.status != "not run" or not c.check:
                continue
            try:
                check_residency(load_manifest(c.directory), Path(c.cubin),
                                place(c.nranks, target))
            except ResidencyError as exc:
                c.status, c.detail = "refused", str(exc)
            except RunError as exc:  # no MPS, too few GPUs: nothing of this case can run
                c.status, c.detail = "FAIL (placement)", str(exc)
    finally:
        ctx.release()


# ------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class SessionConfig:
    """What launch.spawn_ranks needs, plus where each rank runs."""

    worker: Any  # ccogen.bench.cases.WorkerConfig
    devices: tuple[int, ...]

    @property
    def nranks(self) -> int:
        return int(self.worker.nranks)

    @property
    def watchdog_s(self) -> float:
        return float(self.worker.watchdog_s)

    @property
    def init_timeout_s(self) -> float:
        return float(self.worker.init_timeout_s)

    @property
    def shared_dir(self) -> str:
        return str(self.worker.shared_dir)

    @property
    def iters(self) -> int:
        return 1


def rank_main(config: SessionConfig, rank: int, results_queue: Any) -> None:
    """One spawned rank: ccogen.bench.worker's cases, on the device of the placement."""
    import faulthandler

    from ccogen.bench.cases import RankBench
    from ccogen.bench.worker import run_bench_rank
    from ccogen.rt.rendezvous import FileRendezvous
    from ccogen.rt.report import RankResult

    shared = Path(config.shared_dir)
    shared.mkdir(parents=True, exist_ok=True)
    stack = open(shared / f"rank{rank}.stack", "w")  # noqa: SIM115
    faulthandler.register(signal.SIGUSR1, file=stack, all_threads=True)

    def report(result: Any) -> None:
        if isinstance(result, RankResult):
            result = RankBench(rank, error=result.error or result.wait or "a rank hung")
        results_queue.put(result)
        results_queue.close()
        results_queue.join_thread()
        os._exit(0)

    rendezvous = FileRendezvous(Path(config.worker.rendezvous_dir))
    report(run_bench_rank(config.worker, rank, config.devices[rank], rendezvous, report))


def run_cases(cases: Sequence[Case], target: str, engine: Path, watchdog_s: float,
              deadline: float, say: Any) -> None:
    """Run the runnable cases, one engine session per team size; a session that stops
    early is started again with the cases it did not reach, while time is left."""
    from ccogen.errors import RunError
    from ccogen.rt.placement import place

    for n in sorted({c.nranks for c in cases}):
        try:
            placement = place(n, target)
        except RunError as exc:
            for c in cases:
                if c.nranks == n and c.status == "not run":
                    c.status, c.detail = "FAIL (placement)", str(exc)
            continue
        while True:
            todo = [c for c in cases if c.nranks == n and c.status == "not run" and c.cubin]
            left = deadline - time.monotonic()
            if not todo:
                break
            if left < 20:
                for c in todo:
                    c.status = "not run (out of time)"
                break
            say(f"== {n} ranks: {len(todo)} cases, {left:.0f} s left")
            if not _session(todo, target, engine, placement.devices, watchdog_s, left, say):
                for c in todo:  # nothing completed: another session would fail the same way
                    if c.status == "not run":
                        c.status = "not run (its session failed)"
                break


def _session(cases: Sequence[Case], target: str, engine: Path, devices: tuple[int, ...],
             watchdog_s: float, budget_s: float, say: Any) -> bool:
    """Run the cases in one engine session; whether any case completed on every rank."""
    from ccogen.bench.cases import CaseSpec, RankBench, Timing, WorkerConfig
    from ccogen.manifest import load_manifest
    from ccogen.rt.launch import spawn_ranks

    n = cases[0].nranks
    manifests = [load_manifest(c.directory) for c in cases]
    specs = tuple(CaseSpec(c.key, "generated", c.directory, c.cubin, c.checks,
                           Timing(warmup=0, samples=max(1, c.launches - 2)),
                           device_epoch=False, verify_after=True) for c in cases)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ccogen-mps-") as shared:
        worker = WorkerConfig(target, n, str(engine), max(m.heap_size for m in manifests),
                              max(m.lsa_barrier_count for m in manifests), specs, (), seed=20,
                              rendezvous_dir=shared, shared_dir=shared, watchdog_s=watchdog_s,
                              init_timeout_s=min(120.0, budget_s / 2))
        config = SessionConfig(worker, devices)
        deadline = min(budget_s - 10, worker.init_timeout_s + 25.0 * len(cases) + 30)
        ranks = spawn_ranks(config, main=rank_main,
                       failed=lambda rank, text: RankBench(rank, error=text),
                       deadline_s=deadline)
    by_key: dict[str, list[Any]] = {}
    for r in ranks:
        for t in r.cases:
            by_key.setdefault(t.key, []).append(t)
    errors = [f"rank {r.rank}: {r.error}" for r in ranks if r.error]
    stopped = False
    for c in cases:
        got = by_key.get(c.key, [])
        if len(got) == n and not stopped:
            bad = [t for t in got if t.verified is not True or len(t.times_us) < c.launches - 2]
            if not bad:
                c.status = "pass"
                c.median_us = max(statistics.median(t.times_us) for t in got)
            else:
                c.status = "FAIL (ensure)"
                c.detail = "; ".join(dict.fromkeys(t.note for t in bad if t.note))[:300]
            continue
        if not stopped:  # the first case some rank did not finish: where the session stopped
            stopped = True
            hung = any("did not finish" in e or "time limit" in e or "hung" in e for e in errors)
            trapped = c.debug and any("CUDA_ERROR" in e for e in errors)
            c.status = ("hang (watchdog)" if hung else
                        "hang (a bounded wait trapped)" if trapped else "FAIL (stopped)")
            c.detail = " | ".join(errors)[:600]
        # later cases stay "not run": run_cases starts a new session for them
    say(f"   session of {n} ranks: {time.monotonic() - started:.0f} s")
    return any(len(by_key.get(c.key, [])) == n for c in cases)


# ------------------------------------------------------------------------------ output


def table(cases: Sequence[Case], title: str) -> str:
    rows = [f"### {title}", "",
            "| protocol | ranks | size | params | grid (budget) | result | median us/launch |",
            "|---|---|---|---|---|---|---|"]
    for c in cases:
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in c.params.items()) or "defaults"
        grid = f"{c.grid} ({c.budget})" if c.grid else "-"
        med = f"{c.median_us:.1f}" if c.median_us is not None else "-"
        rows.append(f"| {c.protocol} | {c.nranks} | {c.size} | {params} | {grid} | "
                    f"{c.status}{' (expected)' if c.expect != 'pass' and c.ok else ''} | {med} |")
    details = [f"- {c.key}: {c.detail}" for c in cases if c.detail]
    return "\n".join(rows + (["", *details] if details else [])) + "\n"


def _fmt(v: int) -> str:
    for unit, size in (("MiB", MIB), ("KiB", 1 << 10)):
        if v >= size and v % size == 0:
            return f"{v // size}{unit}"
    return str(v)


def emit(cases: Sequence[Case], title: str, out: Path, extra: str = "") -> None:
    text = table(cases, title) + (extra + "\n" if extra else "")
    print(text, flush=True)
    with out.open("a", encoding="utf-8") as f:
        f.write(text + "\n")
    record = out.with_suffix(".json")
    data = json.loads(record.read_text()) if record.is_file() else {}
    data[title] = [{k: v for k, v in asdict(c).items() if k != "checks"} for c in cases]
    record.write_text(json.dumps(data, indent=1))


# ------------------------------------------------------------------------------ stages


def prepare(args: argparse.Namespace, cases: list[Case]) -> Path:
    """Generate, build and check the cases; the engine shim."""
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.monotonic()
    generate(cases, Path(args.work) / args.stage, args.target)
    engine, library = build(cases, args.target, args.jobs)
    say(f"== built {sum(1 for c in cases if c.cubin)} cubins in {time.monotonic() - t0:.0f} s "
        f"({library})")
    check(cases, args.target)
    return engine


def stage_cases(args: argparse.Namespace, cases: list[Case], title: str,
                extra: str = "", engine: Path | None = None) -> bool:
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    deadline = time.monotonic() + args.total_s
    if engine is None:
        engine = prepare(args, cases)
    run_cases(cases, args.target, engine, args.watchdog, deadline, say)
    emit(cases, title, Path(args.out), extra)
    return all(c.ok or c.status.startswith("n/a") for c in cases)


def stage_repro(args: argparse.Namespace) -> bool:
    """The old launch shape hangs; the residency check refuses it; the default passes.

    The shape that hung runs as a debug build: its waits give up after ~2 s and trap, so
    no kernel is left spinning in the MPS server (terminating a client with work still
    running can leave the server and its other clients in an undefined state).  Whether
    it hangs depends on which rank's CTAs the GPU takes first: it is reported, and does
    not decide the exit status (the refusal and the default budget do).  Stage
    `repro-spin` runs it as it hung, spinning until the watchdog: last in a session."""
    old = Case("counted_broadcast/n3/old-shape-debug", "counted_broadcast", 3, "default", {},
               max_ctas=128, launches=args.launches, check=False, debug=True, expect="hang")
    refused = Case("counted_broadcast/n3/old-shape-checked", "counted_broadcast", 3,
                   "default", {}, max_ctas=128, launches=3, expect="refused")
    fixed = Case("counted_broadcast/n3/default-budget", "counted_broadcast", 3, "default", {},
                 launches=args.launches)
    args.watchdog = min(args.watchdog, 10.0)
    stage_cases(args, [old, refused, fixed], "repro: counted_broadcast (8 MiB) at 3 ranks on "
                "one GPU: the shape that hung (128 CTAs, debug build, run without the "
                "residency check), the same files through the check, the default budget")
    return refused.ok and fixed.ok


def stage_repro_spin(args: argparse.Namespace) -> bool:
    """Informational (never fails the session): the shape that hung, spinning as it hung."""
    old = Case("counted_broadcast/n3/old-shape", "counted_broadcast", 3, "default", {},
               max_ctas=128, launches=args.launches, check=False, expect="hang")
    args.watchdog = min(args.watchdog, 10.0)
    stage_cases(args, [old], "repro-spin: the shape that hung, as it hung (release build, no "
                "residency check): expected to hit the watchdog")
    return True


def stage_matrix(args: argparse.Namespace) -> bool:
    protocols = args.protocols or sorted(p.stem for p in (ROOT / "protocols").glob("*.cco"))
    cases = plan_matrix(protocols, args.ranks, args.launches)
    return stage_cases(args, cases, f"matrix: {len(protocols)} protocols x ranks "
                       f"{'/'.join(map(str, args.ranks))} x (default, largest) x "
                       f"{args.launches} launches, one GPU under MPS")


def stage_case(args: argparse.Namespace) -> bool:
    """One case from the command line (experiments: --max-ctas, --debug, --no-check,
    --non-cooperative, --expect)."""
    cases = [Case(f"{args.protocol}/n{n}/{args.label}", args.protocol, n, args.label,
                  dict(args.param), max_ctas=args.max_ctas, launches=args.launches,
                  check=not args.no_check, debug=args.debug,
                  cooperative=not args.non_cooperative, expect=args.expect)
             for n in args.ranks]
    how = ", ".join(w for w, on in (("debug build", args.debug),
                                    ("no residency check", args.no_check),
                                    ("cuLaunchKernel", args.non_cooperative)) if on)
    return stage_cases(args, cases, f"case: {args.protocol} x {args.launches} launches, "
                       f"--max-ctas {args.max_ctas or 'auto'}{f' ({how})' if how else ''}, "
                       f"expected: {args.expect}")


def stage_budget(args: argparse.Namespace) -> bool:
    block = args.budget_block
    cases = [Case(f"alltoall/n2/budget{b}", "alltoall", 2, f"budget {b}", {"block": block},
                  max_ctas=b, launches=args.launches) for b in args.budgets]
    ok = stage_cases(args, cases, f"budget: alltoall, 2 ranks on one GPU, block "
                     f"{_fmt(block)}, what --max-ctas costs")
    rows = ["| --max-ctas | grid | median us/launch | put GB/s per rank |", "|---|---|---|---|"]
    for c in cases:
        gbs = f"{block / (c.median_us * 1e-6) / 1e9:.0f}" if c.median_us else "-"
        rows.append(f"| {c.max_ctas} | {c.grid or '-'} | "
                    f"{f'{c.median_us:.1f}' if c.median_us else c.status} | {gbs} |")
    text = "\n".join(rows) + "\n"
    print(text)
    with Path(args.out).open("a", encoding="utf-8") as f:
        f.write(text + "\n")
    return ok or all(c.status in ("pass", "refused") for c in cases)


def stage_hog(args: argparse.Namespace) -> bool:
    """A long compute kernel (another MPS client) holds `hog_sms` SMs while a protocol runs."""
    case = Case(f"{args.hog_protocol}/n2/with-hog", args.hog_protocol, 2, "default", {},
                launches=args.launches)
    engine = prepare(args, [case])  # everything built before the compute kernel starts
    hog = subprocess.Popen([sys.executable, __file__, "hog-kernel", "--hog-sms",
                            str(args.hog_sms), "--hog-seconds", str(args.hog_seconds)],
                           stdout=subprocess.PIPE, text=True)
    assert hog.stdout is not None
    first = hog.stdout.readline().strip()  # "started <t>" once the kernel is launched
    if not first.startswith("started"):
        hog.wait(timeout=30)
        print(f"hog kernel did not start: {first!r}")
        return False
    hog_start = float(first.split()[1])
    t0 = time.time()
    args.watchdog = max(args.watchdog, args.hog_seconds + 20)  # kernels may wait for its SMs
    ok = stage_cases(args, [case], f"hog: {args.hog_protocol} at 2 ranks while a compute "
                     f"kernel holds {args.hog_sms} SMs for {args.hog_seconds:g} s", engine=engine)
    t1 = time.time()
    rest = hog.stdout.read().strip()
    hog.wait(timeout=max(5.0, args.hog_seconds * 2))
    hog_end = float(rest.split()[-1]) if rest.startswith("ended") else float("nan")
    during = ("while the compute kernel still ran" if t1 < hog_end else
              "after the compute kernel ended")
    note = (f"compute kernel: {args.hog_sms} CTAs (one per SM: each takes the SM's shared "
            f"memory) from t=0 to t={hog_end - hog_start:.1f} s; the protocol (bootstrap, "
            f"{args.launches} launches, checks) from t={t0 - hog_start:.1f} s to "
            f"t={t1 - hog_start:.1f} s: {case.status}, finished {during}; "
            f"compute kernel exit status {hog.returncode}")
    print(note)
    with Path(args.out).open("a", encoding="utf-8") as f:
        f.write(note + "\n\n")
    return ok and hog.returncode == 0


def hog_kernel(args: argparse.Namespace) -> int:
    """The compute kernel of stage `hog`, in its own process (its own MPS client)."""
    from ccogen.rt import native

    rt = native.load()
    from ccogen.rt.launch import device_arch
    from ccogen.toolchains.cubin import compile_text

    cubin = compile_text(HOG_SOURCE, "nccl-lsa", device_arch(0))
    ctx = rt.Context(0)
    module = rt.Module(cubin.read_bytes())
    fn = module.function("ccogen_hog")
    smem = int(rt.device_attribute(0, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    clock_khz = int(rt.device_attribute(0, CU_DEVICE_ATTRIBUTE_CLOCK_RATE))
    cycles = int(args.hog_seconds * clock_khz * 1000)
    stream = rt.Stream(True)
    rt.launch(fn, args.hog_sms, 256, smem, [("cycles", struct.pack("<Q", cycles))], stream)
    print(f"started {time.time():.3f}", flush=True)
    stream.synchronize()
    print(f"ended {time.time():.3f}", flush=True)
    module.unload()
    ctx.release()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stage", choices=("repro", "repro-spin", "matrix", "hog", "budget", "case",
                                     "hog-kernel"))
    p.add_argument("--target", default="nvshmem")
    p.add_argument("--ranks", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4, 8])
    p.add_argument("--protocols", type=lambda s: s.split(","), default=None)
    p.add_argument("--launches", type=int, default=100)
    p.add_argument("--watchdog", type=float, default=20.0, help="seconds per wait on the GPU")
    p.add_argument("--total-s", type=float, default=300.0, help="time for this stage")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel nvcc")
    p.add_argument("--work", default="/tmp/ccogen-mps-work")
    p.add_argument("--out", default="mps-matrix.md")
    p.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")],
                   default=[8, 16, 32, 64, 128])
    p.add_argument("--budget-block", type=int, default=64 * MIB)
    p.add_argument("--hog-sms", type=int, default=100)
    p.add_argument("--hog-seconds", type=float, default=15.0)
    p.add_argument("--hog-protocol", default="counted_broadcast")
    p.add_argument("--protocol", default="counted_broadcast", help="stage case")
    p.add_argument("--param", type=lambda s: (s.split("=")[0], int(s.split("=")[1])),
                   action="append", default=[], help="stage case: K=V (an integer)")
    p.add_argument("--max-ctas", type=int, default=None, help="stage case")
    p.add_argument("--label", default="default", help="stage case: the size column")
    p.add_argument("--debug", action="store_true", help="stage case: bounded waits")
    p.add_argument("--no-check", action="store_true", help="stage case: skip the check")
    p.add_argument("--non-cooperative", action="store_true", help="stage case")
    p.add_argument("--expect", default="pass", choices=("pass", "hang", "refused"))
    args = p.parse_args(argv)
    if args.stage == "hog-kernel":
        return hog_kernel(args)
    stage = {"repro": stage_repro, "repro-spin": stage_repro_spin, "matrix": stage_matrix,
             "hog": stage_hog, "budget": stage_budget, "case": stage_case}[args.stage]
    return 0 if stage(args) else 1


if __name__ == "__main__":
    raise SystemExit(main())
