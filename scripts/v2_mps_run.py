#!/usr/bin/env python3
"""Language v2 protocols on ONE GPU shared by several NVSHMEM ranks under CUDA MPS.

Run from the repository root of a GPU machine with MPS up (`nvidia-cuda-mps-control -d`)
and the native extension built (scripts/gpu_setup.sh, `build_extension`).  For every
protocol x ranks case: generate (`ccogen.rt.api.compile_for_run`), build every cubin first
in parallel, then `ccogen run --target nvshmem --ranks N --iters ITERS` one case at a time
(every epoch filled with seeded typed data and every `ensure` checked, dtype-aware), each
under a timeout, never past --total-s.  Prints a markdown table and writes it to --out.
Exit 0 when every case passed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROTOCOLS = ("allreduce_oneshot", "allreduce_twoshot", "reduce_scatter_ring",
             "broadcast_pipelined")


def build(stem: str, ranks: int, work: Path) -> str:
    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir
    from ccogen.toolchains.cubin import build_manifest_dir

    path = ROOT / "protocols" / f"{stem}.cco"
    out = work / f"{stem}-n{ranks}"
    try:
        compile_for_run(load_ir(path), path.name, "nvshmem", ranks, {}, out, debug=False)
        build_manifest_dir(out)
    except Exception as exc:  # reported in the table
        return f"build failed: {exc}"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--total-s", type=float, default=330)
    ap.add_argument("--case-s", type=float, default=90)
    ap.add_argument("--out", default="v2-mps.md")
    ap.add_argument("--work", default="/tmp/ccogen-v2-work")
    args = ap.parse_args()
    start = time.monotonic()
    work = Path(args.work)
    cases = [(p, int(n)) for n in args.ranks.split(",") for p in args.protocols.split(",")]
    with ThreadPoolExecutor(12) as pool:
        built = dict(zip(cases, pool.map(lambda c: build(c[0], c[1], work), cases),
                         strict=True))
    print(f"built {len(cases)} cases in {time.monotonic() - start:.0f} s", flush=True)
    rows = []
    ok = True
    for stem, n in cases:
        left = args.total_s - (time.monotonic() - start)
        if built[(stem, n)]:
            rows.append((stem, n, "BUILD FAIL", built[(stem, n)][:200], 0.0))
            ok = False
            continue
        if left < 20:
            rows.append((stem, n, "not run", f"{left:.0f} s left", 0.0))
            ok = False
            continue
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "ccogen", "run", str(ROOT / "protocols" / f"{stem}.cco"),
               "--target", "nvshmem", "--ranks", str(n), "--iters", str(args.iters),
               "--watchdog", "20", "-o", str(work / f"{stem}-n{n}")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=min(args.case_s, left - 5))
            text = (proc.stdout + proc.stderr).strip()
            status = "PASS" if proc.returncode == 0 else f"FAIL rc={proc.returncode}"
        except subprocess.TimeoutExpired as exc:
            text = str(exc.stdout or "")[-400:]
            status = "TIMEOUT"
        dt = time.monotonic() - t0
        ok = ok and status == "PASS"
        print(f"== {stem} n={n}: {status} ({dt:.0f} s)\n{text[-3000:]}", flush=True)
        summary = " ".join(text.splitlines()[-2:])[:200] if text else ""
        rows.append((stem, n, status, summary, dt))
    table = ["| protocol | ranks | result | seconds | last lines |", "|---|---|---|---|---|"]
    table += [f"| {s} | {n} | {st} | {dt:.0f} | {msg.replace('|', '/')} |"
              for s, n, st, msg, dt in rows]
    Path(args.out).write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
