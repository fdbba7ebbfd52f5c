"""ccogen: a compiler for GPU communication protocols.

Write a protocol once, in `.cco` text or with the builder, and ccogen proves it right
before anything runs, simulates it, and generates kernels for each vendor API.

    import ccogen as cg
    p = cg.parse(open("protocols/alltoall.cco").read(), "alltoall.cco")
    result = cg.check(p)                  # every check on every team size
    print(cg.render(result.diagnostics))  # rustc-style diagnostics
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen._version import __version__
from ccogen.diag import Diagnostic, Severity
from ccogen.errors import DiagnosticError, InternalError

if TYPE_CHECKING:
    from ccogen.builder import (
        GiB,
        KiB,
        MiB,
        Protocol,
        abs,
        and_,
        bf16,
        bytes,
        dtype,
        f16,
        f32,
        i32,
        i64,
        init,
        int_,
        lsa,
        max,
        min,
        not_,
        or_,
        sum,
        u8,
        u32,
        u64,
        where,
        world,
    )
    from ccogen.builder import int_ as int
    from ccogen.driver import CheckResult
    from ccogen.limits import Limits

_BUILDER = frozenset({
    "GiB", "KiB", "MiB", "Protocol", "abs", "and_", "bf16", "bytes", "dtype", "f16",
    "f32", "i32", "i64", "init", "int_", "lsa", "max", "min", "not_", "or_", "sum",
    "u8", "u32", "u64", "where", "world",
})


def __getattr__(name: str) -> Any:
    """The builder's names (`cg.Protocol`, `cg.KiB`, `cg.int`...), imported on first use:
    `ccogen lint` never needs the builder, whose imports (the runtime, numpy) cost more
    than the whole check of a small protocol."""
    if name in _BUILDER or name == "int":
        from ccogen import builder

        value = getattr(builder, "int_" if name == "int" else name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ccogen' has no attribute {name!r}")



def parse(text: str, path: str = "<string>") -> Protocol:
    """Parse `.cco` text into a `Protocol`; raises `DiagnosticError` (E001/E002)."""
    from ccogen.builder import Protocol
    from ccogen.syntax import parse_ir

    return Protocol.from_ir(parse_ir(text, path))


def load(path: str | Path) -> Protocol:
    """Read and parse a `.cco` file (regular UTF-8 files only: `ccogen.fileio`)."""
    from ccogen.fileio import read_source

    return parse(read_source(path), str(path))


def check(protocol: Protocol | str, *, ranks: tuple[builtins.int, ...] | None = None,
          params: dict[str, builtins.int] | None = None, target: str | None = None,
          limits: Limits | None = None) -> CheckResult:
    """Run every check on every instance (`ccogen lint`); returns the findings.

    `limits` (`ccogen.limits.Limits`) raises or lowers the resource limits (E006).
    """
    from ccogen.driver import CheckOptions, check_protocol, check_text
    from ccogen.limits import DEFAULT

    options = CheckOptions(ranks=ranks, params=params or {}, target=target,
                           limits=limits or DEFAULT)
    if isinstance(protocol, str):
        return check_text(protocol, "<string>", options)
    return check_protocol(protocol.ir, options)


def render(diagnostics: list[Diagnostic], fmt: str = "full", color: bool = False) -> str:
    """Render diagnostics as `full`, `concise`, `json`, `sarif` or `github` text."""
    from ccogen.diag.render import render as _render

    return _render(diagnostics, fmt, color=color)


def run(*args: Any, **kwargs: Any) -> Any:
    """Generate, build and launch a protocol on GPUs, checking `ensure` (see `ccogen.rt`)."""
    from ccogen.rt import run as _run

    return _run(*args, **kwargs)


def simulate(*args: Any, **kwargs: Any) -> Any:
    """Run a protocol on the CPU model under adversarial schedules (see `ccogen.sim`)."""
    from ccogen.sim import simulate as _simulate

    return _simulate(*args, **kwargs)


__all__ = [
    "Diagnostic",
    "DiagnosticError",
    "GiB",
    "InternalError",
    "KiB",
    "MiB",
    "Protocol",
    "Severity",
    "__version__",
    "abs",
    "and_",
    "bf16",
    "bytes",
    "check",
    "dtype",
    "f16",
    "f32",
    "i32",
    "i64",
    "init",
    "int",
    "int_",
    "load",
    "lsa",
    "max",
    "min",
    "not_",
    "or_",
    "parse",
    "render",
    "run",
    "simulate",
    "sum",
    "u8",
    "u32",
    "u64",
    "where",
    "world",
]
