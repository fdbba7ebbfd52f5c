"""`ccogen lint FILE... [--ranks N] [--param K=V] [--target T] [--format F] [--strict]`:
every check on every instance; exit 1 when an error is found (or a warning, with
`--strict`; notes, such as N001 for an `ensure` line the checker cannot prove, are
warnings then)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ccogen.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    color,
    format_args,
    instance_args,
    limits,
    params,
    ranks,
    read,
    target,
    target_names,
    write_out,
)
from ccogen.diag import Diagnostic, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lint", help="run every check on every instance")
    p.add_argument("files", nargs="+", metavar="FILE")
    instance_args(p)
    p.add_argument("--target", metavar="TARGET", help="also apply this backend's "
                   f"capabilities ({', '.join(target_names())})")
    format_args(p)
    p.add_argument("--strict", action="store_true", help="fail on warnings (and notes) too")


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.driver import CheckOptions, check_protocol
    from ccogen.errors import DiagnosticError
    from ccogen.syntax import parse_ir

    team_sizes = ranks(args.ranks)
    target_name = target(args.target)
    bounds = limits(args)
    diagnostics: list[Diagnostic] = []
    for path in args.files:
        try:
            protocol = parse_ir(read(path), path)
        except DiagnosticError as exc:
            diagnostics.extend(exc.diagnostics)
            continue
        options = CheckOptions(ranks=team_sizes, params=params(args.param, protocol),
                               target=target_name, limits=bounds)
        diagnostics.extend(check_protocol(protocol, options).diagnostics)
    if args.strict:  # a line the checker cannot prove fails a strict lint
        diagnostics = [replace(d, severity=Severity.WARNING) if d.sev is Severity.NOTE else d
                       for d in diagnostics]
    write_out(render(diagnostics, args.format, color=color(args)))
    failing = any(d.is_error for d in diagnostics) or (args.strict and diagnostics)
    return EXIT_FINDINGS if failing else EXIT_OK
