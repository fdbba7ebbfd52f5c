#!/usr/bin/env python3
"""Issue 31: generate and build (release and debug) every protocol of --data at the ranks
scripts/gpu_stall_session.sh runs them, with the SM budget `ccogen run` gives them, in
parallel, each nvcc bounded by --timeout; prints each build's wall time (the cubins land
in the cache `ccogen run` reads)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = (("halo2d", 4), ("moe_ll_dispatch_fp8", 4), ("halo2d_2x1", 2), ("moe_ll_dispatch_fp8", 2))


def build(data: Path, work: Path, stem: str, ranks: int, debug: bool, timeout: float) -> str:
    out = work / f"{stem}-n{ranks}{'-debug' if debug else ''}"
    code = (f"from pathlib import Path; from ccogen.rt.api import compile_for_run; "
            f"from ccogen.toolchains.cubin import build_manifest_dir; "
            f"from ccogen.syntax import load_ir; "
            f"from ccogen.rt.api import placement_and_budget; "
            f"_, budget = placement_and_budget('nvshmem', {ranks}, None); "
            f"p = Path({str(data / (stem + '.cco'))!r}); "
            f"compile_for_run(load_ir(p), p.name, 'nvshmem', {ranks}, {{}}, Path({str(out)!r}), "
            f"debug={debug}, max_ctas=budget); build_manifest_dir({str(out)!r})")
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
        status = "ok" if done.returncode == 0 else f"failed: {(done.stderr or done.stdout)[-800:]}"
    except subprocess.TimeoutExpired:
        status = f"TIMED OUT after {timeout:g} s"
    lines = sum(1 for _ in (out / "kernels.cu").open()) if (out / "kernels.cu").is_file() else 0
    return f"{out.name}: {status} ({time.monotonic() - start:.1f} s, kernels.cu {lines} lines)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=150)
    ap.add_argument("--no-debug", action="store_true", help="release builds only")
    args = ap.parse_args()
    jobs = [(s, n, d) for s, n in CASES for d in ((False,) if args.no_debug else (False, True))]
    with ThreadPoolExecutor(len(jobs)) as pool:
        for line in pool.map(lambda j: build(args.data, args.work, *j, args.timeout), jobs):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
