"""`ccogen run FILE.cco --target T --ranks N [--iters K] [--param k=v] [--debug]`.

Exit status: 0 when every `ensure` held on every rank in every epoch; 1 when one failed, a
wait timed out or a rank stopped (the report says which); 2 for set-up problems (no GPU,
too few GPUs, missing or old toolchain, compile failure) and usage errors, printed as one
`error:` message without a traceback.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ccogen.cli.common import EXIT_OK, EXIT_USAGE, UsageError, max_ctas_arg, param_arg, params, read
from ccogen.targets import runnable_targets

EXIT_FAILED = 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="build, launch on GPUs and check `ensure` on real data")
    p.add_argument("file", metavar="FILE.cco")
    p.add_argument("--target", default="nccl-lsa", choices=runnable_targets(),
                   help="a target ccogen runs on GPUs (default nccl-lsa)")
    p.add_argument("--ranks", type=int, default=2, metavar="N",
                   help="ranks: one per GPU, or round-robin on fewer GPUs under MPS (nvshmem)")
    p.add_argument("--iters", type=int, default=100, metavar="K", help="epochs (default 100)")
    param_arg(p)
    p.add_argument("--debug", action="store_true",
                   help="bounded waits: a wait that times out is reported by name")
    p.add_argument("--force", action="store_true",
                   help="run even if the checker finds errors (with --debug: see the hang)")
    p.add_argument("--seed", type=int, default=0, help="seed of the window contents")
    p.add_argument("--watchdog", type=float, default=30.0, metavar="S",
                   help="seconds any phase of a rank (bootstrap, heap, host barrier, an "
                        "epoch's kernels, ...) may take before the run stops, naming it")
    p.add_argument("-o", "--out", metavar="DIR", help="keep the generated files in DIR (a "
                   "file there that ccogen did not write is never overwritten)")
    p.add_argument("--times", action="store_true", help="print every epoch's time")
    max_ctas_arg(p)



def check_out(out: str, source: str) -> None:
    """`-o DIR` under `compile`'s rules, checked before anything is built: a directory (or
    one to create), never a file, the input or inside a file.  The files in it are checked
    when written (`ccogen.fileio.write_generated`)."""
    from ccogen.fileio import FileError, check_output_dir

    try:
        check_output_dir(out, [source], "-o")
    except FileError as exc:
        raise UsageError(f"{exc} (`run -o` names a directory for the generated files)") from None


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.errors import DiagnosticError, RunError
    from ccogen.rt.api import placement_and_budget, prepare_for_run
    from ccogen.rt.launch import run as run_manifest
    from ccogen.syntax import parse_ir

    if args.ranks < 1 or args.iters < 1:
        raise UsageError("--ranks and --iters must be at least 1")
    text = read(args.file)
    if args.out:
        check_out(args.out, args.file)
    try:
        protocol = parse_ir(text, args.file)
        values = params(args.param, protocol)
        placement, budget = placement_and_budget(args.target, args.ranks, args.max_ctas)
        with tempfile.TemporaryDirectory(prefix="ccogen-gen-") as tmp:
            out = Path(args.out) if args.out else Path(tmp)
            instance = prepare_for_run(protocol, Path(args.file).name, args.target,
                                       args.ranks, values, out, debug=args.debug,
                                       force=args.force, max_ctas=budget, inputs=[args.file])
            report = run_manifest(out, instance, iters=args.iters, seed=args.seed,
                                  debug=args.debug, watchdog_s=args.watchdog,
                                  placement=placement)
    except DiagnosticError as exc:
        sys.stderr.write(render(list(exc.diagnostics), "full", color=sys.stderr.isatty()))
        return EXIT_FAILED
    except RunError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    print(report.format(times=args.times))
    return EXIT_OK if report.ok else EXIT_FAILED

