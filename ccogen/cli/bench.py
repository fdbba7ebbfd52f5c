"""`ccogen bench FILE.cco --target T --ranks N --sweep PARAM=LO..HI[:xF] [...]`.

For each swept value: the generated protocol's median time per epoch and per-direction
bandwidth, beside (same run) the hand-written reference of benchmarks/reference, the
engine's collective of the same shape through torch.distributed (`--compare`), the
copy-engine and SM-store ceilings and the empty-kernel floor.  Writes to `-o DIR` a table
per sweep (`.txt`, also printed), CSV (`.csv`, `results.csv`), a plot (`.png`) and
`results.json`.

Exit status: 0 when every generated and reference case verified and was timed; 1 when an
`ensure` failed, a rank stopped or the protocol has errors; 2 for usage errors and set-up
problems (no GPU, missing toolchain, compile failure), printed as one `error:` line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ccogen.bench.contents import CONTENTS
from ccogen.bench.runner import COMPARES
from ccogen.cli.common import EXIT_OK, EXIT_USAGE, UsageError, max_ctas_arg, params, read
from ccogen.fileio import check_output_dir
from ccogen.targets import runnable_targets

EXIT_FAILED = 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="time a protocol over a parameter sweep beside the "
                       "engine's own collective, hand-written references and link ceilings")
    p.add_argument("file", metavar="FILE.cco")
    p.add_argument("--target", required=True, choices=runnable_targets())
    p.add_argument("--ranks", type=int, default=2, metavar="N",
                   help="ranks, one per GPU (more ranks than GPUs share them under CUDA MPS "
                   "on nvshmem: functional only)")
    p.add_argument("--sweep", action="append", required=True, metavar="PARAM=SPEC",
                   help="LO..HI (x4 steps), LO..HI:x2, or V1,V2,...; repeat for more sweeps")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="fix a parameter for every point, e.g. --param size=8B")
    p.add_argument("--compare", default="auto", choices=COMPARES,
                   help="the engine collective beside it (auto: by protocol name)")
    p.add_argument("--reference", default="auto", metavar="auto|none|DIR",
                   help="hand-written kernels (auto: benchmarks/reference/TARGET/PROTOCOL)")
    p.add_argument("-o", "--out", default="bench-out", metavar="DIR",
                   help="tables, CSV, plots and results.json")
    p.add_argument("--work", default=None, metavar="DIR",
                   help="the generated code of every point (default: OUT/build)")
    p.add_argument("--warmup", type=int, default=5, metavar="W", help="warm-up samples")
    p.add_argument("--iters", type=int, default=50, metavar="S", help="timed samples")
    p.add_argument("--epochs-per-graph", type=int, default=10, metavar="R",
                   help="epochs captured in one CUDA graph (one sample)")
    p.add_argument("--graph-max", default="4MiB", metavar="BYTES",
                   help="per-direction bytes up to which CUDA graphs are replayed")
    p.add_argument("--no-graph", action="store_true", help="never replay CUDA graphs")
    p.add_argument("--verify-after-max", default="64MiB", metavar="BYTES",
                   help="window bytes per rank up to which a checked epoch follows timing")
    p.add_argument("--no-ceiling", action="store_true", help="skip the link ceilings")
    p.add_argument("--ceiling", default="auto", choices=("auto", "ce", "ce-bidir"),
                   help="the ceiling column: one-way (ce) or both-ways (ce-bidir) peer "
                   "copies; auto: both ways when some link carries bytes both ways")
    p.add_argument("--no-floors", action="store_true", help="skip the empty-kernel floor")
    p.add_argument("--no-plot", action="store_true", help="write no PNG")
    p.add_argument("--seed", type=int, default=0, help="seed of the window contents")
    p.add_argument("--contents", default=None, choices=CONTENTS,
                   help="protocols with run-time values: the contents drawn to satisfy "
                   "`require` that are verified and timed (default interior: uniform "
                   "between the bounds; low / high: every bounded value at its lower / "
                   "upper bound; mixed: each at either bound or between)")
    p.add_argument("--watchdog", type=float, default=30.0, metavar="S",
                   help="seconds any phase of a rank (bootstrap, heap, host barrier, a "
                        "case's kernels, ...) may take before the run stops, naming it")
    p.add_argument("--jobs", type=int, default=0, metavar="J", help="parallel nvcc builds")
    p.add_argument("--arch", default=None, metavar="SM", help="build for SM (default: the GPU)")
    p.add_argument("--build-only", action="store_true",
                   help="generate and build everything, measure nothing (no GPU needed)")
    max_ctas_arg(p)  # the references' grids follow the generated code's budget


def _bytes(option: str, text: str) -> int:
    from ccogen.instantiate import parse_param_value
    from ccogen.ir.nodes import ParamType

    try:
        return parse_param_value(text, ParamType.BYTES)
    except ValueError as exc:
        raise UsageError(f"{option} {text}: {exc}") from None


def requests_of(args: argparse.Namespace) -> list[Any]:
    """Check the arguments against the protocol (usage errors raise UsageError)."""
    from ccogen.bench.runner import SweepRequest
    from ccogen.bench.sweep import SweepError, parse_sweep
    from ccogen.syntax import parse_ir

    for name in ("ranks", "iters", "epochs_per_graph"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    if args.reference not in ("auto", "none") and not Path(args.reference).is_dir():
        raise UsageError(f"--reference {args.reference}: no such directory")
    text = read(args.file)
    protocol = parse_ir(text, args.file)
    fixed = params(args.param, protocol)
    swept = []
    for item in args.sweep:
        try:
            sweep = parse_sweep(item, protocol)
        except SweepError as exc:
            raise UsageError(str(exc)) from None
        if sweep.param in fixed:
            raise UsageError(f"--sweep {item}: `{sweep.param}` is also fixed with --param")
        if sweep.param in swept:
            raise UsageError(f"--sweep {item}: `{sweep.param}` is swept twice")
        swept.append(sweep.param)
    return [SweepRequest(Path(args.file), item, tuple(args.param), args.compare, args.reference,
                         args.ceiling)
            for item in args.sweep]


def settings_of(args: argparse.Namespace) -> Any:
    from ccogen.bench.runner import Settings

    return Settings(target=args.target, ranks=args.ranks, max_ctas=args.max_ctas,
                    out_dir=Path(args.out),
                    warmup=args.warmup, samples=args.iters,
                    epochs_per_graph=args.epochs_per_graph, graph=not args.no_graph,
                    graph_max=_bytes("--graph-max", args.graph_max),
                    ceiling=not args.no_ceiling, floors=not args.no_floors,
                    verify_after_max=_bytes("--verify-after-max", args.verify_after_max),
                    seed=args.seed, contents=args.contents, watchdog_s=args.watchdog,
                    jobs=args.jobs, arch=args.arch,
                    work_dir=Path(args.work) if args.work else None)


def command(args: argparse.Namespace) -> int:
    from ccogen.bench.report import full_report, write_outputs
    from ccogen.bench.runner import run_bench
    from ccogen.diag.render import render
    from ccogen.errors import DiagnosticError, RunError
    from ccogen.rt import placement

    try:
        check_output_dir(args.out, [args.file])
        requests = requests_of(args)
        settings = settings_of(args)
        if not args.build_only:  # enough GPUs, or ranks sharing them under MPS (nvshmem)
            placement.place(args.ranks, args.target)
        result = run_bench(requests, settings, build_only=args.build_only)
    except DiagnosticError as exc:
        sys.stderr.write(render(list(exc.diagnostics), "full", color=sys.stderr.isatty()))
        return EXIT_FAILED
    except ValueError as exc:  # a fixed parameter that clashes, a bad value
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except RunError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    if args.build_only:
        print(f"built everything under {settings.build_root}; nothing measured")
        return EXIT_OK
    files = write_outputs(result, settings.out_dir, plot=not args.no_plot)
    print(full_report(result))
    print(f"wrote {len(files)} files to {settings.out_dir}")
    return EXIT_OK if result.succeeded() else EXIT_FAILED

