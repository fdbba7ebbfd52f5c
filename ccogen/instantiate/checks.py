"""The `ensure` comparisons of an instance without unrolling its kernels (`ccogen run`).

`instantiate(...)` builds every op instance of every rank (R^2 x T for a MoE protocol)
before it evaluates `ensure`; a run needs only the comparisons, and for one rank.
`ensure_checks` binds the parameters, declares the memories and evaluates `ensure` alone
(the same `Ensure` evaluator `instantiate` uses, so the comparisons are the same ones, in
the same order: tests/runtime/test_prepare.py compares them with the unrolled instance's
on every library protocol).  What `load(...)` reads is the given contents (a run-time
protocol, `ccogen.rt.drawn`); a protocol whose loads read what its own ops write
(`read_after_write`) still needs the writes of a silent unrolling, and gets them from
the instantiation's own loader (`instantiate._loader`).

`ensure` evaluates no op, so the op-instance limit does not apply; its loop iterations
are bounded by `ITERATIONS` (4096 tokens x 8 ranks x 8 peers is 2.6 * 10^5 per rank).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ccogen.diag import Diagnostic
from ccogen.instantiate.declarations import (
    bind_dtype_params,
    bind_params,
    declare,
    is_dtype_param,
    team_ok,
)
from ccogen.instantiate.ensure import Ensure
from ccogen.instantiate.evaluating import Overflow
from ccogen.instantiate.findings import Findings, FindingsFull
from ccogen.instantiate.runtime import ConcreteLoader, Contents, Writes, read_after_write
from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import Compiler
from ccogen.ir.instance import CheckInst
from ccogen.limits import DEFAULT as DEFAULT_LIMITS

ITERATIONS = 50_000_000


class _RanksEnsure(Ensure):
    """`Ensure` on the ranks asked for only (each rank of a run checks its own lines)."""

    records_loads = False  # nothing orders the reads: the run only compares values

    def __init__(self, *args: Any, ranks: Sequence[int]) -> None:
        super().__init__(*args)
        self.only = tuple(ranks)

    def run(self, stmts: Sequence[ir.Stmt]) -> list[CheckInst]:
        self.checks = []
        self.wheres = []
        self._path = []
        self.unproved = []
        for rank in self.only:
            self._bind_rank(rank)
            self._body(stmts)
        return self.checks


def ensure_checks(protocol: ir.Protocol, nranks: int, params: Mapping[str, Any] | None,
                  contents: Contents | None = None, ranks: Sequence[int] | None = None
                  ) -> tuple[list[CheckInst] | None, list[Diagnostic]]:
    """The `ensure` comparisons of `ranks` (default: every rank), in `instantiate`'s order,
    for `contents` (a run-time protocol's drawn contents; None for a protocol without
    run-time values).  (None, diagnostics) when the instance has errors."""
    from ccogen.instantiate import _loader, uses_runtime

    limits = replace(DEFAULT_LIMITS, iterations=ITERATIONS)
    findings = Findings(nranks, "", limits, stop=True)
    compiler = Compiler()
    try:
        found = _declare(protocol, nranks, params, compiler, findings)
        if found is None:
            return None, findings.diagnostics()
        bound, decl = found
        loader: Any = None
        if uses_runtime(protocol):
            if contents is None:
                raise ValueError(f"`{protocol.name}` reads run-time values: its checks "
                                 "need the contents they are for")
            if read_after_write(protocol):
                loader = _loader(protocol, nranks, bound, decl, compiler, findings, contents)
            else:
                widths = {n: m.dtype.size for n, m in decl.memories.items() if m is not None}
                loader = ConcreteLoader(contents, Writes(widths=widths))
        ensure = _RanksEnsure(nranks, bound, decl.memories, compiler, findings,
                              ranks=range(nranks) if ranks is None else ranks)
        ensure.loader = loader
        ensure.empty_ok = contents is not None
        checks = ensure.run(protocol.ensure)
    except Overflow as exc:
        findings.add(exc.diagnostic, exc.rank)
        return None, findings.diagnostics()
    except FindingsFull:
        return None, findings.diagnostics()
    diags = findings.diagnostics()
    if any(d.is_error for d in diags):
        return None, diags
    return checks, diags


def declared(protocol: ir.Protocol, nranks: int, params: Mapping[str, Any] | None
             ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(bound integer parameters, memories) of the instance; None when binding or the
    declarations have errors (`ensure_checks` reports them)."""
    findings = Findings(nranks, "", DEFAULT_LIMITS, stop=True)
    try:
        found = _declare(protocol, nranks, params, Compiler(), findings)
    except (Overflow, FindingsFull):
        return None
    if found is None or any(d.is_error for d in findings.diagnostics()):
        return None
    bound, decl = found
    return dict(bound), dict(decl.memories)


def _declare(protocol: ir.Protocol, nranks: int, params: Mapping[str, Any] | None,
             compiler: Compiler, findings: Findings) -> tuple[Any, Any] | None:
    """The bound parameters and the declarations of the instance, or None (the reasons in
    `findings`) when binding, the team or the declarations fail."""
    given = dict(params or {})
    types = bind_dtype_params(protocol, given, findings)
    ints = {k: v for k, v in given.items() if not is_dtype_param(protocol, k)}
    bound = bind_params(protocol, nranks, ints, compiler, findings)
    if bound is None or types is None or not team_ok(protocol, nranks, bound, compiler,
                                                      findings):
        return None
    decl = declare(protocol, nranks, bound, types, compiler, findings)
    return None if decl.fatal else (bound, decl)


def memory_bytes(protocol: ir.Protocol, nranks: int, params: Mapping[str, Any]) -> int:
    """The bytes of one rank's windows and buffers (0 when the declarations fail)."""
    given = dict(params)
    findings = Findings(nranks)
    compiler = Compiler()
    types = bind_dtype_params(protocol, given, findings) or {}
    ints = {k: v for k, v in given.items() if not is_dtype_param(protocol, k)}
    bound = bind_params(protocol, nranks, ints, compiler, findings) or {}
    decl = declare(protocol, nranks, bound, types, compiler, findings)
    return sum(m.nbytes for m in decl.memories.values() if m is not None)


__all__ = ["ITERATIONS", "declared", "ensure_checks", "memory_bytes"]
