"""`ccogen.run(protocol, target=..., ranks=..., params=..., iters=...)`: the Python entry.

Parse (text, path or Protocol) → check the instance for `ranks` and `params` and generate
kernels.cu + manifest.json for `target` (ccogen.compiler.compile_protocol: errors raise
DiagnosticError) → build and run (ccogen.rt.launch.run) → RunReport.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.rt.errors import RunError
from ccogen.rt.launch import DEFAULT_WATCHDOG_S
from ccogen.rt.launch import run as run_manifest
from ccogen.rt.report import RunReport

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance
    from ccogen.ir.nodes import Protocol as IrProtocol


def _protocol_ir(protocol: Any) -> tuple[IrProtocol, str]:
    """(IR protocol, source name) from a Protocol (builder or IR), a path or .cco text."""
    from ccogen.ir.nodes import Protocol as IrProtocol
    from ccogen.syntax import parse_ir

    if isinstance(protocol, IrProtocol):
        return protocol, f"{protocol.name}.cco"
    ir = getattr(protocol, "ir", None)
    if isinstance(ir, IrProtocol):
        return ir, f"{ir.name}.cco"
    if isinstance(protocol, Path) or (isinstance(protocol, str) and "\n" not in protocol
                                      and protocol.endswith(".cco")):
        path = Path(protocol)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RunError(f"cannot read {path}: {exc.strerror or exc}") from None
        return parse_ir(text, str(path)), str(path)
    if isinstance(protocol, str):
        return parse_ir(protocol, "<string>"), "<string>"
    raise TypeError(f"run() takes a Protocol, a .cco path or .cco text, not {type(protocol)}")


def compile_for_run(protocol: IrProtocol, source: str, target: str, ranks: int,
                    params: Mapping[str, int], out_dir: Path, *, debug: bool,
                    force: bool = False, epoch_from_heap: bool = False) -> Instance:
    """Check the instance (errors raise DiagnosticError), generate its files into out_dir.

    `epoch_from_heap`: kernels count their own launches (codegen.Options), so captured
    launches can be replayed as a CUDA graph (`ccogen bench`)."""
    from ccogen.compiler import compile_protocol

    compiled = compile_protocol(protocol, target, source=source, ranks=ranks,
                                params=dict(params), debug=debug, force=force,
                                epoch_from_heap=epoch_from_heap)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in compiled.files.items():
        (out_dir / name).write_text(text, encoding="utf-8")
    return compiled.instance


def run(protocol: Any, target: str = "nccl-lsa", ranks: int = 2,
        params: Mapping[str, int] | None = None, iters: int = 100, *, debug: bool = False,
        seed: int = 0, watchdog_s: float = DEFAULT_WATCHDOG_S,
        out_dir: str | Path | None = None, force: bool = False) -> RunReport:
    """Generate, build and run `protocol` on `ranks` GPUs; check every `ensure` each epoch.

    `out_dir` keeps the generated files (a temporary directory otherwise).  `force` runs
    a protocol the checker rejects (with `debug`, to see its hang reported).  Raises
    DiagnosticError for a protocol with errors and RunError for set-up problems (no GPU,
    too few, missing toolchain, compile failure); the report says whether `ensure` held.
    """
    ir, source = _protocol_ir(protocol)
    with tempfile.TemporaryDirectory(prefix="ccogen-gen-") as tmp:
        directory = Path(out_dir) if out_dir is not None else Path(tmp)
        instance = compile_for_run(ir, Path(source).name, target, ranks, params or {},
                                   directory, debug=debug, force=force)
        return run_manifest(directory, instance, iters=iters, seed=seed, debug=debug,
                            watchdog_s=watchdog_s)


__all__ = ["compile_for_run", "run"]
