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
                     arch: str | None = None, epoch_from_heap: bool = False) -> Compiled:
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
    result = check_protocol(protocol, CheckOptions(ranks=(n,), params=params, target=target))
    errors = [d for d in result.diagnostics if d.is_error]
    if not result.instances or (errors and not force):
        raise CompileError(errors or result.diagnostics)
    instance = result.instances[0]
    pending = _not_generated_yet(instance)
    if pending is not None:
        raise CompileError([pending])
    try:
        options = Options(debug=debug, epoch_from_heap=epoch_from_heap,
                          **({"arch": arch} if arch else {}))
        files = generate(instance, target, source=source, options=options)
    except Unsupported as exc:
        raise CompileError([error("E042", str(exc), exc.span, "not supported here",
                                  help=f"`{target}` cannot lower this shape yet")]) from None
    return Compiled(instance, target, files.files)


def _not_generated_yet(instance: Instance) -> Diagnostic | None:
    """Language v2 ops and local buffers: checked and simulated, not yet generated.

    The code generation of `reduce`, `signal` and `buffer` is the follow-up of issue 15;
    until it lands, compiling such a protocol is E042 instead of an internal error.
    """
    from ccogen.ir.opkind import OpKind

    for ops in instance.ranks:
        for op in ops:
            if op.kind is OpKind.REDUCE or op.kind is OpKind.SIGNAL:
                return error("E042", f"code generation for `{op.kind}` is not implemented yet",
                             op.span, "checked and simulated, not generated",
                             help="`ccogen lint` and `ccogen simulate` accept it; code "
                                  "generation for language v2 ops is under way")
    buffer = next(iter(instance.protocol.buffers), None)
    if buffer is not None:
        return error("E042", "code generation for local buffers is not implemented yet",
                     buffer.span, "checked and simulated, not generated",
                     help="declare a `window` to compile it today")
    return None


def compile_file(path: str, target: str, *, ranks: int | None, params_text: Sequence[str],
                 out_dir: str | None, debug: bool = False, arch: str | None = None) -> Path:
    from ccogen.codegen.files import GeneratedFiles
    from ccogen.syntax import parse_ir

    text = Path(path).read_text(encoding="utf-8")
    try:
        protocol = parse_ir(text, path)
    except DiagnosticError as exc:
        raise CompileError(exc.diagnostics) from None
    from ccogen.instantiate import parse_params

    params = parse_params(params_text, protocol)
    compiled = compile_protocol(protocol, target, source=path, ranks=ranks, params=params,
                                debug=debug, arch=arch)
    out = Path(out_dir) if out_dir else Path("build") / (
        f"{protocol.name}-{target}-n{compiled.instance.nranks}")
    GeneratedFiles(compiled.files).write(out)
    return out
