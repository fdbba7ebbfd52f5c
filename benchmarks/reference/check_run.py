"""Run hand-written references on GPUs with the protocol's `ensure` checked every epoch.

    python benchmarks/reference/check_run.py --target nvshmem --ranks 2 \\
        [--protocols allreduce_oneshot,allreduce_twoshot] [--param T=f32] [--iters 20]

For every protocol: generate the instance (`compile_for_run`, as `ccogen bench` does),
derive the reference's manifest from the generated one (`ccogen.bench.reference`), then
run the generated kernels and the reference through the same runtime path
(`ccogen.rt.run_manifest` with the instance: typed fills, buffers, dtype-aware `ensure`).
Ranks beyond the GPUs share them under MPS on nvshmem (docs/runtime.md).  Prints one
report per run; exits 0 when every run held every `ensure`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    from ccogen.bench.reference import find_reference, write_case
    from ccogen.instantiate import parse_params
    from ccogen.rt import run_manifest
    from ccogen.rt.api import compile_for_run, placement_and_budget
    from ccogen.syntax import load_ir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="nvshmem")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--protocols", default="allreduce_oneshot,allreduce_twoshot")
    ap.add_argument("--param", action="append", default=[],
                    help="K=V, for every protocol that has a parameter K")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(prefix="ccogen-refcheck-") as tmp:
        for name in args.protocols.split(","):
            path = ROOT / "protocols" / f"{name}.cco"
            protocol = load_ir(path)
            spec = find_reference(name, args.target)
            if spec is None:
                print(f"{name}: no reference on {args.target}")
                ok = False
                continue
            placement, budget = placement_and_budget(args.target, args.ranks, None)
            base = Path(tmp) / name
            mine = [v for v in args.param if protocol.param(v.partition("=")[0].strip())]
            params = parse_params(mine, protocol)
            instance = compile_for_run(protocol, path.name, args.target, args.ranks, params,
                                       base / "generated", debug=False, epoch_from_heap=True,
                                       max_ctas=budget)
            reference = write_case(spec, base / "generated", base / "reference")
            for label, directory in (("generated", base / "generated"),
                                     ("reference", reference)):
                report = run_manifest(directory, instance, iters=args.iters,
                                      placement=placement)
                print(f"== {name} {label}: {'PASS' if report.ok else 'FAIL'}")
                print(report.format(), flush=True)
                ok = ok and report.ok
    return 0 if ok else 1


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
