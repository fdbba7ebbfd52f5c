"""`ccogen compile`: check one instance, then generate its code for a target.

`force=True` (`--force`) still generates when the checks found errors, as long as the
instance itself could be built: for watching a broken protocol fail on the device
(with `--debug`, a hanging wait is then reported instead of hanging).

The instance is the protocol at one team size (`ranks`, default: the protocol's fixed
size, else 2) with the parameters given.  Any error — syntax, names, an instance
check, the target's capabilities, or a shape the target cannot lower — refuses to
generate: `DiagnosticError` carries the diagnostics.  (When the generated code then
fails to build, that is `ccogen.errors.CompileError`, the compiler's log.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ccogen.diag import error
from ccogen.errors import DiagnosticError, InternalError
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import Protocol
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits
from ccogen.targets import TARGETS

if TYPE_CHECKING:
    from ccogen.codegen import GeneratedFiles, Options
    from ccogen.driver import CheckResult


@dataclass(frozen=True)
class Compiled:
    """What `compile_protocol` generated.  `checked` is the instance the checks ran on
    (its uniform loops on three iterations: docs/checker.md); `instance` the unrolled
    one, built when first asked for where the code was generated from `checked`
    (codegen.loops): the runtime's `ensure` checks and traffic count every iteration.
    `unrolled` says why the code was generated from the unrolled instance although a
    loop was sampled ("" when it was not)."""

    checked: Instance
    target: str
    files: dict[str, str]
    unrolled: str = ""
    _unroll: Callable[[], Instance] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def instance(self) -> Instance:
        return self.checked if self._unroll is None else self._unroll()


def default_ranks(protocol: Protocol, params: dict[str, int]) -> int:
    from ccogen.instantiate import team_sizes

    sizes = team_sizes(protocol, None, params=params)
    return sizes[0] if protocol.team.size is not None else 2


def compile_protocol(protocol: Protocol, target: str, *, source: str, ranks: int | None = None,
                     params: dict[str, int] | None = None, debug: bool = False,
                     force: bool = False,
                     arch: str | None = None, epoch_from_heap: bool = False,
                     limits: Limits | None = None,
                     max_ctas: int | None = None, loops: bool = True,
                     check_result: CheckResult | None = None) -> Compiled:
    """Check the instance and generate its files for `target`; `DiagnosticError` when
    the protocol is refused (an error, unless `force`) or the target cannot lower it.

    A loop the checks ran on three iterations is generated from them (codegen.loops)
    where the target can (`Backend.folds_loops`); `loops=False` (an internal switch, the
    differential tests' oracle) generates every target from the unrolled instance.

    `epoch_from_heap` is `codegen.Options.epoch_from_heap` (kernels count their own
    launches, for CUDA-graph replay; `ccogen bench` sets it).  `max_ctas` is the SM
    budget, `codegen.Options.max_ctas` (None: its default).

    `check_result`: what `check_protocol` already returned for this very protocol and the
    options this call checks with (`ranks=(n,)`, `params`, `target`, `limits`); it is
    used instead of checking again (ValueError when it was checked otherwise).
    """
    from ccogen.codegen import Options
    from ccogen.codegen.backends import get_backend
    from ccogen.codegen.loops import Unfoldable
    from ccogen.driver import CheckOptions, check_protocol

    params = params or {}
    if target not in TARGETS:
        raise DiagnosticError([error(
            "E042", f"code generation for `{target}` is not available", protocol.span,
            "this protocol", help=f"targets with a code generator: {', '.join(TARGETS)}")])
    n = ranks if ranks is not None else default_ranks(protocol, params)
    wanted = CheckOptions(ranks=(n,), params=params, target=target,
                          limits=limits or DEFAULT_LIMITS)
    if check_result is None:
        result = check_protocol(protocol, wanted)
    elif check_result.protocol is protocol and check_result.options == wanted:
        result = check_result
    else:
        raise ValueError("`check_result` is not the check of this protocol with these options")
    errors = [d for d in result.diagnostics if d.is_error]
    if not result.instances or (errors and not force):
        raise DiagnosticError(errors or result.diagnostics)
    checked = result.instances[0]
    options = Options(debug=debug, epoch_from_heap=epoch_from_heap)
    if arch:
        options = replace(options, arch=arch)
    if max_ctas is not None:
        options = replace(options, max_ctas=max_ctas)

    def unrolled() -> Instance:
        return _every_iteration(protocol, n, params, limits)

    if not any(note.sampled for note in checked.loops):
        return Compiled(checked, target, _generate(checked, target, source, options).files)
    why = "" if loops and get_backend(target).folds_loops else \
        "the unrolled path was asked for" if not loops else \
        f"`{target}` generates from unrolled instances only"
    if not why:  # kernels from the three iterations checked (codegen.loops)
        try:
            files = _generate(checked, target, source, options, fold=True)
            return Compiled(checked, target, files.files, _unroll=unrolled)
        except Unfoldable as exc:
            why = str(exc)
    instance = unrolled()  # every iteration, for the kernels
    return Compiled(instance, target, _generate(instance, target, source, options).files,
                    unrolled=why)


def _generate(instance: Instance, target: str, source: str, options: Options,
              fold: bool = False) -> GeneratedFiles:
    """`codegen.generate`, a shape the target cannot lower refused with E042 (`fold`: an
    `Unfoldable` loop is left to the caller)."""
    from ccogen.codegen import Unsupported, generate
    from ccogen.codegen.loops import Unfoldable

    try:
        return generate(instance, target, source=source, options=options)
    except Unfoldable:
        if fold:
            raise
        raise InternalError("a loop of an unrolled instance was taken for sampled") from None
    except Unsupported as exc:
        raise DiagnosticError([error("E042", str(exc), exc.span, "not supported here",
                                     help=f"`{target}` cannot lower this shape yet")]) from None


def _every_iteration(protocol: Protocol, nranks: int, params: dict[str, int],
                     limits: Limits | None) -> Instance:
    """The instance with every loop unrolled, for code generation (its findings are the
    checked instance's: docs/checker.md, "Loops checked on three iterations")."""
    from ccogen.analysis import gc_paused
    from ccogen.instantiate import instantiate

    with gc_paused():
        instance, diags = instantiate(protocol, nranks, params, limits or DEFAULT_LIMITS)
    if instance is None:  # a limit the three iterations stayed under (E006)
        raise DiagnosticError([d for d in diags if d.is_error] or diags)
    return instance


def compile_file(path: str, target: str, *, ranks: int | None, params_text: Sequence[str],
                 out_dir: str | None, debug: bool = False, arch: str | None = None,
                 force: bool = False, limits: Limits | None = None,
                 max_ctas: int | None = None) -> Path:
    """Compile a `.cco` file into `out_dir` (default: `./NAME-TARGET-nN/`).

    Files go through `ccogen.fileio.write_generated`: a file there that ccogen did not
    generate is kept unless `force`, and links are not written through (FileError).
    """
    from ccogen.fileio import read_source, write_generated
    from ccogen.instantiate import parse_params
    from ccogen.syntax import parse_ir

    protocol = parse_ir(read_source(path), path)
    params = parse_params(params_text, protocol)
    compiled = compile_protocol(protocol, target, source=path, ranks=ranks, params=params,
                                debug=debug, arch=arch, limits=limits, max_ctas=max_ctas)
    out = Path(out_dir) if out_dir else Path(
        f"{protocol.name}-{target}-n{compiled.checked.nranks}")
    write_generated(out, compiled.files, force=force, inputs=[path])
    if compiled.unrolled:  # a sampled loop generated from every iteration (docs/codegen.md)
        print(f"note: kernels generated from the unrolled instance: {compiled.unrolled}",
              file=sys.stderr)
    return out
