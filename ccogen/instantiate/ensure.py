"""`ensure`: the postconditions, evaluated on every rank into `CheckInst`s."""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.instantiate.evaluating import Evaluating, forget_assigned
from ccogen.instantiate.sampling import Where
from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import EvalError
from ccogen.ir.instance import CheckInst, Issuer, ReductionInst, RegionInst
from ccogen.ir.runtime import Rt
from ccogen.source import Span

_BOUNDS = ("its regions have run-time bounds: the checker orders every read of it, but "
           "compares no values of a length it does not know")
_WEIGHTS = ("its weights are run-time values: the checker orders every read of it, but "
            "cannot compare sums whose weights it does not know")
_RANK = "it names a rank that is a run-time value"


class Ensure(Evaluating):
    """Evaluates the `ensure` statements on every rank into `CheckInst`s."""

    records_loads = True

    def _runtime_rank(self, expr: ir.Expr) -> bool:
        if self.loader is None:
            return False
        try:
            return isinstance(self.compiler.value(expr)(self.env), Rt)
        except EvalError:
            return False

    def run(self, stmts: Sequence[ir.Stmt]) -> list[CheckInst]:
        self.checks: list[CheckInst] = []
        self.wheres: list[Where | None] = []  # per check: its place in a sampled loop
        self._path: list[int] = []
        # (line, why) of every line a symbolic instance leaves to the simulator (N001)
        self.unproved: list[tuple[Span | None, str]] = []
        for rank in range(self.nranks):
            self._bind_rank(rank)
            self._body(stmts)
        return self.checks

    def _body(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Check):
                self._check(s)
            elif isinstance(s, ir.Assign):
                self._assign(s)
            elif isinstance(s, ir.For):
                self._for(s)
            elif isinstance(s, ir.If):
                cond = self._truth(s.cond, s.span)
                if cond is not None:
                    self._body(s.body if cond else s.orelse)
            else:
                kind = s.kind.value if isinstance(s, ir.IssuerBlock) else ir.OP_KINDS[type(s)]
                self._error("E002", f"`{kind}` is not allowed in `ensure`", s.span,
                            "in `ensure`", help="`ensure` holds comparisons, `for` and `if`")
        forget_assigned(self.env, stmts)

    def _for(self, s: ir.For) -> None:
        seq = self._seq(s.iter, "`for`", s.span)
        if seq is None:
            return
        iterations = self._iterations(s, len(seq))
        sampled = self._in_sample(s, len(seq))
        saved = self._enter(s, len(iterations))
        self._path.append(0)
        for i in iterations:
            self.env.vars[s.var] = seq[i]
            self._path[-1] = i
            if sampled:
                self.where = (id(s), i, len(seq))
            self._body(s.body)
        self.where = None
        self._path.pop()
        self._leave(s.var, saved)

    def _check(self, s: ir.Check) -> None:
        self.failed = False
        if isinstance(s.right, ir.Reduction):
            self._reduction_check(s, s.right)
            return
        left, right = self._side(s.left, s), self._side(s.right, s)
        self._same_length(f"the two sides of `{s.op}`", left, right,
                          (s.left.span or s.span, s.right.span),
                          ("the left side", "the right side"))
        if self.failed or left is None or right is None:
            return
        runtime = left.runtime is not None or right.runtime is not None
        self.unchecked += runtime  # symbolic: the values are left to the drawn contents
        if runtime:
            self.unproved.append((s.span, _BOUNDS))
        self.checks.append(CheckInst(rank=self.rank, op=s.op, left=left, left_init=s.left.init,
                                     right=right, right_init=s.right.init, check=s, span=s.span,
                                     runtime=runtime, loads=tuple(self.take_loads())))
        self.wheres.append(self._where(s))
        self._count(s)

    def _reduction_check(self, s: ir.Check, r: ir.Reduction) -> None:
        left = self._side(s.left, s)
        if left is None:
            return

        def term(region: ir.Region) -> tuple[RegionInst, bool] | None:
            inst = self._side(region, s)
            self._same_length(f"the two sides of `{s.op}`", left, inst,
                              (s.left.span or s.span, region.span),
                              ("the left side", "a term"))
            self._same_dtype(s.left, region, s.span, u8_views=False)
            return None if inst is None else (inst, region.init)

        terms = self._expand(r.terms, term)
        if terms is None:
            return
        runtime = left.runtime is not None or any(t.runtime is not None for t, _ in terms)
        if not terms:
            self._error("E003", f"`{r.op.value}` of no terms", r.span or s.span,
                        "the list is empty", help="list at least one term")
            return
        weights: list[int | float] = []
        if r.weights is not None:
            self.runtime_weights = False
            got = self._expand(r.weights, lambda w: self._number(w, "a weight", s.span))
            if got is None:
                return
            runtime = runtime or self.runtime_weights  # symbolic: weights are the simulator's
            if len(got) != len(terms):
                self._error("E003", f"`{r.op.value}` has {len(terms)} terms and {len(got)} "
                            "weights", r.span or s.span, "one weight per term",
                            help="give `weights=` exactly one number per term")
                return
            if not self._weights_fit(got, self._dtype(s.left.window), r.span or s.span):
                return
            weights = got
        reduction = ReductionInst(op=r.op, terms=tuple(t for t, _ in terms),
                                  init=tuple(i for _, i in terms), weights=tuple(weights),
                                  dtype=self._dtype(s.left.window))
        self.unchecked += runtime
        if runtime:
            self.unproved.append((s.span, _WEIGHTS if self.runtime_weights and not any(
                t.runtime is not None for t, _ in terms) and left.runtime is None
                else _BOUNDS))
        self.checks.append(CheckInst(rank=self.rank, op=s.op, left=left, left_init=s.left.init,
                                     right=None, right_init=False, check=s, span=s.span,
                                     reduction=reduction, runtime=runtime,
                                     loads=tuple(self.take_loads())))
        self.wheres.append(self._where(s))
        self._count(s)

    def _where(self, s: ir.Check) -> Where | None:
        if self.where is None:
            return None
        loop, v, trips = self.where
        return Where(loop, v, trips, (self.rank, -1, id(s), Issuer(), tuple(self._path[:-1])))

    def _side(self, region: ir.Region, s: ir.Check) -> RegionInst | None:
        rank: int | None = self.rank
        if region.rank is not None and self._runtime_rank(region.rank):
            self.failed = True  # a run-time rank: left to the simulator's drawn contents
            self.unchecked += 1
            self.unproved.append((s.span, _RANK))
            return None
        if region.rank is not None:
            rank = self._team_rank(region.rank, "rank", region.span or s.span, allow_me=True)
        region_inst = self._region(region, -1 if rank is None else rank, s.span)
        return region_inst if rank is not None else None
