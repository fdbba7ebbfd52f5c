#!/usr/bin/env python3
"""Host preparation of `ccogen run` at the library's real shapes: CPU seconds and peak RSS.

For each case (protocol, ranks, shape) a fresh process measures
* the launcher: generating the instance's files (`ccogen.rt.api.prepare_for_run`: the
  checked instance, no unrolling) and deciding whether the draws are precomputed;
* one rank: its first launch's draw and `ensure` comparisons (`ccogen.rt.drawn.draw_epoch`
  with the rank: the preconditions of the instance are evaluated once, here) and the mean
  of the next `--epochs` launches (what each later launch costs), and the process's peak
  RSS (what each rank process holds beside its GPU memory).
No GPU needed.  `python benchmarks/realshape/prepare.py [--cases ...] [--epochs 3]`;
prints a markdown table (docs/performance.md, "the library at real shapes").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NTOK = ROOT / "tests" / "torch" / "protocols" / "moe_dispatch_ntok.cco"
SHAPES = {"decode": {"tokens": 128, "hidden": 7168, "k": 8},
          "prefill": {"tokens": 4096, "hidden": 7168, "k": 8}, "default": {}}
DEFAULT_CASES = ("moe_dispatch:decode:8,moe_combine:decode:8,moe_dispatch_ntok:decode:8,"
                 "alltoallv:default:8,moe_dispatch:prefill:2,moe_dispatch:prefill:4,"
                 "moe_combine:prefill:4,moe_dispatch_ntok:prefill:4")


def _path(protocol: str) -> Path:
    return NTOK if protocol == "moe_dispatch_ntok" else ROOT / "protocols" / f"{protocol}.cco"


def child(protocol: str, shape: str, ranks: int, epochs: int) -> dict[str, object]:
    from ccogen.instantiate import parse_params
    from ccogen.rt.api import prepare_for_run
    from ccogen.rt.drawn import PRECOMPUTE_MAX_BYTES, DrawSpec, draw_epoch, drawn_bytes
    from ccogen.syntax import load_ir

    path = _path(protocol)
    ir = load_ir(path)
    given = [f"{k}={v}" for k, v in SHAPES[shape].items()]
    if protocol == "moe_dispatch_ntok":
        given.append("T=bf16")
    params = parse_params(given, ir)
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        instance = prepare_for_run(ir, path.name, "nvshmem", ranks, params, Path(tmp),
                                   debug=False)
    spec = DrawSpec.of(instance, 1)
    size = drawn_bytes(spec) if spec is not None else 0
    launcher = time.process_time() - t0
    out: dict[str, object] = {"launcher_s": round(launcher, 2), "draw_mib": size >> 20,
                              "precomputed": spec is not None and size <= PRECOMPUTE_MAX_BYTES}
    if spec is not None:
        t1 = time.process_time()
        first = draw_epoch(spec, 0, 0)
        t2 = time.process_time()
        shown = [(len(first.checks), first.label)]
        del first  # a rank holds one launch's draw at a time
        for e in range(1, 1 + epochs):
            d = draw_epoch(spec, e, 0)
            shown.append((len(d.checks), d.label))
            del d
        t3 = time.process_time()
        out |= {"first_s": round(t2 - t1, 2), "later_s": round((t3 - t2) / epochs, 2),
                "checks": [n for n, _ in shown], "labels": [label for _, label in shown]}
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="protocol:shape:ranks,...")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        protocol, shape, ranks = args.child.split(":")
        print(json.dumps(child(protocol, shape, int(ranks), args.epochs)))
        return 0
    print("| protocol | shape | ranks | launcher CPU s | drawn MiB / launch | precomputed | "
          "rank: first launch CPU s | rank: each later launch CPU s | rank peak RSS MiB | "
          "comparisons per launch (coalesced) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        protocol, shape, ranks = case.split(":")
        proc = subprocess.run([sys.executable, __file__, "--child", case, "--epochs",
                               str(args.epochs)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"| {protocol} | {shape} | {ranks} | failed: "
                  f"{proc.stderr.strip().splitlines()[-1:]} |", flush=True)
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"| {protocol} | {shape} | {ranks} | {r['launcher_s']} | {r['draw_mib']} | "
              f"{'yes' if r['precomputed'] else 'no'} | {r.get('first_s', '-')} | "
              f"{r.get('later_s', '-')} | {r['rss_mib']} | {r.get('checks', '-')} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
