"""`ccogen fmt FILE... [--check]`: rewrite files in canonical form, comments kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ccogen.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, read
from ccogen.fileio import FileError, write_atomic


def add_parser(sub: Any) -> None:
    p = sub.add_parser("fmt", help="rewrite files in canonical form")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--check", action="store_true", help="only report files that would change")


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.errors import DiagnosticError
    from ccogen.syntax.format import format_text

    status = EXIT_OK
    for path in args.files:
        try:
            text = read(path)
            formatted = format_text(text, path)
        except UsageError as exc:
            sys.stderr.write(f"error: {exc}\n")
            status = max(status, EXIT_USAGE)
            continue
        except DiagnosticError as exc:
            sys.stderr.write(render(list(exc.diagnostics), "full", color=sys.stderr.isatty()))
            status = max(status, EXIT_FINDINGS)
            continue
        if formatted == text:
            continue
        if args.check:
            print(f"would reformat {path}")
            status = max(status, EXIT_FINDINGS)
            continue
        try:
            write_atomic(path, formatted)
        except FileError as exc:  # the file keeps its old text; go on with the others
            sys.stderr.write(f"error: {exc}\n")
            status = max(status, EXIT_USAGE)
            continue
        print(f"reformatted {path}")
    return status
