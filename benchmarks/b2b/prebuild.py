"""Build, in parallel, every instance benchmarks/b2b/b2b_graph.py loads (run once on the GPU
machine before torchrun, so that its ranks find them in the cache):

    python3 benchmarks/b2b/prebuild.py --ranks 2,4 --check-ranks 8
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ccogen.rt.engines import build_engine
from ccogen.toolchains.cubin import build_cubin
from ccogen.torch.device import device_arch
from ccogen.torch.loader import LAUNCH_BARRIER, generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from b2b_cases import A2A_SIZES, AR_SIZES, PROTOCOLS
from graph_check import plans

Job = tuple[Any, int, dict[str, Any]]


def jobs(timed: list[int], checked: list[int]) -> list[Job]:
    out: list[Job] = []
    for n in sorted(set(timed) | set(checked)):
        out.append((LAUNCH_BARRIER, n, {}))
        a2a = A2A_SIZES if n in timed else (4096,)
        ar = AR_SIZES if n in timed else (4096,)
        variants = ("old", "barrier", "new") if n in timed else ("new",)
        out += [(PROTOCOLS["alltoall"][v], n, {"block": b}) for v in variants for b in a2a]
        out += [(PROTOCOLS["allreduce"][v], n, {"n": max(1, b // 4), "T": "f32"})
                for v in variants if v in PROTOCOLS["allreduce"] for b in ar]
        out += [(plan.path, n, {}) for plan in plans(n)[0]]  # graph_check.py's
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="nvshmem")
    ap.add_argument("--ranks", default="2,4", help="team sizes timed (old and new)")
    ap.add_argument("--check-ranks", default="8", help="team sizes only checked (new)")
    ap.add_argument("--generate-only", action="store_true",
                    help="generate the code (the checker and codegen: no GPU), build nothing")
    args = ap.parse_args()
    timed = [int(r) for r in args.ranks.split(",") if r]
    checked = timed + [int(r) for r in args.check_ranks.split(",") if r]
    todo = jobs(timed, checked)
    t0 = time.monotonic()
    if args.generate_only:
        for protocol, n, params in todo:
            g = generate(protocol, args.target, n, params)
            print(f"generated {g.manifest.protocol} x{n} {params} "
                  f"({g.manifest.between_launches})", flush=True)
        return
    arch = device_arch(0)

    def one(job: Job) -> str:
        protocol, n, params = job
        g = generate(protocol, args.target, n, params)
        build_cubin(g.manifest.directory, args.target, arch, False)
        return f"{g.manifest.protocol} x{n} {params}"

    with ThreadPoolExecutor(16) as pool:
        shim = pool.submit(build_engine, args.target, arch)
        for done in pool.map(one, todo):
            print(f"built {done} ({time.monotonic() - t0:.0f} s)", flush=True)
        print(f"built the {args.target} shim ({shim.result()[1].describe()}, "
              f"{time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
