"""`ensure` on drawn contents, evaluated with numpy over whole loops (every launch's).

`ccogen run` needs, every launch, the `ensure` comparisons of the launch's contents
(`ccogen.rt.prepare.checks_for`).  The interpreter (`instantiate.checks.ensure_checks`)
evaluates each iteration and each term in Python: at 4096 tokens x top-8 that is 10^5
loads per rank and launch, seconds (docs/performance.md, "host preparation at the real
shapes").  Here, as for `require` (`instantiate.vector`), a loop variable is an array
axis: every bound of a region, every rank and every weight of a comparison is one array
over the loops around it, the comparisons of a statement are its elements, and the
statements are put in the interpreter's order (rank, then position and iteration, as
the loops nest) with one sort.  `coalesce` (ccogen/rt/prepare.py) is then done on those
arrays too: the empty `==` comparisons dropped, the runs that continue each other merged;
only the merged comparisons become `CheckSpec`s.

The subset: `for` over range/ranks/peers with scalar bounds, names assigned in the block,
comparisons of two regions or of a region with `sum`/`max`/`min` of a list or
comprehension of regions (weights a list or comprehension), expressions as in
`instantiate.vector` plus loads of `init(...)` contents on a rank that may vary with a
loop and float products and sums (sums in the interpreter's order).  Anything else, and
anything the interpreter would report (a region outside its memory, sides of other
lengths or types, a rank outside the team, a limit), raises `Unsupported`: the caller
takes the interpreter, which reports it at its place.  tests/runtime/test_prepare.py
compares both on every library protocol and draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ccogen.instantiate.runtime import Contents
from ccogen.instantiate.vector import MAX_AXES, Unsupported, Vector, _Env, _for_axis, _restore
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.values import decode, storage
from ccogen.rt.data import CheckSpec, ReductionSpec, RegionSpec


@dataclass
class _Side:
    """One region of a comparison statement over its loops: flat arrays (one element per
    comparison; `(n, terms)` for the terms of a reduction) of byte bounds and ranks."""

    window: str
    init: bool
    rank: np.ndarray
    start: np.ndarray
    stop: np.ndarray


@dataclass
class _Stmt:
    """The comparisons of one `ensure` statement on one rank, in loop order."""

    check: ir.Check
    me: int
    keys: np.ndarray           # (n, width): the interpreter's order
    left: _Side
    right: _Side | None        # a region on the right
    terms: list[_Side]         # a reduction's terms (each over the n comparisons)
    weights: np.ndarray | None  # (n, terms)
    dtype: str = ""            # the left side's element type (a reduction's)
    location: str = ""
    text: str = ""

    def __post_init__(self) -> None:
        self.location = _location(self.check)
        self.text = self.check.span.text if self.check.span is not None else ""


class EnsureVector(Vector):
    """`ensure` of one protocol on given contents (None: a protocol without loads)."""

    def __init__(self, protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                 contents: Contents | None, memories: Mapping[str, Any],
                 max_checks: int, max_iterations: int) -> None:
        super().__init__(protocol, nranks, params, contents or Contents({}, {}))
        self.has_contents = contents is not None
        self.memories = memories
        self.max_checks, self.max_iterations = max_checks, max_iterations
        self._stacks: dict[str, np.ndarray] = {}
        self._stmts: list[_Stmt] = []
        self._checks = 0
        self._iterations = 0

    # -- statements ------------------------------------------------------------------------
    def specs(self, ranks: Sequence[int]) -> list[CheckSpec]:
        """The coalesced comparisons of `ranks`, in the interpreter's order."""
        for order, rank in enumerate(ranks):
            env = _Env(self.nranks, rank, self.params)
            self._ensure(self.protocol.ensure, env, (order,))
        return _coalesced(self._stmts)

    def _ensure(self, stmts: Sequence[ir.Stmt], env: _Env, path: tuple[int, ...]) -> None:
        assigned: list[str] = []
        for pos, s in enumerate(stmts):
            if isinstance(s, ir.Check):
                self._check(s, env, (*path, pos))
            elif isinstance(s, ir.Assign):
                env.vars[s.var] = self._expr(s.value, env)
                assigned.append(s.var)
            elif isinstance(s, ir.For):
                seq = self._sequence(s.iter, env)
                self._iterations += len(seq) * int(np.prod(env.lengths, dtype=np.int64))
                if self._iterations > self.max_iterations:
                    raise Unsupported("the iteration limit")
                with _for_axis(env, s.var, seq):
                    self._ensure(s.body, env, (*path, pos))
            else:
                raise Unsupported(type(s).__name__)
        for name in assigned:
            env.vars.pop(name, None)

    def _check(self, s: ir.Check, env: _Env, path: tuple[int, ...]) -> None:
        loops = tuple(env.lengths)
        n = int(np.prod(loops, dtype=np.int64))
        self._checks += n
        if self._checks > self.max_checks:
            raise Unsupported("the op-instance limit")
        if s.op not in ("==", "!="):
            raise Unsupported(f"comparison {s.op}")
        left = self._side(s.left, env, loops)
        dtype = self._memory(s.left.window).dtype
        if isinstance(s.right, ir.Region):
            right = self._side(s.right, env, loops)
            if self._memory(s.right.window).dtype is not dtype:
                raise Unsupported("sides of other element types")
            _same_length(left, right)
            self._stmts.append(_Stmt(s, env.me, _keys(path, loops), left, right, [], None))
            return
        terms = self._terms(s.right.terms, env, loops)
        for t in terms:
            if self._memory(t.window).dtype is not dtype:
                raise Unsupported("terms of another element type")
            _same_length(left, t)
        if not terms:
            raise Unsupported("a reduction of no terms")
        weights = None
        if s.right.weights is not None:
            weights = self._weights(s.right.weights, env, loops)
            if weights.shape[1] != len(terms):
                raise Unsupported("weights and terms of other counts")
            if weights.dtype.kind == "f" and not dtype.is_float:
                raise Unsupported("float weights of integer elements")
        self._stmts.append(_Stmt(s, env.me, _keys(path, loops), left, None, terms, weights,
                                dtype.value))

    def _memory(self, window: str) -> Any:
        memory = self.memories.get(window)
        if memory is None:
            raise Unsupported(f"no memory {window}")
        return memory

    def _side(self, region: ir.Region, env: _Env, loops: tuple[int, ...]) -> _Side:
        memory = self._memory(region.window)
        size, width = memory.count, memory.dtype.size
        start = _flat(0 if region.start is None else self._expr(region.start, env), loops)
        if region.single:
            stop = start + 1
        else:
            stop = _flat(size if region.stop is None else self._expr(region.stop, env), loops)
        if region.rank is None:
            rank = np.full(start.shape, env.me, dtype=np.int64)
        else:
            rank = _flat(self._expr(region.rank, env), loops)
            if rank.size and (rank.min() < 0 or rank.max() >= self.nranks):
                raise Unsupported("a rank outside the team")
        if start.dtype.kind not in "iub" or stop.dtype.kind not in "iub":
            raise Unsupported("a float bound")
        bad = (start < 0) | (stop > size) | (start > stop)
        if not self.has_contents:
            bad |= start == stop
        if bad.any():
            raise Unsupported("a region outside its memory")
        return _Side(region.window, region.init, rank.astype(np.int64),
                     start.astype(np.int64) * width, stop.astype(np.int64) * width)

    def _terms(self, items: tuple[ir.Region, ...] | ir.ListComp, env: _Env,
               loops: tuple[int, ...]) -> list[_Side]:
        if not isinstance(items, ir.ListComp):
            return [self._side(r, env, loops) for r in items]
        if items.cond is not None or not isinstance(items.elt, ir.Region):
            raise Unsupported("a comprehension with a condition")
        seq = self._sequence(items.iter, env)
        out = []
        saved = env.vars.get(items.var)
        for value in seq:  # one side per term: few (the ranks)
            env.vars[items.var] = value
            out.append(self._side(items.elt, env, loops))
        _restore(env, items.var, saved)
        return out

    def _weights(self, items: tuple[ir.Expr, ...] | ir.ListComp, env: _Env,
                 loops: tuple[int, ...]) -> np.ndarray:
        if not isinstance(items, ir.ListComp):
            exprs: list[tuple[ir.Expr, Any]] = [(w, None) for w in items]
            var = None
        else:
            if items.cond is not None or isinstance(items.elt, ir.Region):
                raise Unsupported("a comprehension with a condition")
            var = items.var
            exprs = [(items.elt, v) for v in self._sequence(items.iter, env)]
        saved = env.vars.get(var) if var is not None else None
        columns = []
        for expr, value in exprs:
            if var is not None:
                env.vars[var] = value
            if isinstance(expr, ir.Const) and isinstance(expr.value, float):
                columns.append(np.full(int(np.prod(loops, dtype=np.int64)), expr.value))
            else:
                got = _flat(self._expr(expr, env), loops)
                if got.dtype.kind == "b":
                    got = got.astype(np.int64)
                columns.append(got)
        if var is not None:
            _restore(env, var, saved)
        if not columns:
            return np.zeros((int(np.prod(loops, dtype=np.int64)), 0), dtype=np.int64)
        return np.stack(columns, axis=1)

    # -- expressions -----------------------------------------------------------------------
    def _expr(self, e: ir.Expr, env: _Env) -> Any:
        if isinstance(e, ir.Load):
            return self._load(e, env)
        if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*"):
            a, b = self._expr(e.left, env), self._expr(e.right, env)
            if np.asarray(a).dtype.kind == "f" or np.asarray(b).dtype.kind == "f":
                a, b = _number(a), _number(b)
                return a + b if e.op == "+" else a - b if e.op == "-" else a * b
        if isinstance(e, ir.GenExpr) and e.func == "sum" and e.cond is None:
            return self._sum(e, env)
        return super()._expr(e, env)

    def _sum(self, e: ir.GenExpr, env: _Env) -> Any:
        """`sum(... for v in seq)` added term by term from 0, as the interpreter does (a
        float sum's rounding depends on the order)."""
        seq = self._sequence(e.iter, env)
        depth = env.depth
        if depth >= MAX_AXES:
            raise Unsupported("too many nested loops")
        saved = env.vars.get(e.var)
        total: Any = 0
        for value in seq:
            env.vars[e.var] = value
            term = np.asarray(self._expr(e.elt, env))
            if term.dtype.kind == "b":
                term = term.astype(np.int64)
            elif term.dtype.kind == "f":
                total = np.asarray(total, dtype=np.float64)
            total = total + term
        _restore(env, e.var, saved)
        return total

    def _load(self, e: ir.Load, env: _Env) -> Any:
        if not e.init or not self.has_contents:
            raise Unsupported("a load of final contents")
        index = np.asarray(self._expr(e.index, env))
        if index.dtype.kind not in "iub":
            raise Unsupported("a float index")
        index = index.astype(np.int64)
        if e.rank is None:
            memory = self._element_values(e.window, env.me)
            if index.size and (index.min() < 0 or index.max() >= memory.size):
                raise Unsupported("an index outside its memory")
            return _widened(memory[index])
        rank = np.asarray(self._expr(e.rank, env))
        if rank.dtype.kind not in "iub":
            raise Unsupported("a float rank")
        rank = rank.astype(np.int64)
        if rank.size and (rank.min() < 0 or rank.max() >= self.nranks):
            raise Unsupported("a rank outside the team")
        if rank.ndim == 0:
            memory = self._element_values(e.window, int(rank))
            if index.size and (index.min() < 0 or index.max() >= memory.size):
                raise Unsupported("an index outside its memory")
            return _widened(memory[index])
        stack = self._stack(e.window)
        if index.size and (index.min() < 0 or index.max() >= stack.shape[1]):
            raise Unsupported("an index outside its memory")
        rank, index = np.broadcast_arrays(rank, index)
        return _widened(stack[rank, index])

    def _element_values(self, window: str, rank: int) -> np.ndarray:
        key = (rank, window)
        raw = self.contents.arrays.get(key)
        if raw is None:
            raise Unsupported(f"no contents for {window}@{rank}")
        dtype = self.contents.dtypes.get(window, DType.U8)
        return decode(raw, dtype) if dtype.is_float else raw.view(storage(dtype))

    def _stack(self, window: str) -> np.ndarray:
        """Every rank's elements of `window`, one row per rank (a load whose rank is a
        loop variable)."""
        if window not in self._stacks:
            self._stacks[window] = np.stack([self._element_values(window, r)
                                             for r in range(self.nranks)])
        return self._stacks[window]


def _widened(values: np.ndarray) -> np.ndarray:
    """Loaded elements as the interpreter's numbers: int64 or float64 (exact)."""
    return values.astype(np.float64 if values.dtype.kind == "f" else np.int64)


def _number(v: Any) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    return arr


def _flat(value: Any, loops: tuple[int, ...]) -> np.ndarray:
    """`value` (a scalar, or an array over the axes of the loops) as one element per
    iteration of `loops`, in their order (the outermost loop slowest)."""
    arr = np.asarray(value)
    if arr.ndim not in (0, MAX_AXES):
        raise Unsupported("an unexpected shape")
    if arr.ndim == MAX_AXES and any(d != 1 for d in arr.shape[len(loops):]):
        raise Unsupported("a value over a loop that has ended")
    if arr.ndim:
        arr = arr.reshape(arr.shape[:len(loops)])
    try:
        return np.broadcast_to(arr, loops).reshape(-1)
    except ValueError:
        raise Unsupported("a value over other loops") from None


def _keys(path: tuple[int, ...], loops: tuple[int, ...]) -> np.ndarray:
    """(n, 2 * len(loops) + 2): rank order, then each loop's position and iteration, then
    the statement's position, per comparison (the interpreter's order, compared
    lexicographically)."""
    n = int(np.prod(loops, dtype=np.int64))
    columns = [np.full(n, path[0], dtype=np.int64)]
    iters = np.unravel_index(np.arange(n), loops) if loops else ()
    for depth, pos in enumerate(path[1:]):
        columns.append(np.full(n, pos, dtype=np.int64))
        if depth < len(loops):
            columns.append(np.asarray(iters[depth], dtype=np.int64))
    return np.stack(columns, axis=1)


def _same_length(a: _Side, b: _Side) -> None:
    if not np.array_equal(a.stop - a.start, b.stop - b.start):
        raise Unsupported("sides of other lengths")


def _coalesced(stmts: list[_Stmt]) -> list[CheckSpec]:
    """Every statement's comparisons in the interpreter's order, coalesced as
    `ccogen.rt.prepare.coalesce` does (empty `==` dropped, continuing runs merged)."""
    if not stmts:
        return []
    width = max(s.keys.shape[1] for s in stmts)
    keys = np.concatenate([np.pad(s.keys, ((0, 0), (0, width - s.keys.shape[1])),
                                  constant_values=-1) for s in stmts])
    which = np.concatenate([np.full(len(s.keys), i, dtype=np.int64)
                            for i, s in enumerate(stmts)])
    element = np.concatenate([np.arange(len(s.keys), dtype=np.int64) for s in stmts])
    order = np.lexsort(keys.T[::-1])
    which, element = which[order], element[order]
    # the columns `coalesce` compares, in that order (-1: a reduction, never merged)
    windows: dict[tuple[str, bool], int] = {}
    locations: dict[str, int] = {}

    def column(get: Any) -> np.ndarray:
        return np.concatenate([get(s) for s in stmts])[order]

    def plain(s: _Stmt) -> bool:
        return s.right is not None and s.check.op == "=="

    def wid(side: _Side | None) -> int:
        return -1 if side is None else windows.setdefault((side.window, side.init),
                                                          len(windows))

    n_of = [len(s.keys) for s in stmts]
    is_plain = column(lambda s: np.full(len(s.keys), plain(s)))
    me = column(lambda s: np.full(len(s.keys), s.me))
    loc = column(lambda s: np.full(len(s.keys), locations.setdefault(s.location,
                                                                     len(locations))))
    lw = column(lambda s: np.full(len(s.keys), wid(s.left)))
    rw = column(lambda s: np.full(len(s.keys), wid(s.right)))
    zero = [np.zeros(n, dtype=np.int64) for n in n_of]
    lr = column(lambda s: s.left.rank)
    ls = column(lambda s: s.left.start)
    le = column(lambda s: s.left.stop)
    rr = np.concatenate([s.right.rank if s.right is not None else z
                         for s, z in zip(stmts, zero, strict=True)])[order]
    rs = np.concatenate([s.right.start if s.right is not None else z
                         for s, z in zip(stmts, zero, strict=True)])[order]
    re = np.concatenate([s.right.stop if s.right is not None else z
                         for s, z in zip(stmts, zero, strict=True)])[order]
    keep = ~(is_plain & (ls == le) & (rs == re))
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return []
    p, m, lo, w1, w2 = is_plain[idx], me[idx], loc[idx], lw[idx], rw[idx]
    cont = np.zeros(idx.size, dtype=bool)
    cont[1:] = (p[1:] & p[:-1] & (m[1:] == m[:-1]) & (lo[1:] == lo[:-1])
                & (w1[1:] == w1[:-1]) & (lr[idx][1:] == lr[idx][:-1])
                & (le[idx][:-1] == ls[idx][1:])
                & (w2[1:] == w2[:-1]) & (rr[idx][1:] == rr[idx][:-1])
                & (re[idx][:-1] == rs[idx][1:]))
    firsts = np.flatnonzero(~cont)
    lasts = np.append(firsts[1:] - 1, idx.size - 1)
    out = []
    for f, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
        i, j = int(idx[f]), int(idx[last])
        s, e = stmts[int(which[i])], int(element[i])
        stop_left = int(le[j])
        out.append(_spec(s, e, stop_left, int(re[j]) if s.right is not None else 0))
    return out


def _location(c: ir.Check) -> str:
    return f"{c.span.path}:{c.span.line}" if c.span is not None else "<ensure>"


def _region(side: _Side, e: int, stop: int | None = None) -> RegionSpec:
    return RegionSpec(side.window, int(side.start[e]), int(side.stop[e]) if stop is None
                      else stop, int(side.rank[e]), side.init)


def _spec(s: _Stmt, e: int, left_stop: int, right_stop: int) -> CheckSpec:
    c, text = s.check, s.text
    left = _region(s.left, e, left_stop)
    if s.right is not None:
        right = _region(s.right, e, right_stop)
        return CheckSpec(s.me, c.op, left, right, s.location,
                         text or f"{left} {c.op} {right}")
    assert isinstance(c.right, ir.Reduction)
    terms = tuple(_region(t, e) for t in s.terms)
    weights: tuple[int | float, ...] = () if s.weights is None else tuple(s.weights[e].tolist())
    spec = ReductionSpec(c.right.op.value, terms, weights, s.dtype)
    if not text:
        text = f"{left} {c.op} {c.right.op.value}({', '.join(map(str, terms))})"
    return CheckSpec(s.me, c.op, left, None, s.location, text, spec)


__all__ = ["EnsureVector", "Unsupported"]
