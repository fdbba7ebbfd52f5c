"""`ccogen.run(protocol, target=..., ranks=..., params=..., iters=...)`: the Python entry.

Parse (text, path or Protocol) → check the instance for `ranks` and `params` and generate
kernels.cu + manifest.json for `target` (ccogen.compiler.compile_protocol: errors raise
DiagnosticError) → build and run (ccogen.rt.launch.run) → RunReport.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.errors import RunError
from ccogen.rt.launch import DEFAULT_WATCHDOG_S
from ccogen.rt.launch import run as run_manifest
from ccogen.rt.placement import Placement
from ccogen.rt.report import RunReport

if TYPE_CHECKING:
    from ccogen.compiler import Compiled
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


def placement_and_budget(target: str, ranks: int,
                         max_ctas: int | None) -> tuple[Placement | None, int | None]:
    """Where the ranks will run (ccogen.rt.placement) and the SM budget to generate for.

    Without `max_ctas`, ranks sharing a GPU get the largest budget that keeps every rank's
    kernels resident together whatever their occupancy (`placement.shared_budget`), at
    most the default.  (None, max_ctas) under torchrun / mpirun, and when the machine
    cannot run the ranks: the run then says why, after the protocol's own diagnostics.
    """
    from ccogen.rt.launch import _distributed_env
    from ccogen.rt.placement import place, sharing_budget

    if _distributed_env() is not None:
        return None, max_ctas
    try:
        placement = place(ranks, target)
    except RunError:
        return None, max_ctas
    if max_ctas is None and placement.shared:
        max_ctas = sharing_budget(placement.per_gpu, placement.sms)
    return placement, max_ctas


def generate_for_run(protocol: IrProtocol, source: str, target: str, ranks: int,
                     params: Mapping[str, int], out_dir: Path, *, debug: bool,
                     force: bool = False, epoch_from_heap: bool = False,
                     max_ctas: int | None = None, inputs: Sequence[str | Path] = ()) -> Compiled:
    """Check the instance (errors raise DiagnosticError), generate its files into out_dir;
    the `Compiled` (its `checked` instance at hand, the unrolled `instance` built on demand).

    `epoch_from_heap`: kernels count their own launches (codegen.Options), so captured
    launches can be replayed as a CUDA graph (`ccogen bench`).  `max_ctas`: the SM budget
    (codegen.Options.max_ctas; None: the default).  The files are written under `compile`'s
    rules (`ccogen.fileio.write_generated`: no file ccogen did not write is overwritten,
    no link is written through, never onto `inputs`; `force` does not change that);
    FileError otherwise."""
    from ccogen.compiler import compile_protocol
    from ccogen.fileio import write_generated

    compiled = compile_protocol(protocol, target, source=source, ranks=ranks,
                                params=dict(params), debug=debug, force=force,
                                epoch_from_heap=epoch_from_heap, max_ctas=max_ctas)
    write_generated(out_dir, compiled.files, inputs=inputs, force_flag=None)
    return compiled


def compile_for_run(protocol: IrProtocol, source: str, target: str, ranks: int,
                    params: Mapping[str, int], out_dir: Path, *, debug: bool,
                    force: bool = False, epoch_from_heap: bool = False,
                    max_ctas: int | None = None, inputs: Sequence[str | Path] = ()) -> Instance:
    """`generate_for_run`, and the instance with every iteration (what a run checks)."""
    return generate_for_run(protocol, source, target, ranks, params, out_dir, debug=debug,
                            force=force, epoch_from_heap=epoch_from_heap, max_ctas=max_ctas,
                            inputs=inputs).instance


def prepare_for_run(protocol: IrProtocol, source: str, target: str, ranks: int,
                    params: Mapping[str, int], out_dir: Path, *, debug: bool,
                    force: bool = False, max_ctas: int | None = None,
                    inputs: Sequence[str | Path] = ()) -> Instance:
    """`generate_for_run`, and the instance a run reads: the checked one (layout, parameters,
    run-time values; `ensure` is evaluated from the protocol per rank and epoch,
    ccogen.rt.prepare), or the unrolled one under `CCOGEN_RUN_UNROLLED=1` (the oracle)."""
    from ccogen.rt.prepare import unrolled

    compiled = generate_for_run(protocol, source, target, ranks, params, out_dir, debug=debug,
                                force=force, max_ctas=max_ctas, inputs=inputs)
    return compiled.instance if unrolled() else compiled.checked


def run(protocol: Any, target: str = "nccl-lsa", ranks: int = 2,
        params: Mapping[str, int] | None = None, iters: int = 100, *, debug: bool = False,
        seed: int = 0, watchdog_s: float = DEFAULT_WATCHDOG_S,
        out_dir: str | Path | None = None, force: bool = False,
        max_ctas: int | None = None) -> RunReport:
    """Generate, build and run `protocol` on `ranks` GPUs; check every `ensure` each epoch.

    `out_dir` keeps the generated files (a temporary directory otherwise), written under
    `compile`'s file rules (FileError when refused).  `force` runs
    a protocol the checker rejects (with `debug`, to see its hang reported).  `max_ctas`
    is the SM budget, the most CTAs one kernel launch may use (default: 32, fewer when
    ranks share a GPU: `placement_and_budget`).  Ranks beyond the GPUs share them under
    MPS on nvshmem (docs/runtime.md).  Raises DiagnosticError for a protocol with errors
    and RunError for set-up problems (no GPU, too few, missing toolchain, compile
    failure, kernels that could not all be resident); the report says whether `ensure`
    held.
    """
    ir, source = _protocol_ir(protocol)
    placement, budget = placement_and_budget(target, ranks, max_ctas)
    with tempfile.TemporaryDirectory(prefix="ccogen-gen-") as tmp:
        directory = Path(out_dir) if out_dir is not None else Path(tmp)
        instance = prepare_for_run(ir, Path(source).name, target, ranks, params or {},
                                   directory, debug=debug, force=force, max_ctas=budget,
                                   inputs=[source] if Path(source).is_file() else [])
        return run_manifest(directory, instance, iters=iters, seed=seed, debug=debug,
                            watchdog_s=watchdog_s, placement=placement)


__all__ = ["compile_for_run", "generate_for_run", "placement_and_budget", "prepare_for_run",
           "run"]
