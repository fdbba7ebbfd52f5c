"""Build, in parallel, every instance benchmarks/b2b/b2b_graph.py loads (run once on the GPU
machine before torchrun, so that its ranks find them in the cache):

    python3 benchmarks/b2b/prebuild.py --ranks 2,4 --check-ranks 8

Each instance is generated for the SM budget ccogen.torch gives its ranks (torchrun on
this machine: LOCAL_RANK % GPUs, so ceil(n / GPUs) ranks share a GPU;
ccogen.rt.placement.sharing_budget), else the ranks would miss the cache.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ccogen.rt.engines import build_engine
from ccogen.rt.placement import device_count, fewest_sms, sharing_budget
from ccogen.toolchains.cubin import build_cubin
from ccogen.torch.device import device_arch
from ccogen.torch.loader import LAUNCH_BARRIER, generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from b2b_cases import A2A_SIZES, AR_SIZES, PROTOCOLS
from graph_check import plans

Job = tuple[Any, int, dict[str, Any]]
H200_SMS = 132


def jobs(timed: list[int], checked: list[int]) -> list[Job]:
    out: list[Job] = []
    for n in sorted(set(timed) | set(checked)):
        out.append((LAUNCH_BARRIER, n, {}))
        a2a = A2A_SIZES if n in timed else (4096,)
        ar = AR_SIZES if n in timed else (4096,)
        variants = tuple(PROTOCOLS["alltoall"]) if n in timed else ("new",)
        out += [(PROTOCOLS["alltoall"][v], n, {"block": b}) for v in variants for b in a2a]
        out += [(PROTOCOLS["allreduce"][v], n, {"n": max(1, b // 4), "T": "f32"})
                for v in variants if v in PROTOCOLS["allreduce"] for b in ar]
        out += [(plan.path, n, dict(plan.params)) for plan in plans(n)[0]]  # graph_check's
    return out


def machine(gpus: int, sms: int, generate_only: bool) -> tuple[int, int]:
    """The GPU count and SMs per GPU the budgets are for (asked of the machine unless
    given; one H200 when only generating)."""
    if generate_only:
        return gpus or 1, sms or H200_SMS
    gpus = gpus or device_count()
    return gpus, sms or fewest_sms(gpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="nvshmem")
    ap.add_argument("--ranks", default="2,4", help="team sizes timed (old and new)")
    ap.add_argument("--check-ranks", default="8", help="team sizes only checked (new)")
    ap.add_argument("--generate-only", action="store_true",
                    help="generate the code (the checker and codegen: no GPU), build nothing")
    ap.add_argument("--gpus", type=int, default=0,
                    help="GPUs the ranks share (0: this machine's; 1 with --generate-only)")
    ap.add_argument("--sms", type=int, default=0,
                    help=f"SMs per GPU (0: the fewest of the GPUs'; {H200_SMS} with "
                         "--generate-only)")
    args = ap.parse_args()
    timed = [int(r) for r in args.ranks.split(",") if r]
    checked = timed + [int(r) for r in args.check_ranks.split(",") if r]
    todo = jobs(timed, checked)
    gpus, sms = machine(args.gpus, args.sms, args.generate_only)

    def budget(n: int) -> int | None:
        return sharing_budget(-(-n // gpus), sms)

    t0 = time.monotonic()
    if args.generate_only:
        for protocol, n, params in todo:
            g = generate(protocol, args.target, n, params, max_ctas=budget(n))
            print(f"generated {g.manifest.protocol} x{n} {params} "
                  f"({g.manifest.between_launches})", flush=True)
        return
    arch = device_arch(0)

    def one(job: Job) -> str:
        protocol, n, params = job
        g = generate(protocol, args.target, n, params, max_ctas=budget(n))
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
