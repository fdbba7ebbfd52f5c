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
        raise UsageError(f"unknown rule `{args.code}`; codes are {known_codes()}") from None
    return EXIT_OK


def known_codes() -> str:
    """`E001–E042 and W100–W108`: the registry's ranges, from the registry."""
    from ccogen.diag.codes import RULES

    errors = sorted(c for c in RULES if c.startswith("E"))
    warnings = sorted(c for c in RULES if c.startswith("W"))
    return f"{errors[0]}–{errors[-1]} and {warnings[0]}–{warnings[-1]} (`docs/reference/rules.md`)"
