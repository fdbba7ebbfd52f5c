"""The `ccogen` command line.

Exit status: 0 clean; 1 errors found (or warnings with `--strict`, or `fmt --check`
would change a file); 2 usage or I/O error, or a command that needs a capability not
built yet; 3 an internal error (a bug in ccogen; the message says how to report it).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ccogen import __version__
from ccogen.diag import Diagnostic

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
FORMATS = ("full", "concise", "json", "sarif", "github")


class UsageError(Exception):
    """A mistake on the command line or an unreadable file: exit 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ccogen", description="Check, simulate and generate GPU "
                                "communication protocols written in .cco")
    p.add_argument("--version", action="version", version=f"ccogen {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = sub.add_parser("lint", help="run every check on every instance")
    lint.add_argument("files", nargs="+", metavar="FILE")
    _instance_args(lint)
    lint.add_argument("--target", metavar="TARGET", help="also apply this backend's "
                      f"capabilities ({', '.join(_target_names())})")
    lint.add_argument("--format", choices=FORMATS, default="full")
    lint.add_argument("--strict", action="store_true", help="fail on warnings too")
    lint.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    fmt = sub.add_parser("fmt", help="rewrite files in canonical form")
    fmt.add_argument("files", nargs="+", metavar="FILE")
    fmt.add_argument("--check", action="store_true", help="only report files that would change")

    explain = sub.add_parser("explain", help="explain a rule")
    explain.add_argument("code", metavar="CODE")

    comp = sub.add_parser("compile", help="check, then generate the kernels for a target")
    _compile_args(comp)
    build = sub.add_parser("build", help="compile, then build the device binary with the real "
                           "toolchain (no GPU needed)")
    _compile_args(build)

    from ccogen.bench.cli import add_bench_parser
    from ccogen.rt.cli import add_run_parser
    from ccogen.sim.cli import add_simulate_parser

    add_run_parser(sub)
    add_simulate_parser(sub)
    add_bench_parser(sub)
    for name, text in _LATER.items():
        later = sub.add_parser(name, help=text[0])
        later.add_argument("file", metavar="FILE.cco")
        later.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def _compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.cco")
    p.add_argument("--target", required=True, help="mori-sdma, nccl-cft, nvshmem or nccl-lsa")
    p.add_argument("-o", "--output", metavar="DIR", help="output directory")
    p.add_argument("--ranks", type=int, default=None, metavar="N", help="team size")
    p.add_argument("--param", action="append", default=[], metavar="K=V")
    p.add_argument("--arch", default=None, metavar="ARCH", help="CUDA arch (sm_90 default; "
                   "nvshmem counted writes need sm_100, nccl-cft always builds for sm_100)")
    p.add_argument("--debug", action="store_true", help="bounded waits that report hangs "
                   "(mori-sdma: also -DMORI_CCO_SDMA_DEBUG)")
    from ccogen.rt.cli import max_ctas_arg

    max_ctas_arg(p)


def _instance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks", action="append", default=None, metavar="N",
                   help="team size(s) to instantiate (repeat or comma-separate)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="override a parameter, e.g. --param block=4KiB")


# command -> (help, the capability it needs): subcommands announced before they exist
_LATER: dict[str, tuple[str, str]] = {}


def _ranks(values: Sequence[str] | None) -> tuple[int, ...] | None:
    if not values:
        return None
    try:
        ranks = tuple(int(x) for v in values for x in v.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--ranks takes integers, not {', '.join(values)!r}") from None
    if any(r < 1 for r in ranks):
        raise UsageError("--ranks must be at least 1")
    return ranks


def _params(values: Sequence[str], protocol: object) -> dict[str, int]:
    from ccogen.instantiate import parse_params
    from ccogen.ir.nodes import Protocol

    assert isinstance(protocol, Protocol)
    try:
        return parse_params(values, protocol)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _target_names() -> list[str]:
    from ccogen.targets import TARGETS

    return list(TARGETS)


def _target(name: str | None) -> str | None:
    """The `--target` name, checked against the capability tables (a usage error if unknown)."""
    if name is None:
        return None
    from ccogen.targets import UnknownTarget, get_target

    try:
        return get_target(name).name
    except UnknownTarget as exc:
        raise UsageError(f"--target: {exc}") from None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def cmd_lint(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.driver import CheckOptions, check_protocol
    from ccogen.errors import DiagnosticError
    from ccogen.syntax import parse_ir

    ranks = _ranks(args.ranks)
    target = _target(args.target)
    diagnostics: list[Diagnostic] = []
    for path in args.files:
        text = _read(path)
        try:
            protocol = parse_ir(text, path)
        except DiagnosticError as exc:
            diagnostics.extend(exc.diagnostics)
            continue
        options = CheckOptions(ranks=ranks, params=_params(args.param, protocol),
                               target=target)
        diagnostics.extend(check_protocol(protocol, options).diagnostics)
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    out = render(diagnostics, args.format, color=color)
    if out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    failing = any(d.is_error for d in diagnostics) or (args.strict and diagnostics)
    return EXIT_FINDINGS if failing else EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from ccogen.diag.render import render
    from ccogen.errors import DiagnosticError
    from ccogen.syntax.format import format_text

    status = EXIT_OK
    for path in args.files:
        text = _read(path)
        try:
            formatted = format_text(text, path)
        except DiagnosticError as exc:
            sys.stderr.write(render(list(exc.diagnostics), "full", color=sys.stderr.isatty()))
            status = EXIT_FINDINGS
            continue
        if formatted == text:
            continue
        if args.check:
            print(f"would reformat {path}")
            status = EXIT_FINDINGS
        else:
            Path(path).write_text(formatted, encoding="utf-8")
            print(f"reformatted {path}")
    return status


def cmd_explain(args: argparse.Namespace) -> int:
    from ccogen.diag.codes import explain_text

    try:
        print(explain_text(args.code))
    except KeyError:
        raise UsageError(f"unknown rule `{args.code}`; codes are E001–E042 and W100–W107") from None
    return EXIT_OK


def cmd_later(args: argparse.Namespace) -> int:
    what, needs = _LATER[args.command]
    sys.stderr.write(f"error: `ccogen {args.command}` is not available yet: it needs {needs}, "
                     "which this version of ccogen does not have\n"
                     "  = help: `ccogen lint` checks the protocol today\n")
    return EXIT_USAGE


def _compile(args: argparse.Namespace) -> Path | None:
    """Run `ccogen compile`; None (diagnostics printed) when the protocol is refused."""
    from ccogen.compiler import CompileError, compile_file

    _read(args.file)
    try:
        return compile_file(args.file, args.target, ranks=args.ranks, params_text=args.param,
                            out_dir=args.output, debug=args.debug, arch=args.arch,
                            max_ctas=args.max_ctas)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except CompileError as exc:
        from ccogen.diag.render import render

        sys.stdout.write(render(exc.diagnostics, "full", color=sys.stdout.isatty()))
        return None


def cmd_compile(args: argparse.Namespace) -> int:
    out = _compile(args)
    if out is None:
        return EXIT_FINDINGS
    print(f"wrote {out}")
    return EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    """`ccogen build`: compile, then build with the real toolchain (scripts/install-toolchains.sh)."""
    from ccogen.rt.errors import CompileError, ToolchainError
    from ccogen.toolchains import build_dir

    out = _compile(args)
    if out is None:
        return EXIT_FINDINGS
    try:
        result = build_dir(out, debug=args.debug)
    except ToolchainError as exc:
        raise UsageError(str(exc)) from None
    except CompileError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_FINDINGS
    print(result.summary())
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from ccogen.rt.cli import run_command

    return run_command(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from ccogen.bench.cli import bench_command

    return bench_command(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    from ccogen.sim.cli import simulate_command

    return simulate_command(args)


COMMANDS = {"lint": cmd_lint, "fmt": cmd_fmt, "explain": cmd_explain, "compile": cmd_compile,
            "build": cmd_build, "run": cmd_run, "simulate": cmd_simulate,
            "bench": cmd_bench}


def _internal_error(argv: Sequence[str]) -> int:
    sys.stderr.write(
        "error: internal error: this is a bug in ccogen\n"
        f"  = note: ccogen {__version__}, Python {sys.version.split()[0]}\n"
        f"  = help: please report it with the command line `ccogen {shlex.join(argv)}`, "
        "the input file and the trace below\n\n")
    traceback.print_exc(file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int | NoReturn:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        return COMMANDS.get(args.command, cmd_later)(args)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ccogen explain E021 | head`
        sys.stderr.close()
        return EXIT_OK
    except Exception:  # noqa: BLE001 - the last line of defence: report as a bug
        return _internal_error(argv)


if __name__ == "__main__":
    raise SystemExit(main())
