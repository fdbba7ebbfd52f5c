"""`ccogen lint FILE... [--ranks N] [--param K=V] [--target T] [--format F] [--strict]`:
every check on every instance; exit 1 when an error is found (or a warning, with
`--strict`; notes, such as N001 for an `ensure` line the checker cannot prove, are
warnings then).

With `--format full` (the default) the findings end with one summary line per file,
`alltoall.cco: 0 errors, 0 warnings (4 instances checked: nranks=2, 3, 4, 8)`, also when
there is nothing to report, and a total line for several files.  The other formats
print the findings only (nothing when there are none): `concise` stays one line per
finding, `json`, `sarif` and `github` stay machine-readable."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
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
from ccogen.ir.instance import Instance


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lint", help="run every check on every instance")
    p.add_argument("files", nargs="+", metavar="FILE")
    instance_args(p)
    p.add_argument("--target", metavar="TARGET", help="also apply this backend's "
                   f"capabilities ({', '.join(target_names())})")
    format_args(p)
    p.add_argument("--strict", action="store_true", help="fail on warnings (and notes) too")
    p.add_argument("--verbose", action="store_true", help="say how each loop of 4 or more "
                   "iterations was checked: on three iterations, or unrolled and why")


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.driver import CheckOptions, check_protocol
    from ccogen.errors import DiagnosticError
    from ccogen.syntax import parse_ir

    team_sizes = ranks(args.ranks)
    target_name = target(args.target)
    bounds = limits(args)
    diagnostics: list[Diagnostic] = []
    summaries: list[str] = []
    files = 0
    for path in args.files:
        try:
            protocol = parse_ir(read(path), path)
        except DiagnosticError as exc:
            diagnostics.extend(exc.diagnostics)
            summaries.append(file_summary(path, exc.diagnostics, None))
            files += 1
            continue
        options = CheckOptions(ranks=team_sizes, params=params(args.param, protocol),
                               target=target_name, limits=bounds)
        result = check_protocol(protocol, options)
        diagnostics.extend(result.diagnostics)
        summaries.append(file_summary(path, result.diagnostics, result.instances))
        files += 1
        if args.verbose:
            summaries.extend(loop_lines(result.instances))
    if args.strict:  # a line the checker cannot prove fails a strict lint
        diagnostics = [replace(d, severity=Severity.WARNING) if d.sev is Severity.NOTE else d
                       for d in diagnostics]
    if args.format == "full":
        from ccogen.diag import render_full

        if files > 1:
            summaries.append(f"{files} files: {render_full.summary(diagnostics)}")
        findings = render_full.render(diagnostics, color=color(args), with_summary=False)
        write_out(findings + ("\n" if findings else "") + "\n".join(summaries))
    else:
        write_out(render(diagnostics, args.format, color=color(args)))
    failing = any(d.is_error for d in diagnostics) or (args.strict and diagnostics)
    return EXIT_FINDINGS if failing else EXIT_OK


def loop_lines(instances: Sequence[Instance]) -> list[str]:
    """`--verbose`: one line per loop of every instance, how it was instantiated."""
    out: list[str] = []
    for inst in instances:
        for note in inst.loops:
            where = f"{note.span}" if note.span is not None else "a loop"
            how = ("checked on iterations 0, 1 and the last (uniform in its variable)"
                   if note.sampled else f"unrolled: {note.reason}")
            line = f"  {where}: loop of {note.trips:,} iterations {how} [{inst.label()}]"
            if line not in out:
                out.append(line)
    return out


def file_summary(path: str, diagnostics: Sequence[Diagnostic],
                 instances: list[Instance] | None) -> str:
    """`path: N errors, M warnings (K instances checked: nranks=2, 3)`; `instances` None
    when the file did not parse."""
    from ccogen.diag.render_full import summary

    mine = [d for d in diagnostics if d.span is None or d.span.path == path]
    if instances is None:
        what = "not instantiated: the text has errors"
    elif not instances:
        what = "no instance checked"
    else:
        n = len(instances)
        sizes = ", ".join(str(i.nranks) for i in instances)
        what = f"{n} instance{'s' if n > 1 else ''} checked: nranks={sizes}"
    return f"{path}: {summary(mine)} ({what})"
