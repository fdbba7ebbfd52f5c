"""The `ccogen` command line: the parser and the dispatch.  Each subcommand is a module of
this package (`add_parser` + its command function); what they share is `cli.common`.

Exit status: 0 clean; 1 errors found (or warnings with `--strict`, or `fmt --check`
would change a file); 2 usage or I/O error; 3 an internal error (a bug in ccogen; the
message says how to report it).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from ccogen._version import __version__
from ccogen.cli.common import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UsageError
from ccogen.errors import DiagnosticError
from ccogen.fileio import FileError


class _Parser(argparse.ArgumentParser):
    """argparse, with a misuse reported as one line (not the usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {self.prog}: {message} (`{self.prog} --help` lists the "
                         "options)\n")
        raise SystemExit(EXIT_USAGE)


# subcommand -> (module of this package, its command function); the modules are imported
# only for the command that runs (a cold `ccogen lint` must not import the simulator,
# the code generators or the runtime: docs/performance.md, "Cold start")
_COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "lint": ("lint", "command"), "fmt": ("fmt", "command"), "explain": ("explain", "command"),
    "compile": ("compile", "compile_command"), "build": ("compile", "build_command"),
    "run": ("run", "command"), "simulate": ("simulate", "command"), "bench": ("bench", "command"),
}
# the modules that add the subparsers, in the order of `ccogen --help`
_PARSERS = (("lint", "add_parser"), ("fmt", "add_parser"), ("explain", "add_parser"),
            ("compile", "add_parsers"), ("run", "add_parser"), ("simulate", "add_parser"),
            ("bench", "add_parser"))


def _module(name: str) -> ModuleType:
    """A subcommand's module, imported here (plain imports, which the import-cycle test
    sees as edges)."""
    if name == "lint":
        from ccogen.cli import lint

        return lint
    if name == "fmt":
        from ccogen.cli import fmt

        return fmt
    if name == "explain":
        from ccogen.cli import explain

        return explain
    if name == "compile":
        from ccogen.cli import compile

        return compile
    if name == "run":
        from ccogen.cli import run

        return run
    if name == "simulate":
        from ccogen.cli import simulate

        return simulate
    from ccogen.cli import bench

    assert name == "bench", name
    return bench


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; when `argv` starts with a subcommand, only that subcommand's module is
    imported and registered (its parse and `--help` are the same either way)."""
    p = _Parser(prog="ccogen", description="Check, simulate and generate GPU "
                                "communication protocols written in .cco")
    p.add_argument("--version", action="version", version=f"ccogen {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    first = argv[0] if argv else None
    only = _COMMAND_MODULES[first][0] if first in _COMMAND_MODULES else None
    for module, adder in _PARSERS:
        if only is None or module == only:
            getattr(_module(module), adder)(sub)
    return p


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        fn: Callable[[argparse.Namespace], int] = getattr(_module(module), name)
        return fn(args)

    command.__name__ = command.__qualname__ = name
    return command


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    command: _lazy(module, name) for command, (module, name) in _COMMAND_MODULES.items()}


def _internal_error(argv: Sequence[str]) -> int:
    sys.stderr.write(
        "error: internal error: this is a bug in ccogen\n"
        f"  = note: ccogen {__version__}, Python {sys.version.split()[0]}\n"
        f"  = help: please report it with the command line `ccogen {shlex.join(argv)}`, "
        "the input file and the trace below\n\n")
    traceback.print_exc(file=sys.stderr)
    return EXIT_INTERNAL


# commands that, run as the program, leave without the interpreter's teardown: a lint
# of 20k ops frees ~200k objects and every module one by one at exit (~0.1 CPU s), only
# for the process to end; nothing of theirs runs at exit (no atexit, no child processes)
_EXIT_AT_ONCE = frozenset({"lint", "fmt", "explain"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command.  Called without `argv` (as the program: `ccogen`, `python -m
    ccogen`), `lint`, `fmt` and `explain` flush their output and end the process at once
    (`_exit_at_once`); with `argv` it always returns the exit status."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser(argv).parse_args(argv)
    try:
        code = _dispatch(args, argv)
        if program and args.command in _EXIT_AT_ONCE:
            _exit_at_once(code)  # (the cached analyses are not freed: the process ends)
    finally:
        _forget_analyses()
    return code


def _exit_at_once(code: int) -> None:
    """End the process with `code` once stdout and stderr are flushed (`os._exit`: no
    teardown).  When a flush fails (a closed pipe), return: the normal exit reports it."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        return COMMANDS[args.command](args)
    except (UsageError, FileError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except DiagnosticError as exc:  # a source that is not UTF-8, before any parse
        from ccogen.diag.render import render

        fmt = getattr(args, "format", "full")
        sys.stdout.write(render(list(exc.diagnostics), fmt, color=sys.stdout.isatty()
                                and fmt in ("full", "concise")))
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ccogen explain E021 | head`
        sys.stderr.close()
        return EXIT_OK
    except Exception:
        return _internal_error(argv)


def _forget_analyses() -> None:
    """Drop the checker's cached analyses: freed now, they are not collected at exit
    (a 20k-op graph took half a second of the interpreter's last collection)."""
    analysis = sys.modules.get("ccogen.analysis")
    if analysis is not None:
        analysis.forget()


if __name__ == "__main__":
    raise SystemExit(main())
