"""A `require` bound's `sum(... for t in range(n))` evaluated over the whole range at once.

`rank_counts[p] == sum((t < ntok[0]) * max(topk_rank[t * k + j] == p for j in range(k))
for t in range(tokens))` narrows `rank_counts[p]` to the sum's interval.  Term by term
(`ccogen.ir.evaluate` on `Rt` values) that is `tokens * k` comparisons, each building a
run-time value with its text: 20 s at the MoE prefill shape.  Here each sub-expression
is a numpy array over every index of the sum (loop variables are axes, an inner
`max(... for j in range(k))` an axis reduced), and each element is one of

* INT: a static integer (`boolish`: it may be a Python bool, which compares with a
  run-time value by another rule than an int does, `Rt._cmp`);
* RTC: a run-time value without unknowns (`Rt({}, c)`);
* ATOM: one unknown with coefficient 1 and no constant (an element, a run-time truth, a
  product...), with its interval; `cell` when the unknown is an initial element.

Each operation follows what `Rt` does on such a value (the same decisions and
intervals: `Rt._cmp`'s two paths, `rt_min_max`, `rt_sum`, products by corners).  Any
value outside these forms (a linear form of several unknowns, a negative coefficient,
where unknowns might cancel), any unbounded element, error or construct not covered
here makes `sum_bound` give None, and the caller evaluates term by term (the
reference, which also reports the error at its place).  With every coefficient +1 the
sum's interval is the sum of its terms' intervals: what `Rt` computes for the merged form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import Compiler, Env, EvalError
from ccogen.ir.runtime import Atom, Rt

INT, RTC, ATOM = 0, 1, 2
_LIMIT = 1 << 40  # larger values: term by term (no int64 overflow here)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class _Bail(Exception):
    """Outside what is evaluated here: the caller evaluates term by term."""


@dataclass
class _Vec:
    kind: np.ndarray     # int8: INT, RTC or ATOM
    lo: np.ndarray       # int64: the value (INT, RTC) or the unknown's lower bound
    hi: np.ndarray       # int64: the value (INT, RTC) or the unknown's upper bound
    cell: np.ndarray     # bool: an ATOM that is an initial element
    boolish: np.ndarray  # bool: an INT that may be a Python bool


def _const(n: int, value: int, boolish: bool = False) -> _Vec:
    v = np.full(n, value, dtype=np.int64)
    return _Vec(np.zeros(n, np.int8), v, v.copy(), np.zeros(n, bool), np.full(n, boolish))


def _check(*arrays: np.ndarray) -> None:
    for a in arrays:
        if a.size and int(np.abs(a).max()) >= _LIMIT:
            raise _Bail


def _runtime_const(value: Rt, n: int) -> _Vec:
    """A run-time value bound to a name (`m = x[0]`): RTC, or ATOM when one bounded
    unknown with coefficient 1 and no constant."""
    if not value.terms:
        out = _const(n, value.const)
        out.kind[:] = RTC
        return out
    if value.const != 0 or len(value.terms) != 1 or value.lo is None or value.hi is None:
        raise _Bail
    (atom, k), = value.terms.items()
    if k != 1:
        raise _Bail
    _check(np.array([value.lo, value.hi]))
    return _Vec(np.full(n, ATOM, np.int8), np.full(n, value.lo, np.int64),
                np.full(n, value.hi, np.int64), np.full(n, atom.cell is not None),
                np.zeros(n, bool))


class SumBounds:
    """`sum_bound(expr, env)` for the expressions of one protocol's `require`."""

    def __init__(self, compiler: Compiler, bounds: Any) -> None:
        self.compiler = compiler
        self.bounds = bounds  # `runtime.Bounds`
        self._deps: dict[int, tuple[object, frozenset[str], bool]] = {}

    # ------------------------------------------------------------------ entry
    def sum_bound(self, e: ir.GenExpr, env: Env) -> int | Rt | None:
        """What `Compiler.value(e)(env)` gives, as far as `_narrow` uses it (an int, or
        an `Rt` with the same interval, not one element alone), or None: evaluate term
        by term."""
        if e.func != "sum" or e.cond is not None:
            return None
        try:
            seq = self._static_seq(e.iter, env)
            if len(seq) < 2:
                return None
            n = len(seq)
            ctx = {e.var: np.asarray(seq, dtype=np.int64)}
            terms = self._eval(e.elt, env, ctx, n)
        except (_Bail, EvalError, ArithmeticError, ValueError, TypeError):
            return None
        is_rt = terms.kind != INT
        if not is_rt.any():
            return int(terms.lo.sum())
        atoms = terms.kind == ATOM
        const = int(terms.lo[~atoms].sum())
        if int(atoms.sum()) == 1 and const == 0 and bool(terms.cell[atoms][0]):
            return None  # one element alone: `_narrow` would bound it too
        lo = const + int(terms.lo[atoms].sum())
        hi = const + int(terms.hi[atoms].sum())
        if not atoms.any():
            return Rt({}, const)
        return Rt({Atom(("op", "sum-interval"), lo, hi, "sum(...)"): 1}, 0)

    # ------------------------------------------------------------------ helpers
    def _deps_of(self, e: ir.Expr) -> tuple[frozenset[str], bool]:
        """The variables `e` names and whether it reads run-time values or `launch`."""
        hit = self._deps.get(id(e))
        if hit is None:
            from ccogen.instantiate.sampling import nodes_of

            names: set[str] = set()
            dynamic = False
            for node in nodes_of(e):
                if isinstance(node, ir.Var):
                    names.add(node.name)
                elif isinstance(node, ir.Load | ir.Launch | ir.GenExpr):
                    dynamic = True
            hit = self._deps[id(e)] = (e, frozenset(names), dynamic)
        return hit[1], hit[2]

    def _static_seq(self, e: ir.Expr, env: Env) -> tuple[int, ...]:
        _, dynamic = self._deps_of(e)
        if dynamic:
            raise _Bail
        seq = self.compiler.sequence(e, "`sum(... for ...)`")(env)
        if any(v.__class__ is not int for v in seq):
            raise _Bail
        return seq

    def _eval(self, e: ir.Expr, env: Env, ctx: Mapping[str, np.ndarray], n: int) -> _Vec:
        names, dynamic = self._deps_of(e)
        if not dynamic and not (names & ctx.keys()):
            value = self.compiler.value(e)(env)
            if isinstance(value, Rt):
                return _runtime_const(value, n)
            if isinstance(value, bool):
                return _const(n, int(value), True)
            if value.__class__ is not int:
                raise _Bail
            _check(np.array([value]))
            return _const(n, value)  # type: ignore[arg-type]
        if isinstance(e, ir.Var):
            if e.name not in ctx:
                raise _Bail
            arr = ctx[e.name]
            return _Vec(np.zeros(n, np.int8), arr, arr.copy(), np.zeros(n, bool),
                        np.zeros(n, bool))
        if isinstance(e, ir.BinOp):
            return self._binop(e.op, self._eval(e.left, env, ctx, n),
                               self._eval(e.right, env, ctx, n))
        if isinstance(e, ir.UnaryOp) and e.op in ("+", "-"):
            u = self._eval(e.operand, env, ctx, n)
            if e.op == "+":
                return _Vec(u.kind, u.lo, u.hi, u.cell, np.zeros(n, bool))
            if (u.kind == ATOM).any():
                raise _Bail  # coefficient -1
            return _Vec(u.kind, -u.lo, -u.hi, u.cell, np.zeros(n, bool))
        if isinstance(e, ir.Compare):
            if len(e.ops) != 1:
                raise _Bail
            return self._compare(e.ops[0], self._eval(e.operands[0], env, ctx, n),
                                 self._eval(e.operands[1], env, ctx, n))
        if isinstance(e, ir.Call) and e.func in ("min", "max") and len(e.args) > 1:
            vs = [self._eval(a, env, ctx, n) for a in e.args]
            return self._minmax(e.func, vs)
        if isinstance(e, ir.GenExpr):
            return self._gen(e, env, ctx, n)
        if isinstance(e, ir.Load):
            return self._load(e, env, ctx, n)
        raise _Bail

    def _gen(self, e: ir.GenExpr, env: Env, ctx: Mapping[str, np.ndarray], n: int) -> _Vec:
        if e.cond is not None:
            raise _Bail
        names, _ = self._deps_of(e.iter)
        if names & ctx.keys():
            raise _Bail
        seq = self._static_seq(e.iter, env)
        m = len(seq)
        if m == 0:
            if e.func == "sum":
                return _const(n, 0)
            raise _Bail  # `max` of nothing: the error, term by term
        inner = {k: np.repeat(v, m) for k, v in ctx.items()}
        inner[e.var] = np.tile(np.asarray(seq, dtype=np.int64), n)
        v = self._eval(e.elt, env, inner, n * m)
        parts = [_Vec(*(a.reshape(n, m)[:, i] for a in (v.kind, v.lo, v.hi, v.cell,
                                                        v.boolish))) for i in range(m)]
        if e.func == "sum":
            return self._sum(v, n, m)
        return self._minmax(e.func, parts)

    def _sum(self, v: _Vec, n: int, m: int) -> _Vec:
        """`rt_sum` (or Python's sum) of each row of m values."""
        kind = v.kind.reshape(n, m)
        lo, hi, cell = v.lo.reshape(n, m), v.hi.reshape(n, m), v.cell.reshape(n, m)
        atoms = kind == ATOM
        count = atoms.sum(axis=1)
        const = np.where(atoms, 0, lo).sum(axis=1)
        any_rt = (kind != INT).any(axis=1)
        if ((count > 1) | ((count == 1) & (const != 0))).any():
            raise _Bail  # a linear form of several unknowns
        one = count == 1
        out_kind = np.where(one, ATOM, np.where(any_rt, RTC, INT)).astype(np.int8)
        out_lo = np.where(one, np.where(atoms, lo, 0).sum(axis=1), const)
        out_hi = np.where(one, np.where(atoms, hi, 0).sum(axis=1), const)
        out_cell = one & (atoms & cell).any(axis=1)
        _check(out_lo, out_hi)
        return _Vec(out_kind, out_lo, out_hi, out_cell, np.zeros(n, bool))

    def _minmax(self, func: str, vs: list[_Vec]) -> _Vec:
        """`rt_min_max` where a value is run-time, else Python's `min`/`max`."""
        kind = np.stack([v.kind for v in vs])
        lo, hi = np.stack([v.lo for v in vs]), np.stack([v.hi for v in vs])
        pick = np.min if func == "min" else np.max
        any_rt = (kind != INT).any(axis=0)
        any_atom = (kind == ATOM).any(axis=0)
        out_lo, out_hi = pick(lo, axis=0), pick(hi, axis=0)
        boolish = np.stack([v.boolish for v in vs]).any(axis=0) & ~any_rt
        out_kind = np.where(any_atom, ATOM, INT).astype(np.int8)
        return _Vec(out_kind, out_lo, out_hi, np.zeros(len(out_lo), bool), boolish)

    def _binop(self, op: str, a: _Vec, b: _Vec) -> _Vec:
        n = len(a.kind)
        no = np.zeros(n, bool)
        a_int, b_int = a.kind == INT, b.kind == INT
        a_atom, b_atom = a.kind == ATOM, b.kind == ATOM
        if op in ("+", "-"):
            if op == "-" and b_atom.any():
                raise _Bail  # coefficient -1
            if (a_atom & b_atom).any() or (a_atom & (b.lo != 0)).any() or \
                    (b_atom & (a.lo != 0)).any():
                raise _Bail  # an unknown plus a constant, or two unknowns
            sign = 1 if op == "+" else -1
            value = a.lo + sign * b.lo
            kind = np.where(a_atom | b_atom, ATOM,
                            np.where(a_int & b_int, INT, RTC)).astype(np.int8)
            lo = np.where(a_atom, a.lo, np.where(b_atom, b.lo, value))
            hi = np.where(a_atom, a.hi, np.where(b_atom, b.hi, value))
            cell = (a_atom & a.cell) | (b_atom & b.cell)
            _check(lo, hi)
            return _Vec(kind, lo, hi, cell, no)
        if op == "*":
            _check(a.lo, a.hi, b.lo, b.hi)
            both = a_atom & b_atom
            one_a = a_atom & ~b_atom  # unknown times constant c (INT or RTC)
            one_b = b_atom & ~a_atom
            c = np.where(one_a, b.lo, np.where(one_b, a.lo, 1))
            if (((one_a | one_b)) & (c != 0) & (c != 1)).any():
                raise _Bail  # a coefficient other than 0 or 1
            corners = np.stack([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
            value = a.lo * b.lo
            zero = (one_a | one_b) & (c == 0)
            keep_a, keep_b = one_a & (c == 1), one_b & (c == 1)
            kind = np.where(both | keep_a | keep_b, ATOM,
                            np.where(a_int & b_int, INT, RTC)).astype(np.int8)
            lo = np.where(both, corners.min(axis=0), np.where(
                keep_a, a.lo, np.where(keep_b, b.lo, np.where(zero, 0, value))))
            hi = np.where(both, corners.max(axis=0), np.where(
                keep_a, a.hi, np.where(keep_b, b.hi, np.where(zero, 0, value))))
            cell = (keep_a & a.cell) | (keep_b & b.cell)
            _check(lo, hi)
            return _Vec(kind, lo, hi, cell, no)
        if op in ("//", "%"):
            if (~b_int).any() or (b.lo == 0).any():
                raise _Bail  # by a run-time value, or by zero: the error term by term
            rt = ~a_int
            if (rt & (b.lo < 0)).any():
                raise _Bail
            k = np.where(b.lo == 0, 1, b.lo)
            if op == "//":
                kind = np.where(rt, ATOM, INT).astype(np.int8)
                return _Vec(kind, a.lo // k, a.hi // k, no, no)
            inside = rt & (a.lo >= 0) & (a.hi < k)
            opaque = rt & ~inside
            kind = np.where(opaque, ATOM, a.kind).astype(np.int8)
            lo = np.where(opaque, 0, np.where(inside, a.lo, a.lo % k))
            hi = np.where(opaque, k - 1, np.where(inside, a.hi, a.hi % k))
            return _Vec(kind, lo, hi, inside & a.cell, no)
        raise _Bail

    def _compare(self, op: str, a: _Vec, b: _Vec) -> _Vec:
        """`a op b` as Python dispatches it: `Rt._cmp` of the run-time side."""
        if op not in _FLIP:
            raise _Bail
        n = len(a.kind)
        a_int, b_int = a.kind == INT, b.kind == INT
        if ((a.kind == ATOM) & (b.kind == ATOM)).any():
            raise _Bail  # the unknowns might cancel
        # self: the run-time operand whose `_cmp` runs (a when a is run-time)
        swap = (a_int & ~b_int) | ((a.kind == RTC) & (b.kind == ATOM))
        s_kind = np.where(swap, b.kind, a.kind)
        s_lo, s_hi = np.where(swap, b.lo, a.lo), np.where(swap, b.hi, a.hi)
        o_kind = np.where(swap, a.kind, b.kind)
        o_val = np.where(swap, a.lo, b.lo)
        o_bool = np.where(swap, a.boolish, b.boolish)
        results = np.zeros(n, np.int64)
        decided = np.ones(n, bool)
        for this_op, where in ((op, ~swap), (_FLIP[op], swap)):
            if not where.any():
                continue
            r, d = self._decide(this_op, s_kind, s_lo, s_hi, o_kind, o_val, o_bool)
            results = np.where(where, r, results)
            decided = np.where(where, d, decided)
        plain = a_int & b_int  # two static numbers: Python's comparison
        value = _PY_CMP[op](a.lo, b.lo)
        results = np.where(plain, value, results)
        decided = decided | plain
        kind = np.where(decided, INT, ATOM).astype(np.int8)
        lo = np.where(decided, results, 0)
        hi = np.where(decided, results, 1)
        return _Vec(kind, lo, hi, np.zeros(n, bool), decided.copy())

    @staticmethod
    def _decide(op: str, s_kind: np.ndarray, s_lo: np.ndarray, s_hi: np.ndarray,
                o_kind: np.ndarray, o_val: np.ndarray, o_bool: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """`self op other` for run-time `self` (RTC or ATOM) and a constant `other`: the
        truth where decided, and where."""
        atom_path = (s_kind == ATOM) & (o_kind == INT) & ~o_bool  # `_decide_atom`
        terms = s_kind == ATOM  # d = self - other has unknowns
        lo, hi = s_lo - o_val, s_hi - o_val
        true: np.ndarray
        false: np.ndarray
        if op == "<":
            true, false = hi < 0, lo >= 0
        elif op == "<=":
            true, false = hi <= 0, lo > 0
        elif op == ">":
            true, false = lo > 0, hi <= 0
        elif op == ">=":
            true, false = lo >= 0, hi < 0
        else:
            outside = (lo > 0) | (hi < 0)
            exact = (~terms | atom_path) & (lo == 0) & (hi == 0)
            if op == "==":
                true, false = exact, outside
            else:
                true, false = outside, exact
        return true.astype(np.int64), true | false

    def _load(self, e: ir.Load, env: Env, ctx: Mapping[str, np.ndarray], n: int) -> _Vec:
        # only `runtime.SymbolicLoader` over these very bounds holds `bounds` and `writes`
        # (asked by attribute: `runtime` imports this module, so no import back)
        loader = env.loader
        if getattr(loader, "bounds", None) is not self.bounds or (
                not e.init and getattr(loader, "writes", None) is not None):
            raise _Bail
        index = self._eval(e.index, env, ctx, n)
        if e.rank is None:
            if env.me is None:
                raise _Bail
            rank = _const(n, env.me)
        else:
            rank = self._eval(e.rank, env, ctx, n)
        if (index.kind != INT).any() or (rank.kind != INT).any():
            raise _Bail
        lo, hi = self._cell_bounds(e.window, rank.lo, index.lo)
        return _Vec(np.full(n, ATOM, np.int8), lo, hi, np.ones(n, bool), np.zeros(n, bool))

    def _cell_bounds(self, window: str, ranks: np.ndarray, index: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Each element's interval, as `Bounds.get` gives it (all bounded, else bail)."""
        bounds = self.bounds
        if any(c[0] == window for c in bounds.deferred):
            raise _Bail  # asking would narrow it first, in term order
        if (index < 0).any() or (ranks < 0).any():
            raise _Bail  # no such element: unbounded, term by term
        width = int(index.max()) + 1
        keys, inverse = np.unique(ranks * width + index, return_inverse=True)
        inverse = inverse.reshape(-1)
        lo = np.zeros(len(keys), np.int64)
        hi = np.zeros(len(keys), np.int64)
        single = {(c[1], c[2]) for c in dict.keys(bounds) if c[0] == window}
        key_rank, key_index = np.divmod(keys, width)
        for rank in np.unique(key_rank).tolist():
            at = np.flatnonzero(key_rank == rank)
            idx = key_index[at]
            f_lo, f_hi, has_lo, has_hi, found = bounds.family_intervals(window, rank, idx)
            if single:
                for pos, i in enumerate(idx.tolist()):
                    if (rank, i) in single:  # narrowed one by one too: as `get` does
                        got = bounds.get((window, rank, i))
                        if got is None or got[0] is None or got[1] is None:
                            raise _Bail
                        f_lo[pos], f_hi[pos] = got
                        found[pos] = has_lo[pos] = has_hi[pos] = True
            if not (found.all() and has_lo.all() and has_hi.all()):
                raise _Bail  # an unbounded element
            lo[at], hi[at] = f_lo, f_hi
        _check(lo, hi)
        return lo[inverse], hi[inverse]


_PY_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
           "==": np.equal, "!=": np.not_equal}

__all__ = ["SumBounds"]
