"""`ccogen simulate FILE.cco [--ranks N] [--param k=v] [--seeds K | --seed N | --exhaustive]
[--trace out.json]`.

Prints the failures with the same renderers as `ccogen lint` (`--format`), then one
summary line: how many schedules of how many launches on which team sizes, and
whether all passed (`SimReport.summary`).  Exit status: 0 when every schedule of every
instance passed, 1 when one failed (or an instance could not be built), 4 when nothing
failed but an `--exhaustive` exploration ran out of its budget (`--time-limit`,
`--max-schedules`) before one schedule of some instance completed: not a pass, not a
finding (the summary, on standard error with `--format json|sarif|github`, says so and
how far each instance got), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ccogen.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageError,
    color,
    format_args,
    instance_args,
    limits,
    params,
    ranks,
    read,
    target,
    write_out,
)
from ccogen.sim import DEFAULT_EPOCHS, DEFAULT_SEEDS

EXIT_FAILED = EXIT_FINDINGS
EXIT_UNFINISHED = 4  # nothing failed, but the exploration's budget ran out before a verdict
MAX_SEEDS = 1_000_000  # about an hour of schedules of a small protocol
MAX_EPOCHS = 1_000  # launches in one schedule


def add_parser(sub: Any) -> None:
    p = sub.add_parser("simulate", help="run the protocol on the CPU model under adversarial "
                       "schedules")
    p.add_argument("file", metavar="FILE.cco")
    instance_args(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, metavar="K",
                       help=f"run seeded random schedules 0..K-1 (default {DEFAULT_SEEDS})")
    which.add_argument("--seed", type=int, default=None, metavar="N",
                       help="run the one seeded schedule N (to replay a finding)")
    which.add_argument("--exhaustive", action="store_true",
                       help="every schedule, up to partial-order equivalence")
    p.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, metavar="E",
                   help=f"launches per schedule (default {DEFAULT_EPOCHS})")
    p.add_argument("--max-schedules", type=int, default=100_000, metavar="N",
                   help="--exhaustive: stop after N schedules per instance")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="--exhaustive: stop after S CPU seconds per instance (default 10)")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome/Perfetto trace of the first instance")
    p.add_argument("--target", metavar="TARGET",
                   help="the cost figures the trace's times come from (default mori-sdma)")
    format_args(p)


def check_trace_path(out: str, source: str) -> None:
    """Refuse `--trace` before simulating where `compile` would refuse to write: onto the
    input or any `.cco`, through a link, over a file that is not an earlier trace, into a
    missing folder (`ccogen.fileio.check_output_file`)."""
    from ccogen.fileio import FileError, check_output_file
    from ccogen.sim.trace import is_trace

    try:
        check_output_file(out, [source], "--trace", is_trace)
    except FileError as exc:
        raise UsageError(str(exc)) from None


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.errors import DiagnosticError
    from ccogen.sim import simulate
    from ccogen.syntax import parse_ir

    if args.seeds < 1 or args.epochs < 1:
        raise UsageError("--seeds and --epochs must be at least 1")
    if args.seeds > MAX_SEEDS or args.epochs > MAX_EPOCHS:
        raise UsageError(f"--seeds is at most {MAX_SEEDS:,} and --epochs at most {MAX_EPOCHS:,} "
                         "(one schedule of a few ms each: larger values do not finish)")
    if args.max_schedules < 1:
        raise UsageError("--max-schedules must be at least 1: exploring nothing is not passing")
    if not args.time_limit > 0:
        raise UsageError("--time-limit must be a positive number of CPU seconds")
    target_name = target(args.target)
    text = read(args.file)
    if args.trace is not None:
        check_trace_path(args.trace, args.file)
    try:
        protocol = parse_ir(text, args.file)
    except DiagnosticError as exc:
        sys.stdout.write(render(list(exc.diagnostics), args.format, color=color(args)))
        return EXIT_FAILED
    report = simulate(protocol, ranks(args.ranks), params(args.param, protocol),
                      seeds=[args.seed] if args.seed is not None else args.seeds,
                      exhaustive=args.exhaustive, trace=args.trace, epochs=args.epochs,
                      target=target_name, max_schedules=args.max_schedules,
                      time_limit=args.time_limit, path=args.file, limits=limits(args))
    write_out(render(report.diagnostics, args.format, color=color(args)))
    if args.format in ("full", "concise"):
        print(report.summary())
        if report.trace:
            print(f"trace of {report.trace_label} written to {report.trace}")
    elif report.inconclusive:
        print(f"ccogen simulate: {report.unfinished_note()}", file=sys.stderr)
    if report.passed:
        return EXIT_OK
    return EXIT_UNFINISHED if report.inconclusive else EXIT_FAILED

