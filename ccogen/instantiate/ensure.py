"""`ensure`: the postconditions, evaluated on every rank into `CheckInst`s."""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.instantiate.evaluating import Evaluating
from ccogen.ir import nodes as ir
from ccogen.ir.instance import CheckInst, RegionInst


class Ensure(Evaluating):
    """Evaluates the `ensure` statements on every rank into `CheckInst`s."""

    def run(self, stmts: Sequence[ir.Stmt]) -> list[CheckInst]:
        self.checks: list[CheckInst] = []
        for rank in range(self.nranks):
            self._bind_rank(rank)
            self._body(stmts)
        return self.checks

    def _body(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Check):
                self._check(s)
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

    def _for(self, s: ir.For) -> None:
        seq = self._seq(s.iter, "`for`", s.span)
        if seq is None:
            return
        saved = self._enter(s, len(seq))
        for value in seq:
            self.env.vars[s.var] = value
            self._body(s.body)
        self._leave(s.var, saved)

    def _check(self, s: ir.Check) -> None:
        self.failed = False
        left, right = self._side(s.left, s), self._side(s.right, s)
        self._same_length(f"the two sides of `{s.op}`", left, right,
                          (s.left.span or s.span, s.right.span),
                          ("the left side", "the right side"))
        if self.failed or left is None or right is None:
            return
        self.checks.append(CheckInst(rank=self.rank, op=s.op, left=left, left_init=s.left.init,
                                     right=right, right_init=s.right.init, check=s, span=s.span))
        self._count(s)

    def _side(self, region: ir.Region, s: ir.Check) -> RegionInst | None:
        rank: int | None = self.rank
        if region.rank is not None:
            rank = self._team_rank(region.rank, "rank", region.span or s.span, allow_me=True)
        region_inst = self._region(region, -1 if rank is None else rank, s.span)
        return region_inst if rank is not None else None
