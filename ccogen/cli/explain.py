"""`ccogen explain CODE`: what a rule catches, why, and examples."""

from __future__ import annotations

import argparse
from typing import Any

from ccogen.cli.common import EXIT_OK, UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("explain", help="explain a rule")
    p.add_argument("code", metavar="CODE")


def command(args: argparse.Namespace) -> int:
    from ccogen.diag.codes import explain_text

    try:
        print(explain_text(args.code))
    except KeyError:
        raise UsageError(f"unknown rule `{args.code}`; codes are E001–E042 and W100–W107") from None
    return EXIT_OK
