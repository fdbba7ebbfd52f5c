"""The `.cco` text front end: grammar, parser, AST, lowering, printer."""

from __future__ import annotations

from pathlib import Path

from ccogen.errors import DiagnosticError
from ccogen.ir.nodes import Protocol
from ccogen.source import SourceFile


def parse_ir(text: str, path: str = "<string>") -> Protocol:
    """Parse and lower `.cco` text; raise `DiagnosticError` (E001/E002) on mistakes."""
    from ccogen.syntax.lower import lower
    from ccogen.syntax.parser import parse_ast

    file = SourceFile(path, text)
    protocol, diags = lower(parse_ast(file))
    if diags:
        raise DiagnosticError(diags)
    return protocol


def load_ir(path: str | Path) -> Protocol:
    """Read and parse a `.cco` file (regular UTF-8 files only: `ccogen.fileio`)."""
    from ccogen.fileio import read_source

    return parse_ir(read_source(path), str(path))


def to_source(protocol: Protocol) -> str:
    """The `.cco` text of a protocol; `DiagnosticError` (E006) when it nests too deeply."""
    from ccogen.ir.depth import depth_error
    from ccogen.syntax.printer import print_protocol

    if (deep := depth_error(protocol)) is not None:
        raise DiagnosticError([deep])
    return print_protocol(protocol)


__all__ = ["load_ir", "parse_ir", "to_source"]
