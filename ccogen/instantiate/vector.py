"""`require` on drawn contents, evaluated with numpy over whole loops (every draw's).

Drawing an epoch's contents (`ccogen.sim.runtime.draw`) sets the elements `require`
defines (`rank_counts[p] == sum(... for t in range(tokens))`) and then checks every
`require` on the result.  The interpreter (`instantiate.runtime.derive` / `unsatisfied`)
evaluates each iteration and each generator term in Python: at 4096 tokens x top-8 x 8
ranks that is 2 * 10^6 terms per rank and draw, a minute per epoch.  Here a loop
variable is an array axis (`for` and generator variables each get their own axis, numpy
broadcasting does the nesting), a generator is a reduction over its axis, a `load` a
gather from the contents' typed view, and a defining `x[i] == EXPR` one scattered store.

The subset: `for` over a sequence with scalar bounds, `require`, names assigned in the
block; constants, parameters, `me`, `nranks`, arithmetic, comparisons, `and`/`or`/`not`,
`max`/`min`/`abs` calls, `sum`/`max`/`min` generators without a condition, and loads of
initial contents on a scalar rank.  Anything else raises `Unsupported`, and the caller
takes the interpreter (the same verdicts: tests/runtime/test_prepare.py compares the
draws of both; `ccogen.sim.runtime.draw` takes this path first).  An index outside its
memory is `Unsupported` too: the interpreter reports it at its place.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ccogen.instantiate.runtime import Contents
from ccogen.instantiate.sampling import nodes_of
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.values import decode, storage

MAX_AXES = 16  # nested loops and generators of one `require`


class Unsupported(Exception):
    """The statement or expression is outside the vectorised subset."""


class _Env:
    def __init__(self, nranks: int, me: int, params: Mapping[str, int]) -> None:
        self.nranks, self.me, self.params = nranks, me, params
        self.vars: dict[str, Any] = {}
        self.depth = 0
        self.lengths: list[int] = []  # of the enclosing `for` loops, outermost first


def _axis(values: Sequence[int], depth: int) -> np.ndarray:
    if depth >= MAX_AXES:
        raise Unsupported("too many nested loops")
    shape = [1] * MAX_AXES
    shape[depth] = len(values)
    return np.asarray(values, dtype=np.int64).reshape(shape)


def _restore(env: _Env, var: str, saved: Any) -> None:
    """Give `var` back the value it had before a loop or comprehension bound it."""
    if saved is None:
        env.vars.pop(var, None)
    else:
        env.vars[var] = saved


@contextmanager
def _for_axis(env: _Env, var: str, seq: Sequence[int]) -> Iterator[None]:
    """The body of `for var in seq` evaluated once over a new array axis: `var` is that
    axis, and the loop's length is recorded in `env.lengths`."""
    saved = env.vars.get(var)
    env.vars[var] = (_axis(seq, env.depth), env.depth)
    env.depth += 1
    env.lengths.append(len(seq))
    try:
        yield
    finally:
        env.lengths.pop()
        env.depth -= 1
        _restore(env, var, saved)


class Vector:
    """`require` of one protocol on given contents, rank by rank."""

    def __init__(self, protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                 contents: Contents) -> None:
        self.protocol, self.nranks, self.params = protocol, nranks, params
        self.contents = contents
        self._views: dict[tuple[int, str], np.ndarray] = {}

    # -- contents ------------------------------------------------------------------------
    def _values(self, window: str, rank: int) -> np.ndarray:
        """The elements of `window` on `rank`, decoded (a view for integer types)."""
        key = (rank, window)
        raw = self.contents.arrays.get(key)
        if raw is None:
            raise Unsupported(f"no contents for {window}@{rank}")
        dtype = self.contents.dtypes.get(window, DType.U8)
        if dtype.is_float:
            return decode(raw, dtype)
        return raw.view(storage(dtype))

    def _store(self, window: str, rank: int, index: np.ndarray, value: np.ndarray) -> None:
        dtype = self.contents.dtypes.get(window, DType.U8)
        raw = self.contents.arrays[(rank, window)]
        index, value = np.broadcast_arrays(index, value)
        flat, vals = index.ravel(), value.ravel()
        if flat.size and (flat.min() < 0 or flat.max() * dtype.size >= raw.size):
            raise Unsupported("an index outside its memory")
        if dtype.is_float:
            from ccogen.ir.values import encode

            enc: np.ndarray = encode(vals.astype(np.float32), dtype).view(storage(dtype))
            raw.view(storage(dtype))[flat] = enc
        else:
            raw.view(storage(dtype))[flat] = vals.astype(np.int64).astype(storage(dtype))

    # -- statements ----------------------------------------------------------------------
    def derive(self) -> None:
        """Set every element a `require` of the form `x[i] == EXPR` defines, in order."""
        for rank in range(self.nranks):
            self._block(self.protocol.require, _Env(self.nranks, rank, self.params),
                        derive=True, broken=None, path=())

    def unsatisfied(self) -> list[str]:
        """The `require` statements the contents violate (`line L on rank r`), in the
        interpreter's order."""
        broken: list[tuple[tuple[int, ...], str]] = []
        for rank in range(self.nranks):
            self._block(self.protocol.require, _Env(self.nranks, rank, self.params),
                        derive=False, broken=broken, path=(rank,))
        return [text for _, text in sorted(broken, key=lambda b: b[0])]

    def _block(self, stmts: Sequence[ir.Stmt], env: _Env, *, derive: bool,
               broken: list[tuple[tuple[int, ...], str]] | None, path: tuple[Any, ...]
               ) -> None:
        assigned: list[str] = []
        for pos, s in enumerate(stmts):
            if isinstance(s, ir.Require):
                self._require(s, env, derive, broken, (*path, pos))
            elif isinstance(s, ir.Assign):
                env.vars[s.var] = self._expr(s.value, env)
                assigned.append(s.var)
            elif isinstance(s, ir.For):
                seq = self._sequence(s.iter, env)
                with _for_axis(env, s.var, seq):
                    self._block(s.body, env, derive=derive, broken=broken, path=(*path, pos))
            else:
                raise Unsupported(type(s).__name__)
        for name in assigned:
            env.vars.pop(name, None)

    def _require(self, s: ir.Require, env: _Env, derive: bool,
                 broken: list[tuple[tuple[int, ...], str]] | None, path: tuple[Any, ...]
                 ) -> None:
        cond = s.cond
        if derive:
            if (isinstance(cond, ir.Compare) and cond.ops == ("==",)
                    and isinstance(cond.operands[0], ir.Load)):
                target = cond.operands[0]
                if _reads(cond.operands[1], target.window):
                    raise Unsupported("a definition that reads its own memory")
                rank = env.me if target.rank is None else self._scalar(target.rank, env)
                index = np.asarray(self._expr(target.index, env))
                value = np.asarray(self._expr(cond.operands[1], env))
                self._store(target.window, rank, index, value)
            return
        assert broken is not None
        ok = np.asarray(self._expr(cond, env)).astype(bool)
        if ok.all():
            return
        line = s.span.line if s.span is not None else 0
        if ok.ndim < MAX_AXES:
            ok = ok.reshape((1,) * (MAX_AXES - ok.ndim) + ok.shape)
        loops = tuple(env.lengths) + (1,) * (MAX_AXES - len(env.lengths))
        full = np.broadcast_to(ok, loops)
        for where in zip(*np.nonzero(~full), strict=True):
            iters = [int(where[d]) for d in range(len(env.lengths))]
            broken.append((_interleave(path, iters), f"line {line} on rank {env.me}"))

    # -- expressions ---------------------------------------------------------------------
    def _sequence(self, expr: ir.Expr, env: _Env) -> tuple[int, ...]:
        if isinstance(expr, ir.Call):
            if expr.func == "ranks" and not expr.args:
                return tuple(range(self.nranks))
            if expr.func == "peers" and not expr.args:
                return tuple(r for r in range(self.nranks) if r != env.me)
            if expr.func == "range" and 1 <= len(expr.args) <= 3:
                args = [self._scalar(a, env) for a in expr.args]
                return tuple(range(*args))
        raise Unsupported("a sequence other than range/ranks/peers")

    def _scalar(self, expr: ir.Expr, env: _Env) -> int:
        value = np.asarray(self._expr(expr, env))
        if value.size != 1:
            raise Unsupported("a run-time value where one number is needed")
        return int(value.reshape(()))

    def _expr(self, e: ir.Expr, env: _Env) -> Any:
        if isinstance(e, ir.Const):
            if isinstance(e.value, float):
                raise Unsupported("float constant")
            return int(e.value)
        if isinstance(e, ir.Var):
            if e.name not in env.vars:
                raise Unsupported(f"name {e.name}")
            value = env.vars[e.name]
            return value[0] if isinstance(value, tuple) else value
        if isinstance(e, ir.ParamRef):
            if e.name not in env.params:
                raise Unsupported(f"parameter {e.name}")
            return int(env.params[e.name])
        if isinstance(e, ir.Me):
            return env.me
        if isinstance(e, ir.NRanks):
            return env.nranks
        if isinstance(e, ir.BinOp):
            a, b = self._expr(e.left, env), self._expr(e.right, env)
            return _binop(e.op, a, b)
        if isinstance(e, ir.UnaryOp):
            v = self._expr(e.operand, env)
            if e.op == "-":
                return -np.asarray(v, dtype=np.int64)
            if e.op == "not":
                return np.logical_not(v)
            raise Unsupported(f"unary {e.op}")
        if isinstance(e, ir.Compare):
            out: Any = True
            values = [self._expr(o, env) for o in e.operands]
            for op, a, b in zip(e.ops, values, values[1:], strict=False):
                out = np.logical_and(out, _compare(op, a, b))
            return out
        if isinstance(e, ir.BoolOp):
            values = [np.asarray(self._expr(v, env)).astype(bool) for v in e.values]
            if e.op == "and":
                return np.logical_and.reduce(np.broadcast_arrays(*values))
            if e.op == "or":
                return np.logical_or.reduce(np.broadcast_arrays(*values))
            raise Unsupported(f"bool {e.op}")
        if isinstance(e, ir.Load):
            rank = env.me if e.rank is None else self._scalar(e.rank, env)
            memory = self._values(e.window, rank)
            index = np.asarray(self._expr(e.index, env), dtype=np.int64)
            if index.size and (index.min() < 0 or index.max() >= memory.size):
                raise Unsupported("an index outside its memory")
            got = memory[index]
            return got.astype(np.int64) if got.dtype.kind in "iub" else got
        if isinstance(e, ir.GenExpr):
            if e.cond is not None or e.func not in ("sum", "max", "min"):
                raise Unsupported("generator")
            seq = self._sequence(e.iter, env)
            if not seq:
                raise Unsupported("an empty generator")
            depth = env.depth
            saved = env.vars.get(e.var)
            env.vars[e.var] = (_axis(seq, depth), depth)
            env.depth += 1
            try:
                elt = np.asarray(self._expr(e.elt, env))
            finally:
                env.depth -= 1
                _restore(env, e.var, saved)
            if elt.ndim < MAX_AXES:
                elt = elt.reshape((1,) * (MAX_AXES - elt.ndim) + elt.shape)
            full = np.broadcast_to(elt, (*elt.shape[:depth], len(seq), *elt.shape[depth + 1:]))
            if e.func == "sum":
                return full.astype(np.int64).sum(axis=depth, keepdims=True) \
                    if full.dtype.kind in "iub" else full.sum(axis=depth, keepdims=True)
            if e.func == "max":
                return np.max(full, axis=depth, keepdims=True)
            return np.min(full, axis=depth, keepdims=True)
        if isinstance(e, ir.Call) and e.func in ("max", "min", "abs"):
            args = [self._expr(a, env) for a in e.args]
            if e.func == "abs" and len(args) == 1:
                return np.abs(args[0])
            if len(args) >= 2:
                result = args[0]
                for a in args[1:]:
                    result = (np.maximum(result, a) if e.func == "max"
                              else np.minimum(result, a))
                return result
        raise Unsupported(type(e).__name__)


def _binop(op: str, a: Any, b: Any) -> Any:
    a, b = _int(a), _int(b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        if np.any(np.asarray(b) == 0):
            raise Unsupported("division by zero")
        return a // b
    if op == "%":
        if np.any(np.asarray(b) == 0):
            raise Unsupported("division by zero")
        return a % b
    raise Unsupported(f"operator {op}")


def _int(v: Any) -> Any:
    arr = np.asarray(v)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        raise Unsupported("float arithmetic")
    return arr


def _compare(op: str, a: Any, b: Any) -> Any:
    if op == "==":
        return np.equal(a, b)
    if op == "!=":
        return np.not_equal(a, b)
    if op == "<":
        return np.less(a, b)
    if op == "<=":
        return np.less_equal(a, b)
    if op == ">":
        return np.greater(a, b)
    if op == ">=":
        return np.greater_equal(a, b)
    raise Unsupported(f"comparison {op}")


def _reads(expr: object, window: str) -> bool:
    return any(isinstance(node, ir.Load) and node.window == window for node in nodes_of(expr))


def _interleave(path: tuple[Any, ...], iters: list[int]) -> tuple[int, ...]:
    """The interpreter's order of a failing iteration: (rank, stmt, i0, stmt, i1, ...)."""
    rank, positions = path[0], path[1:]
    out = [rank]
    for k, pos in enumerate(positions):
        out.append(pos)
        if k < len(iters):
            out.append(iters[k])
    return tuple(out)


def derive_and_check(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                     contents: Contents) -> list[str]:
    """`derive`, then `unsatisfied`, vectorised; Unsupported when the interpreter must."""
    v = Vector(protocol, nranks, params, contents)
    v.derive()
    return v.unsatisfied()


__all__ = ["Unsupported", "Vector", "derive_and_check"]
