#!/usr/bin/env python3
"""The library's run-time protocols at their real shapes on ONE GPU shared by NVSHMEM ranks
under CUDA MPS (issue 26), and the zero-cost comparison at 2 ranks.

Run from the repository root of a GPU machine with MPS up (`nvidia-cuda-mps-control -d`)
and the native extension built (scripts/gpu_setup.sh, `build_extension`);
scripts/gpu_realshape_session.sh runs the three stages under their budgets:

    python scripts/realshape_mps_run.py runs --out runs.md [--cases decode,prefill]
    python scripts/realshape_mps_run.py sanitizer --out sanitizer.md
    python scripts/realshape_mps_run.py zero --out zero.md --bench-out DIR

`runs`: `ccogen run --target nvshmem --iters 100` of each case, every rank on GPU 0:
moe_dispatch, moe_combine and moe_dispatch_ntok (tests/torch/protocols: the token count
`ntok[0]` drawn 0, the cap, then between, every launch) at decode (128 tokens x 7168
bf16, top-8) at 2, 4 and 8 ranks and prefill (4096 tokens) at 2 and 4, and alltoallv at
its default cap (4096 bf16) at 2, 4 and 8.  Each launch's contents are drawn afresh to
satisfy `require` and `ensure` is checked every launch (ccogen.rt.drawn, prepared from
the protocol: ccogen.rt.prepare).  Every case is generated and built first, in parallel;
cases run one at a time, each under --case-s, none starting past --total-s.
`sanitizer`: compute-sanitizer memcheck and racecheck of moe_dispatch at decode shape on
2 ranks, a debug build, 3 launches.
`zero`: `ccogen bench --ranks 2 --target nvshmem` of alltoallv, moe_dispatch, moe_combine,
allreduce_oneshot and allreduce_twoshot beside their hand-written references
(benchmarks/reference/nvshmem), at the real shapes; prints generated / reference per
point (the goal: <= 1.03).  Two ranks on one GPU under MPS: a proxy ratio (both share the
GPU alike), until two GPUs are lent.
Each subcommand prints a markdown table, writes it to --out and exits 0 when every row
passed.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # before CUDA is touched: the budget

NTOK = ROOT / "tests" / "torch" / "protocols" / "moe_dispatch_ntok.cco"
DECODE = {"tokens": 128, "hidden": 7168, "k": 8}
PREFILL = {"tokens": 4096, "hidden": 7168, "k": 8}


@dataclass(frozen=True)
class Case:
    protocol: str
    ranks: int
    params: tuple[tuple[str, object], ...]
    shape: str  # decode / prefill / default

    @property
    def path(self) -> Path:
        return NTOK if self.protocol == "moe_dispatch_ntok" else \
            ROOT / "protocols" / f"{self.protocol}.cco"

    @property
    def name(self) -> str:
        return f"{self.protocol}-{self.shape}-n{self.ranks}"

    def param_args(self) -> list[str]:
        return [a for k, v in self.params for a in ("--param", f"{k}={v}")]


def cases(which: str) -> list[Case]:
    out = []
    moe = ("moe_dispatch", "moe_combine", "moe_dispatch_ntok")
    for shape in which.split(","):
        if shape == "decode":
            for n in (2, 4, 8):
                for p in moe:
                    extra = (("T", "bf16"),) if p == "moe_dispatch_ntok" else ()
                    out.append(Case(p, n, (*DECODE.items(), *extra), "decode"))
        elif shape == "prefill":  # moe_combine last: its host prep is the slowest
            for p, n in (*((p, n) for p in ("moe_dispatch", "moe_dispatch_ntok")
                           for n in (2, 4)), ("moe_combine", 2), ("moe_combine", 4)):
                extra = (("T", "bf16"),) if p == "moe_dispatch_ntok" else ()
                out.append(Case(p, n, (*PREFILL.items(), *extra), "prefill"))
        elif shape == "alltoallv":
            out += [Case("alltoallv", n, (), "default") for n in (2, 4, 8)]
        else:
            raise SystemExit(f"--cases: decode, prefill or alltoallv, not {shape!r}")
    only = os.environ.get("RUNS_PROTOCOLS")  # e.g. moe_combine: one protocol's cases
    return [c for c in out if not only or c.protocol in only.split(",")]


def budget(ranks: int) -> int | None:
    from ccogen.rt.api import placement_and_budget

    return placement_and_budget("nvshmem", ranks, None)[1]


def build(case: Case, work: Path, debug: bool = False) -> str:
    """Generate (from the checked instance: no unrolling) and build the cubin; '' or why not."""
    from ccogen.instantiate import parse_params
    from ccogen.rt.api import generate_for_run
    from ccogen.syntax import load_ir
    from ccogen.toolchains.cubin import build_manifest_dir

    out = work / (case.name + ("-debug" if debug else ""))
    try:
        protocol = load_ir(case.path)
        params = parse_params([f"{k}={v}" for k, v in case.params], protocol)
        generate_for_run(protocol, case.path.name, "nvshmem", case.ranks, params, out,
                         debug=debug, max_ctas=budget(case.ranks))
        build_manifest_dir(out)
    except Exception as exc:  # reported in the table
        return f"build failed: {str(exc)[-600:]}"
    return ""


def run_cmd(case: Case, iters: int, work: Path, seed: int, debug: bool = False) -> list[str]:
    out = work / (case.name + ("-debug" if debug else ""))
    return [sys.executable, "-m", "ccogen", "run", str(case.path), "--target", "nvshmem",
            "--ranks", str(case.ranks), "--iters", str(iters), "--seed", str(seed),
            "--watchdog", "30", "-o", str(out), *case.param_args(),
            *(["--debug"] if debug else [])]


def run(cmd: list[str], timeout: float) -> tuple[str, str, float]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env=dict(os.environ), check=False)
        text = (proc.stdout + proc.stderr).strip()
        status = "PASS" if proc.returncode == 0 else f"FAIL rc={proc.returncode}"
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        status = "TIMEOUT"
    return status, text, time.monotonic() - t0


def _median(text: str) -> str:
    for line in text.splitlines():
        if "time per epoch: median" in line:
            return line.split("median", 1)[1].split("(", 1)[0].strip()
    return "-"


def _draws(text: str) -> str:
    for line in text.splitlines():
        if "draws" in line or "contents" in line:
            return line.strip()[:120]
    return ""


def _write(out: str, lines: list[str]) -> None:
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines), flush=True)


def cmd_runs(args: argparse.Namespace) -> int:
    start = time.monotonic()
    work = Path(args.work)
    todo = cases(args.cases)
    with ThreadPoolExecutor(min(len(todo), os.cpu_count() or 4)) as pool:
        built = dict(zip(todo, pool.map(lambda c: build(c, work), todo), strict=True))
    print(f"built {len(todo)} cases in {time.monotonic() - start:.0f} s", flush=True)
    rows, ok = [], True
    for case in todo:
        left = args.total_s - (time.monotonic() - start)
        shape = " ".join(f"{k}={v}" for k, v in case.params) or "defaults"
        if built[case]:
            rows.append(f"| {case.protocol} | {case.ranks} | {shape} | BUILD FAIL | - | - | "
                        f"{built[case][:200].replace('|', '/')} |")
            ok = False
            continue
        if left < 20:
            rows.append(f"| {case.protocol} | {case.ranks} | {shape} | not run | - | - | "
                        f"{left:.0f} s left |")
            ok = False
            continue
        status, text, dt = run(run_cmd(case, args.iters, work, args.seed),
                               min(args.case_s, left - 5))
        ok = ok and status == "PASS"
        print(f"== {case.name}: {status} ({dt:.0f} s)\n{text[-3000:]}", flush=True)
        last = " ".join(text.splitlines()[-2:])[:200].replace("|", "/")
        rows.append(f"| {case.protocol} | {case.ranks} | {shape} | {status} | {dt:.0f} | "
                    f"{_median(text)} | {last} |")
    _write(args.out, [
        "| protocol | ranks | shape | result | seconds | median launch | last lines |",
        "|---|---|---|---|---|---|---|", *rows,
        f"\ntotal {time.monotonic() - start:.0f} s; every rank on GPU "
        f"{os.environ['CUDA_VISIBLE_DEVICES']} (MPS); {args.iters} back-to-back launches per "
        "case, contents drawn afresh every launch (launch 0 every count 0, launch 1 every "
        "count at its cap, then mixed and uniform draws), `ensure` checked every launch"])
    return 0 if ok else 1


def cmd_sanitizer(args: argparse.Namespace) -> int:
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        _write(args.out, ["compute-sanitizer not found on the PATH: memcheck and racecheck "
                          "not run"])
        return 1
    work = Path(args.work)
    rows, ok = ["| check | instance | result | seconds | summary |", "|---|---|---|---|---|"], True
    # SANITIZER_PROTOCOLS=a,b picks the protocols (default moe_dispatch), each at decode
    for protocol in os.environ.get("SANITIZER_PROTOCOLS", "moe_dispatch").split(","):
        case = Case(protocol, 2, tuple(DECODE.items()), "decode")
        why = build(case, work, debug=True)
        if why:
            rows.append(f"| build | {protocol} decode n=2 | BUILD FAIL | - | {why[:300]} |")
            ok = False
            continue
        for check in ("memcheck", "racecheck"):
            cmd = [tool, "--tool", check, "--target-processes", "all", "--report-api-errors",
                   "no", "--error-exitcode", "9", *run_cmd(case, 3, work, args.seed, debug=True)]
            status, text, dt = run(cmd, args.case_s)
            ok = ok and status == "PASS"
            print(f"== compute-sanitizer {check} {protocol}: {status} ({dt:.0f} s)\n"
                  f"{text[-3000:]}", flush=True)
            summary = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK" in ln]
            last = (summary[-1] if summary else " ".join(text.splitlines()[-2:]))[:200]
            rows.append(f"| {check} | {protocol} tokens=128 hidden=7168 k=8, 2 ranks, debug, 3 "
                        f"launches | {status} | {dt:.0f} | {last.replace('|', '/')} |")
    _write(args.out, rows)
    return 0 if ok else 1


# (protocol, sweep, fixed params): the real shapes of the zero-cost comparison
ZERO = (
    ("alltoallv", "cap=4096", ()),
    ("moe_dispatch", "tokens=128,4096", ()),
    ("moe_combine", "tokens=128,4096", ()),
    ("allreduce_oneshot", "n=65536,917504", ()),
    ("allreduce_twoshot", "chunk=32768,458752", ()),  # chunk = n / 2 at 2 ranks
)


def cmd_zero(args: argparse.Namespace) -> int:
    start = time.monotonic()
    rows = ["| protocol | point | generated us | reference us | generated / reference | "
            "verified | within 1.03 |", "|---|---|---|---|---|---|---|"]
    ok = True
    # ZERO_PROTOCOLS=a,b keeps only those; ZERO_SWEEP=protocol:sweep;... replaces a sweep
    keep = [p for p in os.environ.get("ZERO_PROTOCOLS", "").split(",") if p]
    sweeps = dict(item.split(":", 1) for item in os.environ.get("ZERO_SWEEP", "").split(";")
                  if item)
    for protocol, sweep, fixed in ZERO:
        if keep and protocol not in keep:
            continue
        sweep = sweeps.get(protocol, sweep)
        left = args.total_s - (time.monotonic() - start)
        if left < 40:
            rows.append(f"| {protocol} | - | - | - | - | - | not run: {left:.0f} s left |")
            ok = False
            continue
        out = Path(args.bench_out) / protocol
        cmd = [sys.executable, "-m", "ccogen", "bench", str(ROOT / "protocols" /
               f"{protocol}.cco"), "--target", "nvshmem", "--ranks", "2", "--sweep", sweep,
               "-o", str(out), "--work", str(Path(args.work) / "zero" / protocol),
               "--no-ceiling", "--no-plot", "--compare", "none",
               *[a for p in fixed for a in ("--param", p)]]
        status, text, dt = run(cmd, min(args.case_s, left - 5))
        print(f"== bench {protocol}: {status} ({dt:.0f} s)\n{text[-2500:]}", flush=True)
        table = out / "results.csv"
        points = list(csv.DictReader(table.open(encoding="utf-8"))) if table.is_file() else []
        gen = {r["value_text"]: r for r in points if r["impl"] == "generated"}
        ref = {r["value_text"]: r for r in points if r["impl"] == "reference"}
        if not gen:
            rows.append(f"| {protocol} | {sweep} | - | - | - | - | {status}: no points |")
            ok = False
        for value, g in gen.items():
            r = ref.get(value)
            g_us = float(g["median_us"]) if g["median_us"] else None
            r_us = float(r["median_us"]) if r is not None and r["median_us"] else None
            ratio = None if g_us is None or not r_us else g_us / r_us
            within = ratio is not None and ratio <= 1.03
            ok = ok and within and g["verified"] != "no"
            rows.append(f"| {protocol} | {value} | {g['median_us'] or '-'} | "
                        f"{r['median_us'] if r is not None else '-'} | "
                        f"{'-' if ratio is None else f'{ratio:.3f}x'} | "
                        f"{g['verified'] or '-'}/{r['verified'] if r is not None else '-'} | "
                        f"{'yes' if within else '**no**'} |")
    rows.append(f"\n2 NVSHMEM ranks sharing GPU {os.environ['CUDA_VISIBLE_DEVICES']} under "
                "MPS: a proxy ratio (generated and reference timed alike in the same run), "
                f"until two GPUs are lent; total {time.monotonic() - start:.0f} s")
    _write(args.out, rows)
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    for name in ("runs", "sanitizer", "zero"):
        p = sub.add_parser(name)
        p.add_argument("--out", default=f"realshape-{name}.md")
        p.add_argument("--work", default="/tmp/ccogen-realshape-work")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--total-s", type=float, default=520)
        p.add_argument("--case-s", type=float, default=240, help="timeout of one case")
        if name == "runs":
            p.add_argument("--cases", default="decode,alltoallv,prefill")
            p.add_argument("--iters", type=int, default=100)
        if name == "zero":
            p.add_argument("--bench-out", default="/tmp/ccogen-realshape-bench")
    args = ap.parse_args()
    return {"runs": cmd_runs, "sanitizer": cmd_sanitizer, "zero": cmd_zero}[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
