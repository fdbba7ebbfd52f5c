"""Evaluation on one rank at a time, reporting into the findings: expressions, loops
and their limits, team ranks and regions.  The base of the kernel unroller and of
`ensure`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ccogen.diag import Diagnostic, error
from ccogen.instantiate.findings import Findings
from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import Compiler, Env, EvalError, IntFn, expr_text
from ccogen.ir.instance import RegionInst
from ccogen.limits import raise_hint
from ccogen.source import Span

_UNSET = object()


class Overflow(Exception):
    def __init__(self, diagnostic: Diagnostic, rank: int) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic
        self.rank = rank


class Evaluating:
    """Evaluation on one rank at a time, reporting into the findings."""

    def __init__(self, nranks: int, params: Mapping[str, int], windows: Mapping[str, int | None],
                 compiler: Compiler, findings: Findings) -> None:
        self.nranks = nranks
        self.params = params
        self.windows = windows
        self.compiler = compiler
        self.findings = findings
        self.rank = 0
        self.env = Env(nranks, 0, params)
        self.failed = False
        self.total = 0
        self.iterations = 0
        self._loops: list[ir.Stmt] = []
        self._bounds: dict[int, tuple[IntFn | None, IntFn | None, ir.Region]] = {}

    def _bind_rank(self, rank: int) -> None:
        self.rank = rank
        self.env = Env(self.nranks, rank, self.params)

    def _error(self, code: str, message: str, span: Span | None, label: str = "", *,
               secondary: Iterable[tuple[Span | None, str]] = (), help: str | None = None) -> None:
        self.failed = True
        self.findings.add(error(code, message, span, label, secondary=secondary,
                                notes=(self.env.bindings(),), help=help), self.rank)

    def _eval_failed(self, exc: EvalError, fallback: Span | None) -> None:
        self._error(exc.code, exc.message, exc.span or fallback, exc.label, help=exc.help)

    def _int(self, expr: ir.Expr, what: str, fallback: Span | None) -> int | None:
        try:
            return self.compiler.integer(expr, what)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    def _seq(self, expr: ir.Expr, what: str, fallback: Span | None) -> tuple[int, ...] | None:
        try:
            return self.compiler.sequence(expr, what)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    def _truth(self, expr: ir.Expr, fallback: Span | None) -> bool | None:
        try:
            return bool(self.compiler.value(expr)(self.env))
        except EvalError as exc:
            self._eval_failed(exc, fallback)
            return None

    # ------------------------------------------------------------------ loops and limits

    def _enter(self, loop: ir.For | ir.IssuerBlock, n: int) -> object:
        self._loops.append(loop)
        self.iterations += n
        if self.iterations > (limit := self.findings.limits.iterations):
            raise self._overflow(loop, f"more than {limit:,} loop iterations", "iterations")
        return self.env.vars.get(loop.var, _UNSET)

    def _leave(self, var: str, saved: object) -> None:
        self._loops.pop()
        if saved is _UNSET:
            self.env.vars.pop(var, None)
        else:
            self.env.vars[var] = saved  # type: ignore[assignment]

    def _count(self, node: ir.Stmt) -> None:
        self.total += 1
        if self.total > (limit := self.findings.limits.op_instances):
            raise self._overflow(node, f"more than {limit:,} op instances", "op-instances")

    def _overflow(self, node: ir.Stmt, what: str, name: str) -> Overflow:
        where = self._loops[0] if self._loops else node
        message = ("this loop unrolls to " if self._loops else "the protocol has ") + what
        return Overflow(error("E006", message, where.span, "unrolled here",
                              notes=(self.env.bindings(),),
                              help=f"lower the loop bounds or the parameters they use; "
                                   f"{raise_hint(name)}"), self.rank)

    # ------------------------------------------------------------------ ranks and regions

    def _team_rank(self, expr: ir.Expr, role: str, fallback: Span | None, *,
                   allow_me: bool) -> int | None:
        span = expr.span or fallback
        value = self._int(expr, f"the {role}", span)
        if value is None:
            return None
        n = self.nranks
        if not 0 <= value < n:
            text = expr_text(expr)
            subject = f"{role} {value} is" if text == str(value) else f"{role} `{text}` is {value},"
            self._error("E010", f"{subject} outside the team of {n} rank{'s' if n != 1 else ''}",
                        span, f"ranks are 0 to {n - 1}",
                        help="name a rank of the team, e.g. `(me + 1) % nranks` or one of "
                             "`peers()`")
            return None
        if value == self.rank and not allow_me:
            self._error("E010", "`me` used as a peer", span, f"this is rank {value}, `me` itself",
                        help="loop over `peers()` rather than `ranks()`; "
                             "moving data within one rank is a `copy`")
            return None
        return value

    def _region(self, region: ir.Region, rank: int, fallback: Span | None) -> RegionInst | None:
        size = self.windows.get(region.window, -1)
        if size is None or size < 0:
            self._no_window(region, size, fallback)
            return None
        bounds = self._bounds.get(id(region))
        if bounds is None:
            bounds = self._bound_fns(region)
            self._bounds[id(region)] = bounds
        try:
            start = 0 if bounds[0] is None else bounds[0](self.env)
            stop = size if bounds[1] is None else bounds[1](self.env)
        except EvalError as exc:
            self._eval_failed(exc, region.span or fallback)
            return None
        if 0 <= start < stop <= size:
            return RegionInst(region.window, start, stop, rank)
        self._bad_bounds(region, rank, start, stop, size, region.span or fallback)
        return None

    def _bound_fns(self, region: ir.Region) -> tuple[IntFn | None, IntFn | None, ir.Region]:
        def fn(e: ir.Expr | None) -> IntFn | None:
            return None if e is None else self.compiler.integer(e, "a region bound")
        return fn(region.start), fn(region.stop), region

    def _no_window(self, region: ir.Region, size: int | None, fallback: Span | None) -> None:
        if size is not None:
            self._error("E002", f"unknown window `{region.window}`", region.span or fallback,
                        "not a declared window")
        self.failed = True  # a window whose size failed was reported with the window

    def _bad_bounds(self, region: ir.Region, rank: int, start: int, stop: int, size: int,
                    span: Span | None) -> None:
        text = _region_text(region, rank, start, stop)
        if start >= stop:
            label = "starts where it ends" if start == stop else f"ends at {stop}, before {start}"
            self._error("E003", f"region `{text}` is empty", span, label,
                        help="a region `w[a:b]` holds bytes a to b-1 and needs a < b")
            return
        label = (f"starts {-start} bytes before the window" if start < 0
                 else f"ends {stop - size} bytes past the end of the window")
        self._error("E003", f"region `{text}` is outside window `{region.window}` of {size} "
                    "bytes", span, label, help=f"keep bounds within 0 and {size}")

    def _same_length(self, what: str, a: RegionInst | None, b: RegionInst | None,
                     spans: tuple[Span | None, Span | None], names: tuple[str, str]) -> None:
        if a is None or b is None or a.size == b.size:
            return
        self._error("E003", f"{what} differ in length: {a.size} and {b.size} bytes", spans[0],
                    f"{names[0]} is {a.size} bytes", secondary=[(spans[1],
                    f"{names[1]} is {b.size} bytes")], help="give both regions the same length")


def _region_text(region: ir.Region, rank: int, start: int, stop: int) -> str:
    base = region.window if region.rank is None else f"{region.window}@{rank}"
    if region.init:
        base = f"init({base})"
    return f"{base}[{start}:{stop}]"
