"""Build, in parallel, everything the PyTorch binding's GPU runs will load, so that their
ranks find it all in the cache (run once on the GPU machine before torchrun):

    python3 scripts/torch_prebuild.py --target nvshmem --ranks 2,4

the generated files and cubins of the example's alltoall (block 4096), the launch barrier
and the debug-build hang of tests/runtime/data/hang_generated.cco, and the engine shim;
with `--dp`, also the allreduce of examples/dp_allreduce_step.py (its default bucket:
allreduce_oneshot, f32, the MLP's parameter count padded as the example pads it); with
`--moe`, also moe_dispatch and moe_combine with examples/moe_layer.py's defaults (the
example's top-k is capped at the rank count, as its `--k 1` at one rank).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ccogen.rt.engines import build_engine
from ccogen.toolchains.cubin import build_cubin
from ccogen.torch.device import device_arch
from ccogen.torch.loader import LAUNCH_BARRIER, generate

ROOT = Path(__file__).resolve().parent.parent
HANG = ROOT / "tests" / "runtime" / "data" / "hang_generated.cco"


def dp_params() -> dict[str, Any]:
    """The parameters examples/dp_allreduce_step.py loads allreduce_oneshot with."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dp_allreduce_step",
                                                  ROOT / "examples" / "dp_allreduce_step.py")
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    numel = sum(p.numel() for p in ex.MLP().parameters())
    return {"n": ex.padded(numel), "T": "f32"}


def moe_params(nranks: int) -> dict[str, Any]:
    """The parameters examples/moe_layer.py loads both MoE protocols with by default."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("moe_layer", ROOT / "examples" / "moe_layer.py")
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    args = ex.parse_args([])
    return {"tokens": args.tokens, "hidden": args.hidden, "k": min(args.k, nranks),
            "T": args.dtype}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="nvshmem")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--block", type=int, default=4096)
    ap.add_argument("--dp", action="store_true",
                    help="also the data-parallel example's allreduce")
    ap.add_argument("--moe", action="store_true",
                    help="also the MoE example's dispatch and combine")
    args = ap.parse_args()
    arch = device_arch(0)
    jobs: list[tuple[Any, int, dict[str, Any], bool, bool]] = []
    for n in (int(r) for r in args.ranks.split(",")):
        jobs += [("alltoall.cco", n, {"block": args.block}, False, False),
                 (LAUNCH_BARRIER, n, {}, False, False)]
        if args.dp:
            jobs.append(("allreduce_oneshot.cco", n, dp_params(), False, False))
        if args.moe:
            jobs += [(f"moe_{step}.cco", n, moe_params(n), False, False)
                     for step in ("dispatch", "combine")]
    jobs.append((HANG, 2, {}, True, True))
    t0 = time.monotonic()

    def one(job: tuple[Any, int, dict[str, Any], bool, bool]) -> str:
        protocol, n, params, debug, force = job
        g = generate(protocol, args.target, n, params, debug=debug, force=force)
        build_cubin(g.manifest.directory, args.target, arch, debug)
        return f"{g.manifest.protocol} x{n}{' debug' if debug else ''}"

    with ThreadPoolExecutor(len(jobs) + 1) as pool:
        shim = pool.submit(build_engine, args.target, arch)
        for done in pool.map(one, jobs):
            print(f"built {done} ({time.monotonic() - t0:.0f} s)", flush=True)
        print(f"built the {args.target} shim ({shim.result()[1].describe()}, "
              f"{time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
