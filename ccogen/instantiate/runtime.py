"""Run-time values at instantiation: `require`, what a `load` reads, and contents.

A protocol with run-time values is instantiated in one of two ways:

* *symbolic* (the checker, `ccogen lint`): `load(...)` gives an `Rt` (a linear form
  over initial elements, `ccogen.ir.runtime`), bounded by the intervals `require`
  states.  Regions with run-time bounds become their *footprint*: every byte the
  op may touch over the whole bounded range (`RegionInst.runtime` keeps the exact
  form).
* *concrete* (the simulator): `Contents` holds the initial bytes of every window
  and buffer on every rank (drawn to satisfy `require`); `load(...)` gives the
  element it reads, and the instance is an ordinary one.

What a load reads.  `init(x@p)[i]` and every element in `require` are initial
contents.  `load(x[i])` in a kernel and `x[i]` in `ensure` read the element when
the issuer (or the end of the launch) reaches it: the instantiation follows the
single `put`/`get`/`copy` with static regions that writes that element (`Writes`),
back to an initial element.  An element written by no op is its initial value; one
written by several ops (or by run-time regions) cannot be followed, and a bound
that uses it is unbounded (E004).  The checker does not yet prove that the load is
ordered after that write (docs/checker.md); the simulator compares the final
contents with `ensure`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from ccogen.diag import error
from ccogen.instantiate.declarations import Memory
from ccogen.instantiate.evaluating import Evaluating, forget_assigned
from ccogen.instantiate.findings import Findings, from_eval
from ccogen.instantiate.sampling import nodes_of
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.evaluate import Compiler, Env, EvalError
from ccogen.ir.instance import RegionInst
from ccogen.ir.runtime import Atom, Rt, cell_atom

Cell = tuple[str, int, int]  # (window, rank, element)
Interval = tuple[int | None, int | None]


def uses_runtime(protocol: ir.Protocol) -> bool:
    """Whether `protocol` reads run-time values (`load`, `require`, elements in `ensure`)."""
    if protocol.require:
        return True
    return any(isinstance(node, ir.Load) or (isinstance(node, ir.Region) and node.single)
               for node in nodes_of((protocol.kernels, protocol.ensure)))


def runtime_inputs(protocol: ir.Protocol) -> frozenset[str]:
    """The windows and buffers whose elements are run-time values: every one a `load`
    (or an element in `require` or `ensure`) reads.  The shape of a concrete instance
    follows their contents; the rest is data."""
    return frozenset(node.window for node in nodes_of((protocol.require, protocol.kernels,
                                                       protocol.ensure))
                     if isinstance(node, ir.Load))


def read_after_write(protocol: ir.Protocol) -> bool:
    """Whether a kernel `load` or an `ensure` element reads a window or buffer that an op
    writes (then instantiation follows the writes, `Writes`)."""
    loaded: set[str] = set()
    written: set[str] = set()
    for node in nodes_of((protocol.kernels, protocol.ensure)):
        if isinstance(node, ir.Load) and not node.init:
            loaded.add(node.window)
        if isinstance(node, ir.Put | ir.Get | ir.Copy | ir.Reduce):
            written.add(node.dst.window)
    return bool(loaded & written)


# ----------------------------------------------------------------------------- contents


@dataclass
class Contents:
    """The initial bytes of every window and buffer on every rank, `(rank, name)`."""

    arrays: dict[tuple[int, str], np.ndarray]
    dtypes: dict[str, DType]
    label: str = ""
    attempt: int = 0  # which try of the draw `label` (ccogen.sim.runtime.draw)
    # (rank, name) of `arrays` drawn in part: only the regions a rank reads of them
    partial: set[tuple[int, str]] = field(default_factory=set)

    def element(self, window: str, rank: int, index: int) -> int | float:
        from ccogen.ir.values import decode

        dtype = self.dtypes.get(window, DType.U8)
        raw = self.arrays[(rank, window)][index * dtype.size:(index + 1) * dtype.size]
        value = decode(raw, dtype)[0]
        return float(value) if dtype.is_float else int(value)

    def set_many(self, window: str, rank: int, indices: Sequence[int] | np.ndarray,
                 values: Sequence[int | float] | np.ndarray) -> None:
        """`set` of every (index, value) pair, in order (a later pair of the same index
        wins), in one store."""
        from ccogen.ir.values import encode, storage

        dtype = self.dtypes.get(window, DType.U8)
        raw: np.ndarray = encode(np.array(values, dtype=np.float32 if dtype.is_float
                                          else np.int64), dtype).view(storage(dtype))
        self.arrays[(rank, window)].view(storage(dtype))[np.array(indices, dtype=np.int64)] = raw

    def set(self, window: str, rank: int, index: int, value: int | float) -> None:
        from ccogen.ir.values import encode

        dtype = self.dtypes.get(window, DType.U8)
        raw = encode(np.array([value], dtype=np.float32 if dtype.is_float else np.int64),
                     dtype)
        self.arrays[(rank, window)][index * dtype.size:(index + 1) * dtype.size] = raw


# ----------------------------------------------------------------------------- writes


@dataclass
class Writes:
    """The static-region writes of an instance: `(window, rank)` -> (dst, src) pairs."""

    by_window: dict[tuple[str, int], list[tuple[RegionInst, RegionInst]]] = field(
        default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)

    def add(self, dst: RegionInst | None, src: RegionInst | None) -> None:
        if dst is None or src is None or dst.runtime is not None or src.runtime is not None:
            return
        self.by_window.setdefault((dst.window, dst.rank), []).append((dst, src))

    def add_unknown(self, dst: RegionInst | None) -> None:
        """A write whose source cannot be followed (a `reduce`, run-time regions)."""
        if dst is None:
            return
        self.by_window.setdefault((dst.window, dst.rank), []).append((dst, dst))

    def resolve(self, cell: Cell, depth: int = 0) -> Cell | None:
        """The initial element `cell` holds once written (None: cannot be followed)."""
        window, rank, index = cell
        width = self.widths.get(window, 1)
        at = index * width
        hits = [(d, s) for d, s in self.by_window.get((window, rank), [])
                if d.start < at + width and at < d.stop]
        if not hits:
            return cell
        if len(hits) > 1 or depth > 16:
            return None
        dst, src = hits[0]
        if src is dst or src.size != dst.size or self.widths.get(src.window, 1) != width:
            return None
        offset = src.start + (at - dst.start)
        if offset % width:
            return None
        return self.resolve((src.window, src.rank, offset // width), depth + 1)


# ----------------------------------------------------------------------------- bounds


@dataclass(frozen=True, slots=True)
class Family:
    """`require` bounding elements `start + step * m` (`m < count`) of `window` on `rank`
    alike: one `for` loop of comparisons with static numbers (`0 <= topk[i] < nranks`),
    kept as one entry instead of one per element."""

    window: str
    rank: int
    start: int
    step: int
    count: int
    lo: int | None
    hi: int | None

    def covers(self, index: int) -> bool:
        m, r = divmod(index - self.start, self.step) if self.step else (0, index - self.start)
        return r == 0 and 0 <= m < self.count


class Bounds(dict[Cell, Interval]):
    """The interval `require` gives each initial element it names: cells narrowed one by
    one (the dict itself), `Family`s of cells narrowed alike, and narrowings deferred
    until an element's bound is asked for (`defer`: `counts[p] == sum(... for t in
    range(tokens))` costs a sum over every token, and a MoE protocol never loads
    `counts`).  `get` intersects all three; `materialize` gives every cell."""

    def __init__(self) -> None:
        super().__init__()
        self.families: dict[tuple[str, int], list[Family]] = {}
        self.deferred: dict[Cell, list[Callable[[], None]]] = {}

    def get(self, cell: Cell, default: Any = None) -> Any:  # type: ignore[override]
        if self.deferred and cell in self.deferred:
            for narrow in self.deferred.pop(cell):  # each narrows `self[cell]`
                narrow()
        lo, hi = super().get(cell, (None, None))
        found = cell in self
        for f in self.families.get((cell[0], cell[1]), ()):
            if f.covers(cell[2]):
                found = True
                lo = f.lo if lo is None else lo if f.lo is None else max(lo, f.lo)
                hi = f.hi if hi is None else hi if f.hi is None else min(hi, f.hi)
        return (lo, hi) if found else default

    def uniform(self, window: str, rank: int, start: int, step: int, count: int) -> bool | None:
        """Whether elements `start + step * v` (`v < count`) have one interval: decided
        from the families when no element of them is bounded one by one (None: ask each)."""
        if self.deferred or any(c[0] == window and c[1] == rank for c in self):
            return None
        last = start + step * (count - 1)
        fams = self.families.get((window, rank), ())
        for f in fams:
            all_in = f.covers(start) and f.covers(last) and (
                (f.step != 0 and step % f.step == 0) or count == 1 or step == 0)
            if not all_in:
                return None  # it might hold some of them: ask each
        return True

    def add_family(self, family: Family) -> None:
        self.families.setdefault((family.window, family.rank), []).append(family)

    def defer(self, cell: Cell, narrow: Callable[[], None]) -> None:
        self.deferred.setdefault(cell, []).append(narrow)

    def cells(self) -> set[Cell]:
        """Every cell some `require` names."""
        out = set(self) | set(self.deferred)
        for fams in self.families.values():
            for f in fams:
                out.update((f.window, f.rank, f.start + f.step * m) for m in range(f.count))
        return out

    def materialize(self) -> dict[Cell, Interval]:
        """A plain dict of every cell's interval (drawing contents): `get` of each, in
        order.  A deferred cell's narrowing may change others, so the cells between two
        deferred ones are asked together, each (window, rank) of them with numpy over its
        families (`family_intervals`; `get` of the cells narrowed one by one)."""
        out: dict[Cell, Interval] = {}
        run: list[Cell] = []
        for cell in sorted(self.cells()):
            if cell in self.deferred:
                self._plain(run, out)
                run = []
                out[cell] = self.get(cell, (None, None))
            else:
                run.append(cell)
        self._plain(run, out)
        return out

    def _plain(self, cells: list[Cell], out: dict[Cell, Interval]) -> None:
        """`out[c] = self.get(c, (None, None))` for cells none of which is deferred."""
        groups: dict[tuple[str, int], list[int]] = {}
        for window, rank, index in cells:
            groups.setdefault((window, rank), []).append(index)
        for (window, rank), indices in groups.items():
            if len(indices) < 64 or not self.families.get((window, rank)):
                for i in indices:
                    out[(window, rank, i)] = self.get((window, rank, i), (None, None))
                continue
            lo, hi, has_lo, has_hi, found = self.family_intervals(
                window, rank, np.asarray(indices, dtype=np.int64))
            for i, a, b, la, hb, f in zip(indices, lo.tolist(), hi.tolist(), has_lo.tolist(),
                                          has_hi.tolist(), found.tolist(), strict=True):
                if dict.__contains__(self, (window, rank, i)):
                    out[(window, rank, i)] = self.get((window, rank, i), (None, None))
                else:
                    out[(window, rank, i)] = (a if la else None, b if hb else None) if f \
                        else (None, None)

    def family_intervals(self, window: str, rank: int, index: np.ndarray
                         ) -> tuple[np.ndarray, ...]:
        """The families' intersection for each element `index` of `window` on `rank`, as
        `get` forms it from them: (lo, hi, has_lo, has_hi, found) arrays."""
        lo = np.zeros(len(index), np.int64)
        hi = np.zeros(len(index), np.int64)
        has_lo = np.zeros(len(index), bool)
        has_hi = np.zeros(len(index), bool)
        found = np.zeros(len(index), bool)
        for f in self.families.get((window, rank), ()):
            if f.step:
                m, r = np.divmod(index - f.start, f.step)
            else:
                m, r = np.zeros(len(index), np.int64), index - f.start
            covers = (r == 0) & (m >= 0) & (m < f.count)
            found |= covers
            if f.lo is not None:
                lo = np.where(covers & has_lo, np.maximum(lo, f.lo), np.where(covers, f.lo, lo))
                has_lo |= covers
            if f.hi is not None:
                hi = np.where(covers & has_hi, np.minimum(hi, f.hi), np.where(covers, f.hi, hi))
                has_hi |= covers
        return lo, hi, has_lo, has_hi, found


# ----------------------------------------------------------------------------- loaders


class SymbolicLoader:
    """`load(...)` as an `Rt` atom of the initial element it reads, with its bounds.

    `memo`: the bounds are final, so a load of one element is one `Rt` whatever the op
    (an `Rt` is never changed in place): a MoE instance loads each routing entry once
    per rank, warp and reduce weight, ~10^6 times at 8 ranks.  Off while `require` is
    read (the bounds grow)."""

    def __init__(self, bounds: Mapping[Cell, Interval], writes: Writes | None,
                 memo: bool = True) -> None:
        self.bounds = bounds
        self.writes = writes
        self.memo: dict[tuple[str, bool, int, int], Rt] | None = {} if memo else None

    def __call__(self, load: ir.Load, rank: int, index: int) -> Rt:
        if self.memo is None:
            return self._load(load, rank, index)
        key = (load.window, load.init, rank, index)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = self._load(load, rank, index)
        return out

    def _load(self, load: ir.Load, rank: int, index: int) -> Rt:
        cell: Cell | None = (load.window, rank, index)
        if not load.init and self.writes is not None:
            cell = self.writes.resolve((load.window, rank, index))
        if cell is None:
            atom = Atom(("unknown", load.window, rank, index), None, None,
                        f"{load.window}@{rank}[{index}] (written by several ops)")
            return Rt({atom: 1}, 0)
        lo, hi = self.bounds.get(cell, (None, None))
        return Rt({cell_atom(*cell, lo, hi, read=(load.window, rank, index)): 1}, 0)


class ConcreteLoader:
    """`load(...)` as the value `contents` hold for the element it reads."""

    def __init__(self, contents: Contents, writes: Writes | None,
                 symbolic: SymbolicLoader | None = None) -> None:
        self.contents = contents
        self.writes = writes
        # the same loads as `Rt`s with their `require` bounds: the capacity of a loop that
        # runs to a run-time count (`Unroller._runtime_range`) is the same in every draw
        self.symbolic = symbolic

    def __call__(self, load: ir.Load, rank: int, index: int) -> int | float:
        cell: Cell | None = (load.window, rank, index)
        if not load.init and self.writes is not None:
            cell = self.writes.resolve((load.window, rank, index))
        if cell is None:
            raise EvalError(f"`{load.window}@{rank}[{index}]` is written by several ops: "
                            "which value a load reads is not known", load.span,
                            "cannot follow this element", code="E004",
                            help="load elements that one `put`/`copy` writes, or the "
                                 "caller's inputs")
        return self.contents.element(*cell)


# ----------------------------------------------------------------------------- require


@dataclass
class Precondition:
    """One evaluated `require` statement on `rank`: `holds` is True/False when decided
    statically, else None (checked on drawn contents)."""

    rank: int
    stmt: ir.Require
    holds: bool | None


class Preconditions(Evaluating):
    """Evaluates `require` on every rank: bounds of initial elements (symbolic), or
    whether drawn contents satisfy it (concrete)."""

    def __init__(self, nranks: int, params: Mapping[str, int],
                 memories: Mapping[str, Memory | None], compiler: Compiler,
                 findings: Findings, loader: Callable[[ir.Load, int, int], Any]) -> None:
        super().__init__(nranks, params, memories, compiler, findings)
        self.loader = loader
        self.bounds: Bounds = (loader.bounds if isinstance(loader, SymbolicLoader)  # type: ignore[assignment]
                               else Bounds())
        self.conditions: list[Precondition] = []
        self._deferrable: dict[int, bool] = {}  # per comparison (`_deferrable`)
        self.derive = False  # concrete: `x[i] == EXPR` sets the element (drawing contents)
        self._sums: Any = None  # `bounds_vector.SumBounds`, once a bound sums over a range

    def run(self, stmts: Sequence[ir.Stmt]) -> None:
        for rank in range(self.nranks):
            self._bind_rank(rank)
            self._body(stmts)

    def _body(self, stmts: Sequence[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Require):
                self._require(s)
            elif isinstance(s, ir.Assign):
                self._assign(s)
            elif isinstance(s, ir.For):
                seq = self._seq(s.iter, "`for`", s.span)
                if seq is None:
                    continue
                saved = self._enter(s, len(seq))
                if self._concrete() or not isinstance(self.bounds, Bounds) or \
                        not self._family(s, seq):
                    for value in seq:
                        self.env.vars[s.var] = value
                        self._body(s.body)
                self._leave(s.var, saved)
            elif isinstance(s, ir.If):
                cond = self._truth(s.cond, s.span)
                if cond is not None:
                    self._body(s.body if cond else s.orelse)
            else:
                self._error("E002", "`require` holds conditions, `for`, `if` and names",
                            s.span, "not a precondition")
        forget_assigned(self.env, stmts)

    def _require(self, s: ir.Require) -> None:
        try:
            if not self._concrete():  # symbolic: bounds only, the rest holds on drawn contents
                for part in _conjuncts(s.cond):
                    self._bound(part)
                return
            if self.derive and isinstance(s.cond, ir.Compare) and _defines(s.cond):
                self._define(s.cond)
            value = self.compiler.value(s.cond)(self.env)
        except EvalError as exc:
            if exc.span is None:
                exc.span = s.span
            self._eval_failed(exc, s.span)
            return
        holds = None if isinstance(value, Rt) else bool(value)
        self.conditions.append(Precondition(self.rank, s, holds))
        if holds is False:
            self._error("E004", "this `require` never holds", s.span,
                        "false for every contents" if not self._concrete() else
                        "false for these contents",
                        help="correct the condition")

    def _define(self, cond: ir.Compare) -> None:
        """`x[i] == EXPR`: make the element hold EXPR's value (a derived input)."""
        load = cond.operands[0]
        assert isinstance(load, ir.Load) and isinstance(self.loader, ConcreteLoader)
        index = self.compiler.integer(load.index, "an index")(self.env)
        rank = self.rank if load.rank is None else \
            self.compiler.integer(load.rank, "a rank")(self.env)
        value = self.compiler.value(cond.operands[1])(self.env)
        self.loader.contents.set(load.window, rank, index, value)  # type: ignore[arg-type]

    def _concrete(self) -> bool:
        return isinstance(self.loader, ConcreteLoader)

    def _family(self, loop: ir.For, seq: tuple[int, ...]) -> bool:
        """A loop of comparisons of one element with static numbers each (`0 <= topk[i]
        < nranks` over every i) bounds its elements as `Family`s, one per comparison:
        whether it was one (else the caller runs it element by element)."""
        shape = self._family_shape(loop)
        if shape is None or len(seq) < 2 or any(
                seq[i] - seq[i - 1] != seq[1] - seq[0] for i in range(2, len(seq))):
            return False
        at: list[list[object]] = []
        try:
            for value in seq[:2]:
                self.env.vars[loop.var] = value
                at.append([self.compiler.value(o)(self.env) for c in shape for o in c.operands])
        except EvalError:  # element by element, which reports it at its place
            return False
        cells = [[_cell(v) for v in row] for row in at]
        families = []
        k = 0
        for c in shape:
            n = len(c.operands)
            for i, op in enumerate(c.ops):
                pairs = ((op, k + i, k + i + 1),
                         ({"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op],
                          k + i + 1, k + i))
                for o, x, y in pairs:
                    cell, other = cells[0][x], at[0][y]
                    if cell is None or not isinstance(other, int) or isinstance(other, bool):
                        continue
                    nxt = cells[1][x]
                    assert nxt is not None
                    lo, hi = _narrowed(o, (None, None), other)
                    families.append(Family(cell[0], cell[1], cell[2], nxt[2] - cell[2], len(seq),
                                           lo, hi))
            k += n
        for f in families:
            self.bounds.add_family(f)
        return True

    def _family_shape(self, loop: ir.For) -> list[ir.Compare] | None:
        """The comparisons of a loop that `_family` can keep as families, or None."""
        from ccogen.instantiate.sampling import loop_free_degree

        out: list[ir.Compare] = []
        for stmt in loop.body:
            if not isinstance(stmt, ir.Require):
                return None
            for part in _conjuncts(stmt.cond):
                if not isinstance(part, ir.Compare) or any(o not in _FLIP for o in part.ops):
                    return None
                kinds = [loop_free_degree(loop.var, o) for o in part.operands]
                if None in kinds or any(a == b == "element" for a, b in pairwise(kinds)):
                    return None
                out.append(part)
        return out

    def _bound(self, cond: ir.Expr) -> None:
        """Narrow the interval of an element named alone in a comparison with numbers."""
        if not isinstance(cond, ir.Compare):
            self.conditions.append(Precondition(self.rank, ir.Require(cond=cond,
                                                                      span=cond.span), None))
            return
        deferrable = self._deferrable.get(id(cond))
        if deferrable is None:
            deferrable = self._deferrable[id(cond)] = _deferrable(cond)
        if deferrable and isinstance(self.bounds, Bounds):  # `counts[p] == sum(...)`: when
            # `counts[p]`'s bound is asked
            element = next(o for o in cond.operands if isinstance(o, ir.Load))
            cell = _cell(self.compiler.value(element)(self.env))
            if cell is not None:
                env = Env(self.nranks, self.rank, self.params)
                env.vars, env.loader = dict(self.env.vars), self.env.loader
                env.launch, env.moduli = self.env.launch, self.env.moduli
                self.bounds.defer(cell, lambda: self._bound_later(cond, env))
                return
        self._bound_in(cond, self.env)

    def _bound_later(self, cond: ir.Compare, env: Env) -> None:
        """A deferred `_bound_in`: what fails is reported then, at the `require` line."""
        try:
            self._bound_in(cond, env)
        except EvalError as exc:
            self.findings.add(from_eval(exc, env, cond.span), env.me)

    def _bound_in(self, cond: ir.Compare, env: Env) -> None:
        values = [self._operand(o, env) for o in cond.operands]
        for op, a, b in zip(cond.ops, values, values[1:], strict=False):
            self._narrow(op, a, b)
            flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}.get(op)
            if flipped is not None:
                self._narrow(flipped, b, a)

    def _operand(self, e: ir.Expr, env: Env) -> Any:
        """An operand of a bounding comparison: a `sum(... for t in range(n))` over the
        whole range at once where `bounds_vector` can (the same interval), else term by
        term."""
        if VECTOR_SUMS and isinstance(e, ir.GenExpr) and isinstance(self.bounds, Bounds):
            if self._sums is None:
                from ccogen.instantiate.bounds_vector import SumBounds

                self._sums = SumBounds(self.compiler, self.bounds)
            out = self._sums.sum_bound(e, env)
            if out is not None:
                return out
        return self.compiler.value(e)(env)

    def _narrow(self, op: str, a: object, b: object) -> None:
        """`a op b` with `a` one element and `b` a number or a bounded run-time value
        (`slot[t + 1] == slot[t] + hit`): bound the element."""
        if isinstance(b, Rt):
            top, bottom = b.hi, b.lo
            if op in ("<=", "<", "==") and top is not None:
                self._narrow("<=" if op == "==" else op, a, top)
            if op in (">=", ">", "==") and bottom is not None:
                self._narrow(">=" if op == "==" else op, a, bottom)
            return
        if not isinstance(a, Rt) or not isinstance(b, int) or isinstance(b, bool):
            return
        if a.const != 0 or len(a.terms) != 1:
            return
        atom, k = next(iter(a.terms.items()))
        cell = atom.cell
        if cell is None or k != 1:
            return
        self.bounds[cell] = _narrowed(op, self.bounds.get(cell, (None, None)), b)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}

# `require` bounds' sums over a range evaluated at once (`bounds_vector`); False: term by
# term, the reference (tests/test_bounds_vector.py compares the two; the environment's
# CCOGEN_BOUNDS_TERMWISE=1 sets it, to measure or check a run against the reference)
VECTOR_SUMS = os.environ.get("CCOGEN_BOUNDS_TERMWISE", "") != "1"


def _narrowed(op: str, interval: Interval, b: int) -> Interval:
    """`interval` narrowed by `x op b`."""
    lo, hi = interval
    if op in ("<=", "<", "=="):
        top = b - 1 if op == "<" else b
        hi = top if hi is None else min(hi, top)
    if op in (">=", ">", "=="):
        bottom = b + 1 if op == ">" else b
        lo = bottom if lo is None else max(lo, bottom)
    return lo, hi


def _cell(value: object) -> Cell | None:
    """The element a value is alone (`x[i]` loaded), else None."""
    if not isinstance(value, Rt) or value.const != 0 or len(value.terms) != 1:
        return None
    atom, k = next(iter(value.terms.items()))
    return atom.cell if k == 1 else None


def _deferrable(cond: ir.Compare) -> bool:
    """`x[i] OP EXPR` where EXPR sums or takes the extreme over a range (its cost grows
    with the range): the narrowing of `x[i]` waits until its bound is asked for."""
    return len(cond.operands) == 2 and any(isinstance(o, ir.Load) for o in cond.operands) \
        and any(not isinstance(o, ir.Load) and _has_gen(o) for o in cond.operands)


def _has_gen(e: object) -> bool:
    from ccogen.instantiate.sampling import nodes_of

    return any(isinstance(n, ir.GenExpr) for n in nodes_of(e))


def _defines(cond: ir.Expr) -> bool:
    return (isinstance(cond, ir.Compare) and cond.ops == ("==",)
            and isinstance(cond.operands[0], ir.Load))


def _conjuncts(cond: ir.Expr) -> list[ir.Expr]:
    if isinstance(cond, ir.BoolOp) and cond.op == "and":
        return [c for v in cond.values for c in _conjuncts(v)]
    return [cond]


def precondition_bounds(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                        memories: Mapping[str, Memory | None], compiler: Compiler,
                        findings: Findings) -> Bounds:
    """Evaluate `require` symbolically: the interval of every element it bounds."""
    bounds = Bounds()
    loader = SymbolicLoader(bounds, None, memo=False)  # bounds grow as `require` is read
    pre = Preconditions(nranks, params, memories, compiler, findings, loader)
    pre.run(protocol.require)
    # a deferred narrowing of an element that something else bounds too may contradict it
    for cell in [c for c in bounds.deferred if dict.__contains__(bounds, c) or any(
            f.covers(c[2]) for f in bounds.families.get((c[0], c[1]), ()))]:
        bounds.get(cell)
    narrowed = [(c, bounds.get(c)) for c in list(dict.keys(bounds))]
    for fams in bounds.families.values():  # an empty family: each of its elements
        for f in fams:
            if f.lo is not None and f.hi is not None and f.lo > f.hi:
                cells = ((f.window, f.rank, f.start + f.step * m) for m in range(f.count))
                narrowed.extend((c, bounds.get(c)) for c in cells
                                if not dict.__contains__(bounds, c))
    for cell, (lo, hi) in narrowed:
        if lo is not None and hi is not None and lo > hi:
            findings.add(error("E004", f"`require` leaves no value for "
                               f"`{cell[0]}@{cell[1]}[{cell[2]}]`", protocol.span,
                               f"between {lo} and {hi}", help="correct the bounds"), cell[1])
    return bounds


def derive(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
           memories: Mapping[str, Memory | None], contents: Contents) -> None:
    """Set every element that a `require` of the form `x[i] == EXPR` defines, in order
    (`slot[t + 1] == slot[t] + hit`: inputs that follow from others)."""
    loader = ConcreteLoader(contents, None)
    pre = Preconditions(nranks, params, memories, Compiler(), Findings(nranks), loader)
    pre.derive = True
    pre.run(protocol.require)


def unsatisfied(protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                memories: Mapping[str, Memory | None], contents: Contents) -> list[str]:
    """The `require` statements `contents` violate, as `line L on rank r` strings."""
    findings = Findings(nranks)
    loader = ConcreteLoader(contents, None)
    pre = Preconditions(nranks, params, memories, Compiler(), findings, loader)
    pre.run(protocol.require)
    out = []
    for c in pre.conditions:
        if c.holds is False:
            line = c.stmt.span.line if c.stmt.span is not None else 0
            out.append(f"line {line} on rank {c.rank}")
    return out


__all__ = ["Cell", "ConcreteLoader", "Contents", "Precondition", "Preconditions",
           "SymbolicLoader", "Writes", "derive", "precondition_bounds", "runtime_inputs",
           "unsatisfied", "uses_runtime"]
