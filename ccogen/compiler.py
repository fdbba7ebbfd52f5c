"""`ccogen compile`: check one instance, then generate its code for a target.

`force=True` (`--force`) still generates when the checks found errors, as long as the
instance itself could be built: for watching a broken protocol fail on the device
(with `--debug`, a hanging wait is then reported instead of hanging).

The instance is the protocol at one team size (`ranks`, default: the protocol's fixed
size, else 2) with the parameters given.  Any error — syntax, names, an instance
check, the target's capabilities, or a shape the target cannot lower — refuses to
generate and is reported as a diagnostic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccogen.diag import Diagnostic, error
from ccogen.errors import DiagnosticError
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import Protocol
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits


class CompileError(Exception):
    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = list(diagnostics)


@dataclass(frozen=True)
class Compiled:
    instance: Instance
    target: str
    files: dict[str, str]


def default_ranks(protocol: Protocol, params: dict[str, int]) -> int:
    from ccogen.instantiate import team_sizes

    sizes = team_sizes(protocol, None, params=params)
    return sizes[0] if protocol.team.size is not None else 2


def compile_protocol(protocol: Protocol, target: str, *, source: str, ranks: int | None = None,
                     params: dict[str, int] | None = None, debug: bool = False,
                     force: bool = False,
                     arch: str | None = None, epoch_from_heap: bool = False,
                     limits: Limits | None = None) -> Compiled:
    """Check the instance (errors refuse) and generate its files for `target`.

    `epoch_from_heap` is `codegen.Options.epoch_from_heap` (kernels count their own
    launches, for CUDA-graph replay; `ccogen bench` sets it).
    """
    from ccogen.codegen import BACKENDS, Options, Unsupported, generate
    from ccogen.driver import CheckOptions, check_protocol

    params = params or {}
    if target not in BACKENDS:
        raise CompileError([error("E042", f"code generation for `{target}` is not available",
                                  protocol.span, "this protocol",
                                  help=f"targets with a code generator: {', '.join(BACKENDS)}")])
    n = ranks if ranks is not None else default_ranks(protocol, params)
    result = check_protocol(protocol, CheckOptions(ranks=(n,), params=params, target=target,
                                                   limits=limits or DEFAULT_LIMITS))
    errors = [d for d in result.diagnostics if d.is_error]
    if not result.instances or (errors and not force):
        raise CompileError(errors or result.diagnostics)
    instance = result.instances[0]
    try:
        options = Options(debug=debug, epoch_from_heap=epoch_from_heap,
                          **({"arch": arch} if arch else {}))
        files = generate(instance, target, source=source, options=options)
    except Unsupported as exc:
        raise CompileError([error("E042", str(exc), exc.span, "not supported here",
                                  help=f"`{target}` cannot lower this shape yet")]) from None
    return Compiled(instance, target, files.files)


def compile_file(path: str, target: str, *, ranks: int | None, params_text: Sequence[str],
                 out_dir: str | None, debug: bool = False, arch: str | None = None,
                 force: bool = False, limits: Limits | None = None) -> Path:
    """Compile a `.cco` file into `out_dir` (default: `./NAME-TARGET-nN/`).

    Files go through `ccogen.fileio.write_generated`: a file there that ccogen did not
    generate is kept unless `force`, and links are not written through (FileError).
    """
    from ccogen.fileio import read_source, write_generated
    from ccogen.syntax import parse_ir

    try:
        protocol = parse_ir(read_source(path), path)
    except DiagnosticError as exc:
        raise CompileError(exc.diagnostics) from None
    from ccogen.instantiate import parse_params

    params = parse_params(params_text, protocol)
    compiled = compile_protocol(protocol, target, source=path, ranks=ranks, params=params,
                                debug=debug, arch=arch, limits=limits)
    out = Path(out_dir) if out_dir else Path(
        f"{protocol.name}-{target}-n{compiled.instance.nranks}")
    write_generated(out, compiled.files, force=force, inputs=[path])
    return out
