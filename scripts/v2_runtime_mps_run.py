#!/usr/bin/env python3
"""Run-time sizes (language v2 §3, §7) on ONE GPU shared by several NVSHMEM ranks (CUDA MPS).

Run from the repository root of a GPU machine with MPS up (`nvidia-cuda-mps-control -d`)
and the native extension built (scripts/gpu_setup.sh, `build_extension`):

    python scripts/v2_runtime_mps_run.py            # table on stdout and in v2-runtime-mps.md

For alltoallv, moe_dispatch, moe_combine and moe_dispatch_ll at 2, 4 and 8 ranks: generate
(`ccogen.rt.api.compile_for_run`) and build every case first, in parallel; then
`ccogen run --target nvshmem --ranks N --iters 100` one case at a time, with
CUDA_VISIBLE_DEVICES=0 so that every rank shares GPU 0.  Each epoch's contents are
drawn afresh to satisfy `require` (epoch 0 every count 0, epoch 1 every count at its
bound, then skewed `mixed` and uniform `interior` routings; ccogen.rt.drawn) and every
`ensure` is checked on them.  Each case runs under a timeout and nothing starts past
--total-s (build included).  Then, if `compute-sanitizer` is on the PATH, memcheck and
racecheck of alltoallv at 2 ranks for a few epochs (--sanitizer-s each; skipped with a
message otherwise).  Prints a markdown table and writes it to --out; exit 0 when every
case passed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Every rank on one GPU (under MPS), here and in the runs: set before CUDA is touched, so
# that the prebuild's placement (and so its SM budget) is the runs' (their cache hits).
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")

# Shapes small enough to build in seconds and run 100 checked epochs at 8 ranks in a few
# seconds; rows of 16-byte multiples (the vector path), k < nranks (skewed routings).
SHAPES: dict[str, dict[str, int]] = {
    "alltoallv": {"cap": 1024},
    "moe_dispatch": {"tokens": 16, "hidden": 128, "k": 4},
    "moe_combine": {"tokens": 16, "hidden": 128, "k": 4},
    "moe_dispatch_ll": {"tokens": 16, "hidden": 128, "k": 4},  # run-time peers
}


def _params(stem: str) -> list[str]:
    return [f"{k}={v}" for k, v in SHAPES[stem].items()]


def budget(ranks: int) -> int | None:
    """The SM budget `ccogen run` generates with for `ranks` sharing the GPU."""
    from ccogen.rt.api import placement_and_budget

    return placement_and_budget("nvshmem", ranks, None)[1]


def build(stem: str, ranks: int, work: Path, max_ctas: int | None, debug: bool = False) -> str:
    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir
    from ccogen.toolchains.cubin import build_manifest_dir

    path = ROOT / "protocols" / f"{stem}.cco"
    out = work / f"{stem}-n{ranks}{'-debug' if debug else ''}"
    try:
        compile_for_run(load_ir(path), path.name, "nvshmem", ranks, dict(SHAPES[stem]), out,
                        debug=debug, max_ctas=max_ctas)
        build_manifest_dir(out)
    except Exception as exc:  # reported in the table
        return f"build failed: {str(exc)[-600:]}"
    return ""


def _env() -> dict[str, str]:
    return dict(os.environ)  # CUDA_VISIBLE_DEVICES=0 unless the caller chose


def _run_cmd(stem: str, ranks: int, iters: int, work: Path, seed: int,
             debug: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "ccogen", "run", str(ROOT / "protocols" / f"{stem}.cco"),
           "--target", "nvshmem", "--ranks", str(ranks), "--iters", str(iters),
           "--seed", str(seed), "--watchdog", "20",
           "-o", str(work / f"{stem}-n{ranks}{'-debug' if debug else ''}")]
    for p in _params(stem):
        cmd += ["--param", p]
    return cmd + (["--debug"] if debug else [])


def _median(text: str) -> str:
    for line in text.splitlines():
        if "time per epoch: median" in line:
            return line.split("median", 1)[1].split("(", 1)[0].strip()
    return "-"


def run_case(cmd: list[str], timeout: float) -> tuple[str, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=_env(), cwd=ROOT)
        text = (proc.stdout + proc.stderr).strip()
        return ("PASS" if proc.returncode == 0 else f"FAIL rc={proc.returncode}"), text
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return "TIMEOUT", out[-1500:]


def sanitizer(args: argparse.Namespace, work: Path, start: float) -> list[str]:
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        msg = "compute-sanitizer not found on the PATH: memcheck and racecheck skipped"
        print(msg, flush=True)
        return [f"| sanitizer | - | - | skipped | - | - | {msg} |"]
    rows = []
    for check in ("memcheck", "racecheck"):
        left = args.total_s + args.sanitizer_s * 2 - (time.monotonic() - start)
        if left < 30:
            rows.append(f"| alltoallv ({check}) | 2 | - | not run | - | - | {left:.0f} s left |")
            continue
        cmd = [tool, "--tool", check, "--target-processes", "all", "--report-api-errors", "no",
               "--error-exitcode", "9",
               *_run_cmd("alltoallv", 2, 3, work, args.seed, debug=True)]
        t0 = time.monotonic()
        status, text = run_case(cmd, min(args.sanitizer_s, left - 5))
        dt = time.monotonic() - t0
        summary = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK" in ln]
        print(f"== compute-sanitizer {check}: {status} ({dt:.0f} s)\n{text[-3000:]}", flush=True)
        last = (summary[-1] if summary else " ".join(text.splitlines()[-2:]))[:200]
        rows.append(f"| alltoallv ({check}, debug, 3 epochs) | 2 | cap=1024 | {status} | "
                    f"{dt:.0f} | - | {last.replace('|', '/')} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--protocols", default=",".join(SHAPES))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--total-s", type=float, default=290,
                    help="budget for building and running the matrix (default 290)")
    ap.add_argument("--case-s", type=float, default=75, help="timeout of one case")
    ap.add_argument("--sanitizer-s", type=float, default=100,
                    help="timeout of each compute-sanitizer run (after the matrix)")
    ap.add_argument("--no-sanitizer", action="store_true")
    ap.add_argument("--out", default="v2-runtime-mps.md")
    ap.add_argument("--work", default="/tmp/ccogen-v2-runtime-work")
    args = ap.parse_args()
    start = time.monotonic()
    work = Path(args.work)
    cases = [(p, int(n)) for n in args.ranks.split(",") for p in args.protocols.split(",")]
    jobs: list[tuple[str, int, bool]] = [(p, n, False) for p, n in cases]
    if not args.no_sanitizer and shutil.which("compute-sanitizer"):
        jobs.append(("alltoallv", 2, True))
    budgets = {n: budget(n) for n in sorted({n for _, n, _ in jobs})}
    with ThreadPoolExecutor(min(12, os.cpu_count() or 4)) as pool:
        built = dict(zip(jobs, pool.map(lambda j: build(j[0], j[1], work, budgets[j[1]], j[2]),
                                        jobs), strict=True))
    print(f"built {len(jobs)} cases in {time.monotonic() - start:.0f} s", flush=True)
    rows = []
    ok = True
    for stem, n in cases:
        left = args.total_s - (time.monotonic() - start)
        shape = " ".join(_params(stem))
        if built[(stem, n, False)]:
            rows.append((stem, n, shape, "BUILD FAIL", built[(stem, n, False)][:200], 0.0, "-"))
            ok = False
            continue
        if left < 15:
            rows.append((stem, n, shape, "not run", f"{left:.0f} s left", 0.0, "-"))
            ok = False
            continue
        t0 = time.monotonic()
        status, text = run_case(_run_cmd(stem, n, args.iters, work, args.seed),
                                min(args.case_s, left - 5))
        dt = time.monotonic() - t0
        ok = ok and status == "PASS"
        print(f"== {stem} n={n}: {status} ({dt:.0f} s)\n{text[-3000:]}", flush=True)
        summary = " ".join(text.splitlines()[-2:])[:200] if text else ""
        rows.append((stem, n, shape, status, summary, dt, _median(text)))
    table = ["| protocol | ranks | shape | result | seconds | median epoch | last lines |",
             "|---|---|---|---|---|---|---|"]
    table += [f"| {s} | {n} | {shape} | {st} | {dt:.0f} | {med} | {msg.replace('|', '/')} |"
              for s, n, shape, st, msg, dt, med in rows]
    if not args.no_sanitizer:
        if built.get(("alltoallv", 2, True)):
            table.append(f"| sanitizer | 2 | - | BUILD FAIL | - | - | "
                         f"{built[('alltoallv', 2, True)][:200]} |")
        else:
            table += sanitizer(args, work, start)
    table.append(f"\ntotal {time.monotonic() - start:.0f} s; every rank on GPU "
                 f"{_env()['CUDA_VISIBLE_DEVICES']}; {args.iters} epochs per case, contents "
                 "drawn afresh each epoch to satisfy `require`, `ensure` checked every epoch")
    Path(args.out).write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
