"""`ccogen compile` (check, then generate the kernels for a target) and `ccogen build`
(compile, then build the device binary with the real toolchain; no GPU needed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ccogen.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageError,
    limit_arg,
    limits,
    max_ctas_arg,
    read,
    target,
)

# what the builders (ccogen/toolchains) write beside the generated files
BUILD_OUTPUTS = ("kernels.cubin", "kernels.ptx", "host.o",
                 *(f"kernels.{arch}.hsaco" for arch in ("gfx942", "gfx950")))


def _compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.cco")
    p.add_argument("--target", required=True, help="mori-sdma, nccl-cft, nvshmem or nccl-lsa")
    p.add_argument("-o", "--output", metavar="DIR", help="output directory (default: "
                   "NAME-TARGET-nN/ in the current directory)")
    p.add_argument("--force", action="store_true", help="overwrite files in the output "
                   "directory that ccogen did not generate")
    p.add_argument("--ranks", type=int, default=None, metavar="N", help="team size")
    p.add_argument("--param", action="append", default=[], metavar="K=V")
    limit_arg(p)
    p.add_argument("--arch", default=None, metavar="ARCH", help="CUDA arch (sm_90 default; "
                   "nvshmem counted writes need sm_100, nccl-cft always builds for sm_100)")
    p.add_argument("--debug", action="store_true", help="bounded waits that report hangs "
                   "(mori-sdma: also -DMORI_CCO_SDMA_DEBUG)")
    max_ctas_arg(p)


def add_parsers(sub: Any) -> None:
    _compile_args(sub.add_parser("compile", help="check, then generate the kernels for a "
                                 "target"))
    _compile_args(sub.add_parser("build", help="compile, then build the device binary with "
                                 "the real toolchain (no GPU needed)"))


def _compile(args: argparse.Namespace) -> Path | None:
    """Run `ccogen compile`; None (diagnostics printed) when the protocol is refused."""
    from ccogen.compiler import compile_file
    from ccogen.errors import DiagnosticError

    read(args.file)
    target(args.target)
    try:
        return compile_file(args.file, args.target, ranks=args.ranks, params_text=args.param,
                            out_dir=args.output, debug=args.debug, arch=args.arch,
                            force=args.force, limits=limits(args), max_ctas=args.max_ctas)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except DiagnosticError as exc:
        from ccogen.diag.render import render

        sys.stdout.write(render(list(exc.diagnostics), "full", color=sys.stdout.isatty()))
        return None


def compile_command(args: argparse.Namespace) -> int:
    out = _compile(args)
    if out is None:
        return EXIT_FINDINGS
    print(f"wrote {out}")
    return EXIT_OK


def build_command(args: argparse.Namespace) -> int:
    """`ccogen build`: compile, then build with the real toolchain
    (scripts/install-toolchains.sh)."""
    from ccogen.errors import CompileError, RunError, ToolchainError
    from ccogen.fileio import check_build_outputs
    from ccogen.toolchains import build_dir

    out = _compile(args)
    if out is None:
        return EXIT_FINDINGS
    check_build_outputs(out, BUILD_OUTPUTS, force=args.force)  # before the toolchain writes
    try:
        result = build_dir(out, debug=args.debug)
    except ToolchainError as exc:
        raise UsageError(str(exc)) from None
    except CompileError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_FINDINGS
    except RunError as exc:  # a manifest refused (ManifestError), the cache (CacheError)
        raise UsageError(str(exc)) from None
    print(result.summary())
    return EXIT_OK
