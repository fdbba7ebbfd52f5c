"""Checking a uniform loop on three of its iterations (the small-count argument).

A `for v in range(N)` loop of a kernel or of `ensure` whose body is *uniform in `v`* is
instantiated on iterations `0`, `1` and `N - 1` only, and the findings of that
instance are the findings of the whole loop (codes and lines).  docs/checker.md,
"Loops checked on three iterations", states the theorem and why its conditions suffice;
this module checks the conditions, in two parts:

* *syntactic* (`eligible`, once per protocol): the body holds only assignments, data
  ops without synchronisation (`put`/`get` without `signal=`, `count=`, aggregation;
  `copy`, `reduce`), `ensure` comparisons and `if`s; `v` reaches region bounds and
  load indices only affinely, and no peer (but a run-time one, through its load index),
  queue, `if` condition, weight or inner loop bound; it holds no inner `for` or issuer
  block; no window it loads is written by an op, and no window it writes is loaded;
* *on the instance* (`Sampler.rejects`, after the sampled instantiation): every op and
  check of the body exists at the three iterations with the same shape, each region's
  footprint moves by one stride per iteration (start and end alike), two accesses of
  one memory of which one writes overlap only at the same iteration (over every pair of
  iterations of their loops, not only the three), an access outside the sampled loops
  overlaps none of a sampled access's iterations, and the `require` bounds of every
  element the body loads are the same at every iteration.

A loop that fails a condition is unrolled (the instantiation is redone with it excluded)
and the reason is kept for `ccogen lint --verbose` (`Instance.loops`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccogen.ir import nodes as ir
from ccogen.ir.instance import CheckInst, LoadInst, LoopNote, RegionInst
from ccogen.source import Span

MIN_TRIPS = 4  # a loop of fewer iterations is unrolled: sampling would save nothing
_NA = 2  # degree of an expression that is not affine in the loop variable


def samples(n: int) -> tuple[int, ...]:
    """The iterations a sampled loop of `n` iterations runs."""
    return (0, 1, n - 1)


# ----------------------------------------------------------------------------- syntax

_Deg = tuple[int, bool]  # (0 free of v, 1 affine in v, _NA other; reads run-time values)
_FREE: _Deg = (0, False)


class _Uniform:
    """Whether one loop body is uniform in its variable (the syntactic conditions)."""

    def __init__(self, var: str, loaded: frozenset[str], written: frozenset[str],
                 runtime: frozenset[str] = frozenset()) -> None:
        self.names: dict[str, _Deg] = {var: (1, False)}
        # names assigned outside the body from a `load` (`n = load(ntok[0])` before the
        # loop): free of the variable but run-time, so that a guard `t < n` is one
        self.runtime = runtime
        self.loaded_anywhere, self.written_anywhere = loaded, written
        self.reason = ""

    def fail(self, why: str, span: Span | None) -> None:
        if not self.reason:
            where = f" (line {span.line})" if span is not None else ""
            self.reason = why + where

    # -------------------------------------------------------------- expressions

    def deg(self, e: object) -> _Deg:
        if isinstance(e, ir.Const | ir.ParamRef | ir.Me | ir.NRanks | ir.Launch):
            return _FREE
        if isinstance(e, ir.Var):
            return self.names.get(e.name, (0, True) if e.name in self.runtime else _FREE)
        if isinstance(e, ir.BinOp):
            a, b = self.deg(e.left), self.deg(e.right)
            if e.op in ("+", "-"):
                return (max(a[0], b[0]), a[1] or b[1])
            if e.op == "*":
                if a == _FREE:
                    return b
                if b == _FREE:
                    return a
            return self._opaque(a, b)
        if isinstance(e, ir.UnaryOp):
            a = self.deg(e.operand)
            return a if e.op in ("-", "+") else self._opaque(a)
        if isinstance(e, ir.Compare):
            degs = [self.deg(o) for o in e.operands]
            if len(degs) == 2 and sorted(degs) == [(0, True), (1, False)]:
                # a guard `t < n` (n run-time): a run-time 0/1 at every iteration, as a
                # loop to a run-time count guards its ops (docs/checker.md)
                return (0, True)
            return self._opaque(*degs)
        if isinstance(e, ir.BoolOp):
            return self._opaque(*(self.deg(v) for v in e.values))
        if isinstance(e, ir.IfExp):
            return self._opaque(self.deg(e.cond), self.deg(e.then), self.deg(e.orelse))
        if isinstance(e, ir.Call):
            return self._opaque(*(self.deg(a) for a in e.args))
        if isinstance(e, ir.ListExpr):
            return self._opaque(*(self.deg(i) for i in e.items))
        if isinstance(e, ir.Load):
            return self._load(e)
        if isinstance(e, ir.GenExpr | ir.ListComp):
            return self._comprehension(e)
        return (_NA, False)

    @staticmethod
    def _opaque(*args: _Deg) -> _Deg:
        """An operation that is not linear: free of v only where every argument is."""
        if any(a[0] for a in args):
            return (_NA, False)
        return (0, any(a[1] for a in args))

    def _load(self, e: ir.Load) -> _Deg:
        index = self.deg(e.index)
        if index[0] == _NA or index[1]:
            self.fail("a `load` index is not affine in the loop variable", e.span)
        if e.rank is not None and self.deg(e.rank) != _FREE:
            self.fail("the rank of a `load` depends on the loop variable", e.span)
        if not e.init and e.window in self.written_anywhere:
            self.fail(f"it loads `{e.window}`, which an op writes", e.span)
        return (0, True)

    def _comprehension(self, e: ir.GenExpr | ir.ListComp) -> _Deg:
        if self.deg(e.iter) != _FREE:
            self.fail("an inner range depends on the loop variable", e.span)
        saved = self.names.get(e.var)
        self.names[e.var] = _FREE
        elt = self.region(e.elt, e.span) if isinstance(e.elt, ir.Region) else self.deg(e.elt)
        cond = self.deg(e.cond) if e.cond is not None else _FREE
        if cond[0]:
            self.fail("a comprehension's condition depends on the loop variable", e.span)
        if saved is None:
            self.names.pop(e.var)
        else:
            self.names[e.var] = saved
        return elt if isinstance(e, ir.ListComp) else self._opaque(elt, cond)

    def region(self, r: ir.Region, span: Span | None) -> _Deg:
        for bound in (r.start, r.stop):
            if bound is not None and self.deg(bound)[0] == _NA:
                self.fail("a region bound is not affine in the loop variable", r.span or span)
        if r.rank is not None and self.deg(r.rank) != _FREE:
            self.fail("a region's rank depends on the loop variable", r.span or span)
        return _FREE

    def free(self, e: ir.Expr | None, what: str, span: Span | None) -> None:
        if e is not None and self.deg(e) != _FREE:
            self.fail(f"{what} depends on the loop variable or a run-time value", span)

    def constant_weights(self, weights: tuple[ir.Expr, ...] | ir.ListComp | None,
                         span: Span | None) -> None:
        items: Iterable[object] = () if weights is None else (
            (weights,) if isinstance(weights, ir.ListComp) else weights)
        for w in items:
            if self.deg(w)[0]:
                self.fail("a weight depends on the loop variable", span)

    def written(self, r: ir.Region, span: Span | None) -> None:
        if r.window in self.loaded_anywhere:
            self.fail(f"it writes `{r.window}`, which a `load` reads", r.span or span)

    # -------------------------------------------------------------- statements

    def body(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                self.names[s.var] = self.deg(s.value)
            elif isinstance(s, ir.If):
                self.free(s.cond, "an `if` condition", s.span)
                self.body(s.body)
                self.body(s.orelse)
            elif isinstance(s, ir.Put | ir.Get):
                self._transfer(s)
            elif isinstance(s, ir.Copy):
                self.region(s.dst, s.span)
                self.region(s.src, s.span)
                self.written(s.dst, s.span)
            elif isinstance(s, ir.Reduce):
                self.region(s.dst, s.span)
                self.written(s.dst, s.span)
                self._regions(s.srcs, s.span)
                self.constant_weights(s.weights, s.span)
            elif isinstance(s, ir.Check):
                self.region(s.left, s.span)
                if isinstance(s.right, ir.Reduction):
                    self._regions(s.right.terms, s.span)
                    self.constant_weights(s.right.weights, s.span)
                else:
                    self.region(s.right, s.span)
            else:
                what = s.kind.value if isinstance(s, ir.IssuerBlock) else (
                    "for" if isinstance(s, ir.For) else ir.OP_KINDS[type(s)].value
                    if type(s) in ir.OP_KINDS else type(s).__name__.lower())
                self.fail(f"its body holds a `{what}`", s.span)
            if self.reason:
                return

    def _regions(self, regions: tuple[ir.Region, ...] | ir.ListComp, span: Span | None) -> None:
        if isinstance(regions, ir.ListComp):
            self._comprehension(regions)
        else:
            for r in regions:
                self.region(r, span)

    def _transfer(self, s: ir.Put | ir.Get) -> None:
        # a run-time peer read at an index affine in `v` is free of `v`: it instantiates
        # as the same candidate peers at every iteration, guarded by run-time lengths
        if self.deg(s.peer)[0]:
            self.fail("the peer depends on the loop variable", s.span)
        self.free(s.queue, "the queue", s.span)
        if s.signal is not ir.SignalKind.NONE or s.aggregate or (
                isinstance(s, ir.Put) and (s.count is not None or s.signal_per_copy)):
            self.fail("a transfer in its body signals, counts or aggregates", s.span)
        self.region(s.dst, s.span)
        self.region(s.src, s.span)
        self.written(s.dst, s.span)


def loop_free_degree(var: str, e: ir.Expr) -> str | None:
    """In a `require` loop over `var`: "element" for one element at an index affine in
    `var` (`topk[t * k + j]`), "static" for a value free of `var` and of run-time
    values, else None."""
    u = _Uniform(var, frozenset(), frozenset())
    if isinstance(e, ir.Load):
        index = u.deg(e.index)
        rank = u.deg(e.rank) if e.rank is not None else _FREE
        return "element" if index[0] <= 1 and not index[1] and rank == _FREE \
            and not u.reason else None
    return "static" if u.deg(e) == _FREE else None


def nodes_of(node: object) -> Iterable[object]:
    """`node` and every IR node, tuple or list inside it (spans excluded)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, tuple | list):
            stack.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, type):
            stack.extend(getattr(n, f) for f in n.__dataclass_fields__ if f != "span")


def eligible(protocol: ir.Protocol) -> dict[int, str]:
    """Every `for` of the kernels and of `ensure` by id: "" where its body is uniform in
    its variable (the syntactic conditions), else why not."""
    loaded: set[str] = set()
    written: set[str] = set()
    runtime: set[str] = set()  # names some assignment gives a value that reads a `load`
    for n in nodes_of((protocol.kernels, protocol.ensure)):
        if isinstance(n, ir.Load) and not n.init:
            loaded.add(n.window)
        elif isinstance(n, ir.Put | ir.Get | ir.Copy | ir.Reduce):
            written.add(n.dst.window)
        elif isinstance(n, ir.Assign) and any(isinstance(m, ir.Load)
                                              for m in nodes_of(n.value)):
            runtime.add(n.var)
    out: dict[int, str] = {}
    for n in nodes_of((protocol.kernels, protocol.ensure)):
        if isinstance(n, ir.For):
            u = _Uniform(n.var, frozenset(loaded), frozenset(written))
            u.free(n.iter, "its range", n.span)  # a run-time count (`range(n)`) as before
            u.runtime = frozenset(runtime)
            u.body(n.body)
            out[id(n)] = u.reason
    return out


# ----------------------------------------------------------------------------- sampler


@dataclass(frozen=True, slots=True)
class Where:
    """An op or check instance inside a sampled loop: the loop, the iteration, and
    the site (what is the same op at another iteration)."""

    loop: int  # id of the `For`
    v: int
    trips: int
    site: tuple[object, ...]
    strides: tuple[int, int] = (0, 0)  # of `dst` and `src` per iteration, once checked


@dataclass
class _Site:
    loop: int
    trips: int
    write: bool
    regions: dict[int, RegionInst] = field(default_factory=dict)  # iteration -> footprint


class Sampler:
    """Which loops run on three iterations, and the check of the conditions on what they
    instantiated (`rejects`)."""

    def __init__(self, protocol: ir.Protocol, excluded: Mapping[int, str] | None = None) -> None:
        self.reasons = eligible(protocol)
        self.excluded = dict(excluded or {})
        self.trips: dict[int, tuple[Span | None, int]] = {}  # loop id -> (span, trips)
        self.strides: dict[tuple[object, ...], int] = {}  # site -> bytes per iteration

    def indices(self, loop: ir.For, n: int) -> Sequence[int]:
        """The iterations of `loop` (of `n`) to instantiate."""
        if n >= MIN_TRIPS:
            self.trips.setdefault(id(loop), (loop.span, n))
        return samples(n) if self.sampled(loop, n) else range(n)

    def sampled(self, loop: ir.For, n: int) -> bool:
        return n >= MIN_TRIPS and not self.reasons.get(id(loop), "?") and \
            id(loop) not in self.excluded

    def with_strides(self, w: Where) -> Where:
        """`w` with the strides of its op's `dst` and `src` (after `rejects`)."""
        return Where(w.loop, w.v, w.trips, w.site, (self.strides.get((*w.site, "dst"), 0),
                                                    self.strides.get((*w.site, "src"), 0)))

    def sampled_any(self) -> bool:
        """Whether a loop met so far runs on three iterations."""
        return any(not self.reasons.get(k, "?") and k not in self.excluded
                   for k in self.trips)

    def notes(self) -> tuple[LoopNote, ...]:
        out = []
        for key, (span, n) in self.trips.items():
            why = self.excluded.get(key) or self.reasons.get(key, "")
            out.append(LoopNote(span, n, why))
        return tuple(sorted(out, key=lambda x: x.span.start if x.span else 0))

    # -------------------------------------------------------------- the conditions

    def rejects(self, accesses: Iterable[tuple[Where | None, RegionInst, bool]],
                loads: Iterable[tuple[Where, LoadInst]],
                bounds: Mapping[tuple[str, int, int], object] | None,
                widths: Mapping[str, int]) -> dict[int, str]:
        """The sampled loops whose instance breaks a condition, with why.

        `accesses`: every region an op or check touches (its `Where` if it is in a
        sampled loop, the footprint, whether it writes); `loads`: the loads of sampled
        loops; `bounds`: the `require` intervals of initial elements."""
        bad: dict[int, str] = {}
        sites: dict[tuple[object, ...], _Site] = {}
        outside: dict[tuple[str, int], list[tuple[RegionInst, bool]]] = {}
        for where, region, write in accesses:
            if where is None:
                outside.setdefault((region.window, region.rank), []).append((region, write))
                continue
            site = sites.setdefault(where.site, _Site(where.loop, where.trips, write))
            site.regions[where.v] = region
        affine: dict[tuple[str, int], list[tuple[_Site, int, int, int]]] = {}
        for key, site in sites.items():
            fit = _stride(site)
            if isinstance(fit, str):
                bad.setdefault(site.loop, fit)
                continue
            a, s0, e0 = fit
            self.strides[key] = a
            r = site.regions[0]
            affine.setdefault((r.window, r.rank), []).append((site, a, s0, e0))
        for memory, group in affine.items():
            self._pairs(group, outside.get(memory, ()), memory, bad)
        self._uniform_bounds(loads, bounds, widths, bad)
        return bad

    @staticmethod
    def _pairs(group: list[tuple[_Site, int, int, int]],
               outside: Iterable[tuple[RegionInst, bool]], memory: tuple[str, int],
               bad: dict[int, str]) -> None:
        name = f"`{memory[0]}@{memory[1]}`"
        for i, (x, ax, xs, xe) in enumerate(group):
            hx = _hull(ax, xs, xe, x.trips)
            for region, write in outside:
                if (write or x.write) and region.start < hx[1] and hx[0] < region.stop:
                    bad.setdefault(x.loop, f"an op outside it touches the bytes of {name} "
                                   "that its iterations touch")
            for y, ay, ys, ye in group[i:]:
                if not (x.write or y.write):
                    continue
                hy = _hull(ay, ys, ye, y.trips)
                if hx[1] <= hy[0] or hy[1] <= hx[0]:
                    continue
                if ax != ay or _cross(ax, xs, xe, ys, ye, x.trips, y.trips):
                    why = (f"two of its iterations touch the same bytes of {name}"
                           if x.loop == y.loop else
                           f"its iterations and another loop's overlap in {name} at "
                           "different iterations")
                    bad.setdefault(x.loop, why)
                    bad.setdefault(y.loop, why)

    @staticmethod
    def _uniform_bounds(loads: Iterable[tuple[Where, LoadInst]],
                        bounds: Mapping[tuple[str, int, int], object] | None,
                        widths: Mapping[str, int], bad: dict[int, str]) -> None:
        by_site: dict[tuple[object, ...], dict[int, LoadInst]] = {}
        trips: dict[tuple[object, ...], Where] = {}
        seen: dict[tuple[str, int, int, int, int], bool] = {}
        for where, load in loads:
            by_site.setdefault(where.site, {})[where.v] = load
            trips[where.site] = where
        for key, at in by_site.items():
            where = trips[key]
            if where.loop in bad:
                continue
            if set(at) != set(samples(where.trips)):
                bad.setdefault(where.loop, "its loads differ between iterations")
                continue
            r0 = at[0].region
            width = widths.get(r0.window, 1)
            i0 = r0.start // width
            step = at[1].region.start // width - i0
            if at[where.trips - 1].region.start // width != i0 + step * (where.trips - 1) or \
                    any(x.region.rank != r0.rank or x.region.window != r0.window
                        for x in at.values()):
                bad.setdefault(where.loop, "a load index is not affine in the loop variable")
                continue
            if bounds is not None and not _same_bounds(bounds, r0.window, r0.rank, i0, step,
                                                        where.trips, seen):
                bad.setdefault(where.loop, f"`require` bounds the elements of `{r0.window}` "
                               "its iterations load differently")


def _same_bounds(bounds: Mapping[tuple[str, int, int], object], window: str, rank: int,
                 start: int, step: int, count: int,
                 seen: dict[tuple[str, int, int, int, int], bool]) -> bool:
    """Whether elements `start + step * v` (`v < count`) all have the first's bounds."""
    key = (window, rank, start, step, count)
    got = seen.get(key)
    if got is None:
        uniform = getattr(bounds, "uniform", None)
        got = uniform(window, rank, start, step, count) if uniform is not None else None
        if got is None:
            first = bounds.get((window, rank, start))
            got = all(bounds.get((window, rank, start + step * v)) == first
                      for v in range(1, count))
        seen[key] = got
    return got


def sampled_accesses(pending: Iterable[Iterable[Any]], checks: Sequence[CheckInst],
                     wheres: Sequence[Where | None]
                     ) -> Iterator[tuple[Where | None, RegionInst, bool]]:
    """Every region the ops (`unroll.Pending`) and checks touch: (where in a sampled
    loop, footprint, whether it writes).  `init(...)` sides of checks read the caller's
    input, not memory: they touch nothing."""
    for ops in pending:
        for p in ops:
            w = p.where
            if p.dst is not None:
                yield _at(w, "dst"), p.dst, True
            if p.src is not None:
                yield _at(w, "src"), p.src, False
            for i, r in enumerate(p.srcs):
                yield _at(w, "srcs", i), r, False
    for c, w in zip(checks, wheres, strict=True):
        if not c.left_init:
            yield _at(w, "left"), c.left, False
        if c.right is not None and not c.right_init:
            yield _at(w, "right"), c.right, False
        if c.reduction is not None:
            for i, (r, init) in enumerate(zip(c.reduction.terms, c.reduction.init,
                                               strict=True)):
                if not init:
                    yield _at(w, "term", i), r, False


def sampled_loads(pending: Iterable[Iterable[Any]], checks: Sequence[CheckInst],
                  wheres: Sequence[Where | None]) -> Iterator[tuple[Where, LoadInst]]:
    """The loads of the ops and checks of sampled loops, each with its site.  An op's
    first `outer_loads` ran before its loop (a count loaded ahead of it, the loop's
    run-time bound): read once, at iteration 0, they are not the body's."""
    for ops in pending:
        for p in ops:
            if p.where is not None:
                for i, load in enumerate(p.loads[getattr(p, "outer_loads", 0):]):
                    yield Where(p.where.loop, p.where.v, p.where.trips,
                                (*p.where.site, "load", i)), load
    for c, w in zip(checks, wheres, strict=True):
        if w is not None:
            for i, load in enumerate(c.loads):
                yield Where(w.loop, w.v, w.trips, (*w.site, "load", i)), load


def _at(w: Where | None, *role: object) -> Where | None:
    return None if w is None else Where(w.loop, w.v, w.trips, (*w.site, *role))


def _stride(site: _Site) -> tuple[int, int, int] | str:
    """(stride, start, end) of a site whose footprint moves by one stride per iteration."""
    want = samples(site.trips)
    if set(site.regions) != set(want):
        return "its ops differ between iterations"
    r0, r1, rl = (site.regions[v] for v in want)
    a = r1.start - r0.start
    n = site.trips - 1
    if r1.stop - r0.stop != a or rl.start != r0.start + a * n or rl.stop != r0.stop + a * n:
        return "a region does not move by one stride per iteration"
    if any(r.window != r0.window or r.rank != r0.rank for r in (r1, rl)):
        return "a region's memory depends on the loop variable"
    return a, r0.start, r0.stop


def _hull(a: int, s: int, e: int, trips: int) -> tuple[int, int]:
    last = a * (trips - 1)
    return s + min(0, last), e + max(0, last)


def _cross(a: int, xs: int, xe: int, ys: int, ye: int, nx: int, ny: int) -> bool:
    """Whether `[a*v + xs, a*v + xe)` and `[a*w + ys, a*w + ye)` overlap for some
    `v != w`, `0 <= v < nx`, `0 <= w < ny`."""
    if a == 0:
        return xs < ye and ys < xe and (nx > 1 or ny > 1)
    if a < 0:  # mirror: v -> -v keeps the overlap pattern of d = w - v
        a, xs, xe, ys, ye = -a, -xe, -xs, -ye, -ys
    # overlap iff xs - ye < a*d < xe - ys, d = w - v in [-(nx - 1), ny - 1]
    lo = (xs - ye) // a + 1  # smallest d with a*d > xs - ye
    hi = -((ys - xe) // a) - 1  # largest d with a*d < xe - ys
    lo, hi = max(lo, -(nx - 1)), min(hi, ny - 1)
    return lo <= hi and not (lo == hi == 0)


__all__ = ["MIN_TRIPS", "Sampler", "Where", "eligible", "loop_free_degree", "nodes_of",
           "sampled_accesses",
           "sampled_loads",
           "samples"]
