"""What every subcommand shares: exit codes, the usage error, argument groups and the
helpers that turn argument text into checked values (a usage error when it is wrong)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ccogen.limits import Limits

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
FORMATS = ("full", "concise", "json", "sarif", "github")


class UsageError(Exception):
    """A mistake on the command line or an unreadable file: exit 2."""


def instance_args(p: argparse.ArgumentParser) -> None:
    """`--ranks` (several team sizes) and `--param`, for commands that check instances."""
    p.add_argument("--ranks", action="append", default=None, metavar="N",
                   help="team size(s) to instantiate (repeat or comma-separate)")
    param_arg(p)
    limit_arg(p)


def limit_arg(p: argparse.ArgumentParser) -> None:
    from ccogen.limits import Limits

    p.add_argument("--limit", action="append", default=[], metavar="NAME=N",
                   help=f"raise or lower a resource limit ({', '.join(Limits.names())}; "
                        "see docs/reliability.md)")


def limits(args: argparse.Namespace) -> Limits:
    """The `--limit NAME=N` values applied to the defaults (a usage error when wrong)."""
    from ccogen.instantiate import parse_param_value
    from ccogen.ir.nodes import ParamType
    from ccogen.limits import DEFAULT

    try:
        return DEFAULT.with_overrides(getattr(args, "limit", []) or [],
                                      lambda text: parse_param_value(text, ParamType.BYTES))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def param_arg(p: argparse.ArgumentParser, help: str = "override a parameter, "
              "e.g. --param block=4KiB") -> None:
    p.add_argument("--param", action="append", default=[], metavar="K=V", help=help)


def max_ctas_arg(p: argparse.ArgumentParser) -> None:
    """`--max-ctas N`: the SM budget (codegen.Options.max_ctas), for compile/build/run/bench."""
    p.add_argument("--max-ctas", type=_positive, default=None, metavar="N",
                   help="SM budget: at most N CTAs per kernel launch (default 32; "
                        "`run` picks fewer when ranks share a GPU)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {value}")
    return value


def format_args(p: argparse.ArgumentParser) -> None:
    """`--format` and `--color`, for commands that print diagnostics."""
    p.add_argument("--format", choices=FORMATS, default="full")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def color(args: argparse.Namespace) -> bool:
    return args.color == "always" or (args.color == "auto" and sys.stdout.isatty())


def ranks(values: Sequence[str] | None) -> tuple[int, ...] | None:
    """The `--ranks` values (repeated or comma-separated), or None when not given."""
    if not values:
        return None
    try:
        out = tuple(int(x) for v in values for x in v.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--ranks takes integers, not {', '.join(values)!r}") from None
    if any(r < 1 for r in out):
        raise UsageError("--ranks must be at least 1")
    return out


def params(values: Sequence[str], protocol: object) -> dict[str, int]:
    """The `--param K=V` overrides, checked against the protocol's parameters."""
    from ccogen.instantiate import parse_params
    from ccogen.ir.nodes import Protocol

    assert isinstance(protocol, Protocol)
    try:
        return parse_params(values, protocol)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def target_names() -> list[str]:
    from ccogen.targets import TARGETS

    return list(TARGETS)


def target(name: str | None) -> str | None:
    """The `--target` name, checked against the known targets (a usage error if unknown)."""
    if name is None:
        return None
    from ccogen.targets import UnknownTarget, get_target

    try:
        return get_target(name).name
    except UnknownTarget as exc:
        raise UsageError(f"--target: {exc}") from None


def read(path: str) -> str:
    """A source file's text: a usage error when it cannot be read (`ccogen.fileio`), a
    `DiagnosticError` (E001) when it is not UTF-8."""
    from ccogen.fileio import FileError, read_source

    try:
        return read_source(path)
    except FileError as exc:
        raise UsageError(str(exc)) from None


def write_out(text: str) -> None:
    """Print rendered output, ending it with one newline."""
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
