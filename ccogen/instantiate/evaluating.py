"""Evaluation on one rank at a time, reporting into the findings: expressions, loops
and their limits, team ranks and regions.  The base of the kernel unroller and of
`ensure`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.instantiate.declarations import Memory
from ccogen.instantiate.findings import Findings
from ccogen.instantiate.sampling import Sampler
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.evaluate import Compiler, Env, EvalError, IntFn, Value, expr_text
from ccogen.ir.instance import LoadInst, RegionInst
from ccogen.ir.runtime import Rt
from ccogen.limits import raise_hint
from ccogen.source import Span

_UNSET = object()
_UNKNOWN = object()


class Overflow(Exception):
    def __init__(self, diagnostic: Diagnostic, rank: int) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic
        self.rank = rank


class Evaluating:
    """Evaluation on one rank at a time, reporting into the findings."""

    records_loads = False  # the kernels' and `ensure`'s loads are read events (`take_loads`)

    def __init__(self, nranks: int, params: Mapping[str, int],
                 memories: Mapping[str, Memory | None], compiler: Compiler,
                 findings: Findings) -> None:
        self.nranks = nranks
        self.params = params
        self.memories = memories
        self.compiler = compiler
        self.findings = findings
        self.rank = 0
        self.env = Env(nranks, 0, params)
        self.failed = False
        self.total = 0
        self.iterations = 0
        self._loops: list[ir.Stmt | ir.ListComp] = []
        self._bounds: dict[int, tuple[IntFn | None, IntFn | None, ir.Region]] = {}
        # per region or assignment: (it reads `load(...)` itself, the names it mentions)
        self._reads: dict[int, tuple[bool, frozenset[str]]] = {}
        self.runtime_names: set[str] = set()  # names assigned a value that reads `load`
        # what `load(...)` reads (`ccogen.instantiate.runtime`); None: no run-time values
        self.loader: Callable[[ir.Load, int, int], Any] | None = None
        self.unchecked = 0  # `ensure` lines with run-time bounds (symbolic instances)
        self.empty_ok = False  # concrete run-time instances: a run-time length may be 0
        self.runtime_weights = False  # a weight was a run-time value (symbolic: 1.0 kept)
        # the loads evaluated since the last `take_loads()`, and one `LoadInst` per
        # (load, rank, element) (a MoE instance evaluates ~10^5 loads per rank)
        self._loaded: list[LoadInst] = []
        self._load_insts: dict[tuple[int, int, int], LoadInst] = {}
        # `launch % K` (language reference section 8): the launch this instance is of, and
        # every K met (the instance's period is their least common multiple)
        self.launch = 0
        self.moduli: set[int] = set()
        self.env.launch, self.env.moduli = self.launch, self.moduli
        # loops checked on three iterations (`sampling`): which, and where we are in one
        self.sampler: Sampler | None = None
        self.where: tuple[int, int, int] | None = None  # (id of the loop, iteration, trips)

    def _iterations(self, loop: ir.For, n: int) -> Sequence[int]:
        """The iterations of `loop` (of `n`) to instantiate: all, or three of a loop
        uniform in its variable (`sampling.Sampler`)."""
        return range(n) if self.sampler is None else self.sampler.indices(loop, n)

    def _in_sample(self, loop: ir.For, n: int) -> bool:
        return self.sampler is not None and self.sampler.sampled(loop, n)

    def _bind_rank(self, rank: int) -> None:
        self.rank = rank
        self.env = Env(self.nranks, rank, self.params)
        self.env.loader = self.loader if self.loader is None or not self.records_loads else \
            self._load_recorded
        self.env.launch, self.env.moduli = self.launch, self.moduli

    def _load_recorded(self, load: ir.Load, rank: int, index: int) -> Any:
        """What `load` reads (`self.loader`), recording the read of memory it is."""
        assert self.loader is not None
        value = self.loader(load, rank, index)
        key = (id(load), rank, index)
        inst = self._load_insts.get(key)
        if inst is None:
            memory = self.memories.get(load.window)
            width = memory.dtype.size if memory is not None else 1
            inst = self._load_insts[key] = LoadInst(
                RegionInst(load.window, index * width, (index + 1) * width, rank), load.span,
                value if isinstance(value, int | float) else None, load.init)
        self._loaded.append(inst)
        return value

    def take_loads(self) -> list[LoadInst]:
        """The loads recorded since the last call, each element once (in order)."""
        loaded, self._loaded = self._loaded, []
        return loaded if len(loaded) < 2 else unique_loads(loaded)

    def _error(self, code: str, message: str, span: Span | None, label: str = "", *,
               secondary: Iterable[tuple[Span | None, str]] = (), help: str | None = None) -> None:
        self.failed = True
        self.findings.add(error(code, message, span, label, secondary=secondary,
                                notes=(self.env.bindings(),), help=help), self.rank)

    def _eval_failed(self, exc: EvalError, fallback: Span | None) -> None:
        self._error(exc.code, exc.message, exc.span or fallback, exc.label, help=exc.help)

    def _int(self, expr: ir.Expr, what: str, fallback: Span | None, *,
             runtime: bool = False) -> int | None:
        """`expr` as a static int (`runtime`: a run-time value `Rt` may be returned)."""
        try:
            value = self.compiler.integer(expr, what)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, expr.span or fallback)
            return None
        if isinstance(value, float):
            self._error("E004", f"{what} must be an integer, not a float", expr.span or fallback,
                        f"`{expr_text(expr)}` is {value!r}")
            return None
        if isinstance(value, Rt) and not runtime:
            self._error("E004", f"{what} must be known at instantiation, not a run-time value",
                        expr.span or fallback, f"`{expr_text(expr)}` is read on the device",
                        help="run-time values may size regions and set `expected=` of "
                             "`wait_count`; peers, queues and whether an op exists stay "
                             "static")
            return None
        return value

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

    def _enter(self, loop: ir.For | ir.IssuerBlock | ir.ListComp, n: int) -> object:
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

    def _overflow(self, node: ir.Stmt | ir.ListComp, what: str, name: str) -> Overflow:
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
        memory = self.memories.get(region.window, _UNKNOWN)
        if memory is None or memory is _UNKNOWN:
            self._no_window(region, None if memory is None else -1, fallback)
            return None
        assert isinstance(memory, Memory)
        size = memory.count
        bounds = self._bounds.get(id(region))
        if bounds is None:
            bounds = self._bound_fns(region)
            self._bounds[id(region)] = bounds
        try:
            start = 0 if bounds[0] is None else bounds[0](self.env)
            if region.single:
                stop = start + 1
            else:
                stop = size if bounds[1] is None else bounds[1](self.env)
        except EvalError as exc:
            self._eval_failed(exc, region.span or fallback)
            return None
        if isinstance(start, float) or isinstance(stop, float):
            self._error("E004", "a region bound must be an integer, not a float",
                        region.span or fallback, "a float element read here")
            return None
        if isinstance(start, Rt) or isinstance(stop, Rt):
            return self._runtime_region(region, rank, start, stop, memory,
                                        region.span or fallback)
        if 0 <= start < stop <= size or (0 <= start == stop <= size and (
                self.empty_ok or self._runtime_bounds(region))):
            width = memory.dtype.size
            return RegionInst(region.window, start * width, stop * width, rank)
        self._bad_bounds(region, rank, start, stop, size, region.span or fallback,
                         memory.dtype)
        return None

    def _runtime_bounds(self, region: ir.Region) -> bool:
        """The bounds depend on run-time contents, even where this instance's `require`
        pins them to one value (a run-time length may be 0: language v2 §3)."""
        loads, names = self._reads_of(region, region.start, region.stop)
        return loads or not names.isdisjoint(self.runtime_names)

    def _reads_of(self, node: ir.Region | ir.Assign, *exprs: ir.Expr | None
                  ) -> tuple[bool, frozenset[str]]:
        """`_reads(*exprs)`, walked once per node (evaluated per rank and iteration)."""
        reads = self._reads.get(id(node))
        if reads is None:
            reads = _reads(*exprs)
            self._reads[id(node)] = reads
        return reads

    def _runtime_region(self, region: ir.Region, rank: int, start: int | Rt, stop: int | Rt,
                        memory: Memory, span: Span | None) -> RegionInst | None:
        """A region with run-time bounds: its footprint over the bounded range."""
        for value in (start, stop):
            if isinstance(value, Rt) and not value.bounded:
                self._unbounded(value, span)
                return None
        lo = start if isinstance(start, int) else start.lo
        hi = stop if isinstance(stop, int) else stop.hi
        assert lo is not None and hi is not None
        width, size = memory.dtype.size, memory.count
        if lo < 0 or hi > size:
            what = "buffer" if memory.buffer else "window"
            unit = "bytes" if memory.dtype is DType.U8 else "elements"
            where = (f"may start {-lo} {unit} before" if lo < 0
                     else f"may end {hi - size} {unit} past the end of")
            name = region.window if region.rank is None else f"{region.window}@{rank}"
            self._error("E003", f"`require` does not keep this region of `{name}` inside "
                        f"{what} `{region.window}` of {size} {unit}", span,
                        f"{where} it (`{_show(start)}` to `{_show(stop)}`)",
                        help="tighten `require` so that every value keeps the region inside "
                             f"0 to {size}, or size the {what} for the largest value")
            return None
        length = stop - start
        shortest = length if isinstance(length, int) else length.lo
        if shortest is None or shortest < 0:
            self._error("E003", "a region with run-time bounds may end before it starts",
                        span, f"`{_show(start)}` to `{_show(stop)}`",
                        help="a run-time length may be 0, never negative: bound it with "
                             "`require`")
            return None
        return RegionInst(region.window, lo * width, max(lo, hi) * width, rank,
                          runtime=(start * width, stop * width))

    def _unbounded(self, value: Rt, span: Span | None, role: str = "a region bound",
                   bound: str = "<= LIMIT") -> None:
        """E004: `value` used as `role` with no `require` bound (`bound`: the hint's)."""
        atoms = value.unbounded_atoms()
        cells = [a for a in atoms if a.cell is not None]
        what = ", ".join(f"`{a.text}`" for a in atoms[:3])
        if cells:
            window, _, index = cells[0].cell  # type: ignore[misc]
            hint = (f"bound it in `require:` (over the caller's initial contents), e.g.\n"
                    f"    require:\n        0 <= {window}[{index}] {bound}")
        else:
            hint = ("load elements that the caller fills, or that exactly one `put`/`copy` "
                    "writes from them, and bound those in `require:`")
        self._error("E004", f"a run-time value with no bound is used as {role} "
                    f"(`{value.text()}`)", span, f"{what} is not bounded", help=hint)

    def _dtype(self, name: str) -> DType:
        memory = self.memories.get(name)
        return memory.dtype if memory is not None else DType.U8

    def _is_buffer(self, name: str) -> bool:
        memory = self.memories.get(name)
        return memory is not None and memory.buffer

    def _expand(self, items: tuple[Any, ...] | ir.ListComp,
                each: Callable[[Any], Any]) -> list[Any] | None:
        """`each` of every item of a list, or of every element a comprehension makes
        (None when something failed: reported)."""
        if not isinstance(items, ir.ListComp):
            out = [each(item) for item in items]
            return None if self.failed else out
        comp = items
        seq = self._seq(comp.iter, "a comprehension", comp.span)
        if seq is None:
            return None
        saved = self._enter(comp, len(seq))
        out = []
        for value in seq:
            self.env.vars[comp.var] = value
            if comp.cond is not None:
                keep = self._truth(comp.cond, comp.span)
                if not keep:
                    continue
            out.append(each(comp.elt))
        self._leave(comp.var, saved)
        return None if self.failed else out

    def _number(self, e: ir.Expr, what: str, fallback: Span | None) -> int | float | None:
        """A weight: an integer expression, a float literal, or a run-time value (a
        symbolic instance keeps 1.0 in its place: the simulator uses the real ones)."""
        if isinstance(e, ir.Const) and isinstance(e.value, float):
            return e.value
        try:
            value = self.compiler.value(e)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, e.span or fallback)
            return None
        if isinstance(value, Rt):
            self.runtime_weights = True
            return 1.0
        if isinstance(value, float):
            return value
        return self._int(e, what, fallback)

    def _weight_value(self, e: ir.Expr) -> object:
        """A weight as evaluated (an `Rt` where it is a run-time value), for code
        generation; `_number` has reported what is wrong with it."""
        if isinstance(e, ir.Const) and isinstance(e.value, float):
            return e.value
        try:
            return self.compiler.value(e)(self.env)
        except EvalError:
            return 0

    def _weights_fit(self, weights: Sequence[int | float], dtype: DType,
                     span: Span | None) -> bool:
        """A float weight needs a float element type (integer sums stay exact)."""
        if dtype.is_float or not any(isinstance(w, float) for w in weights):
            return True
        self._error("E003", f"a float weight for {dtype} elements", span,
                    "integer elements take integer weights",
                    help="use integer weights, or a float element type")
        return False

    def _assign(self, s: ir.Assign) -> None:
        try:
            value: Value = self.compiler.value(s.value)(self.env)
        except EvalError as exc:
            self._eval_failed(exc, s.span)
            return
        self.env.vars[s.var] = value
        loads, names = self._reads_of(s, s.value)
        if loads or not names.isdisjoint(self.runtime_names):
            self.runtime_names.add(s.var)
        else:
            self.runtime_names.discard(s.var)

    def _bound_fns(self, region: ir.Region) -> tuple[IntFn | None, IntFn | None, ir.Region]:
        def fn(e: ir.Expr | None) -> IntFn | None:
            return None if e is None else self.compiler.integer(e, "a region bound")
        return fn(region.start), fn(region.stop), region

    def _no_window(self, region: ir.Region, size: int | None, fallback: Span | None) -> None:
        # `size` None: the window's size failed (reported with it); -1: not declared
        if size is not None:
            self._error("E002", f"unknown window `{region.window}`", region.span or fallback,
                        "not a declared window")
        self.failed = True  # a window whose size failed was reported with the window

    def _bad_bounds(self, region: ir.Region, rank: int, start: int, stop: int, size: int,
                    span: Span | None, dtype: DType = DType.U8) -> None:
        text = _region_text(region, rank, start, stop)
        unit = "bytes" if dtype is DType.U8 else "elements"
        if start >= stop:
            label = "starts where it ends" if start == stop else f"ends at {stop}, before {start}"
            self._error("E003", f"region `{text}` is empty", span, label,
                        help=f"a region `w[a:b]` holds {unit} a to b-1 and needs a < b")
            return
        label = (f"starts {-start} {unit} before the window" if start < 0
                 else f"ends {stop - size} {unit} past the end of the window")
        what = "buffer" if self._is_buffer(region.window) else "window"
        of = f"{size} bytes" if dtype is DType.U8 else f"{size} {dtype} elements"
        self._error("E003", f"region `{text}` is outside {what} `{region.window}` of {of}",
                    span, label, help=f"keep bounds within 0 and {size}")

    def _same_dtype(self, a: ir.Region, b: ir.Region, span: Span | None, *,
                    u8_views: bool) -> None:
        """Both regions hold the same element type (a `u8` side may view any type)."""
        da, db = self._dtype(a.window), self._dtype(b.window)
        if da is db or (u8_views and DType.U8 in (da, db)):
            return
        if u8_views and da.is_float and db.is_float:
            help = (f"`copy` and transfers move bytes unchanged; to convert {db} to {da}, "
                    f"`reduce(dst={a.window}, srcs=[{b.window}])` (widened to f32, rounded "
                    "once to `dst`'s type)")
        elif u8_views:
            help = ("move data between regions of one element type, or view one side as "
                    "bytes through a `u8` window")
        else:
            help = ("combine regions of one element type (float types may mix: f16, bf16 "
                    "and f32 sources are widened to f32, the result rounded once to `dst`'s "
                    "type)")
        self._error("E003", f"`{a.window}` holds {da} and `{b.window}` holds {db}",
                    a.span or span, f"{da} elements", secondary=[(b.span, f"{db} elements")],
                    help=help)

    def _converts(self, dst: ir.Region, src: ir.Region) -> bool:
        """A `reduce` source of another float type than `dst` (converted, language v2)."""
        dd, ds = self._dtype(dst.window), self._dtype(src.window)
        return dd is not ds and dd.is_float and ds.is_float

    def _same_count(self, a: RegionInst | None, b: RegionInst | None, ra: ir.Region,
                    rb: ir.Region, span: Span | None) -> None:
        """A converting `reduce`'s `dst` and source hold as many elements (static lengths)."""
        if a is None or b is None:
            return
        da, db = self._dtype(ra.window), self._dtype(rb.window)
        if a.runtime is not None or b.runtime is not None:
            self._error("E003", f"`reduce` converts {db} to {da} over a run-time length",
                        rb.span or span, "a run-time length",
                        help="give a converting `reduce` static bounds, or sources of "
                             "`dst`'s element type")
            return
        na, nb = a.size // da.size, b.size // db.size
        if na == nb:
            return
        self._error("E003", f"`dst` and a source differ in length: {na} {da} and {nb} {db} "
                    "elements", ra.span or span, f"`dst` is {na} elements",
                    secondary=[(rb.span, f"the source is {nb} elements")],
                    help="give both regions the same number of elements")

    def _local_only(self, region: ir.Region, op: ir.Op, role: str) -> None:
        """E010: a local `buffer` named where the peer's memory is meant."""
        if not self._is_buffer(region.window):
            return
        self._error("E010", f"buffer `{region.window}` is local: it cannot be {role}",
                    region.span or op.span, "a buffer exists only on its own rank",
                    help=f"declare `{region.window}` as a `window` (symmetric: every rank has "
                         "one the peers can reach)")

    def _same_length(self, what: str, a: RegionInst | None, b: RegionInst | None,
                     spans: tuple[Span | None, Span | None], names: tuple[str, str]) -> None:
        if a is None or b is None:
            return
        if a.runtime is not None or b.runtime is not None:
            self._same_runtime_length(what, a, b, spans, names)
            return
        if a.size == b.size:
            return
        self._error("E003", f"{what} differ in length: {a.size} and {b.size} bytes", spans[0],
                    f"{names[0]} is {a.size} bytes", secondary=[(spans[1],
                    f"{names[1]} is {b.size} bytes")], help="give both regions the same length")


    def _same_runtime_length(self, what: str, a: RegionInst, b: RegionInst,
                             spans: tuple[Span | None, Span | None],
                             names: tuple[str, str]) -> None:
        la, lb = _length(a), _length(b)
        if (isinstance(la, Rt) and la.same(lb)) or (isinstance(lb, Rt) and lb.same(la)):
            return
        self._error("E003", f"{what} may differ in length: `{_show(la)}` and `{_show(lb)}` "
                    "bytes", spans[0], f"{names[0]} is `{_show(la)}` bytes",
                    secondary=[(spans[1], f"{names[1]} is `{_show(lb)}` bytes")],
                    help="give both regions the same run-time length (the same `load`s)")


def _length(r: RegionInst) -> int | Rt:
    if r.runtime is None:
        return r.size
    start, stop = r.runtime
    return stop - start  # type: ignore[operator, no-any-return]


def _show(v: object) -> str:
    return v.text() if isinstance(v, Rt) else str(v)


def unique_loads(loads: Iterable[LoadInst]) -> list[LoadInst]:
    """Each element's first load, in order (one read event reads it once)."""
    first: dict[RegionInst, LoadInst] = {}
    for x in loads:
        first.setdefault(x.region, x)
    return list(first.values())


def forget_assigned(env: Env, stmts: Sequence[ir.Stmt]) -> None:
    """Names assigned in a block are bound for the rest of that block only."""
    for s in stmts:
        if isinstance(s, ir.Assign):
            env.vars.pop(s.var, None)


def _region_text(region: ir.Region, rank: int, start: int, stop: int) -> str:
    base = region.window if region.rank is None else f"{region.window}@{rank}"
    if region.init:
        base = f"init({base})"
    return f"{base}[{start}:{stop}]"


def _reads(*exprs: ir.Expr | None) -> tuple[bool, frozenset[str]]:
    """(some `load(...)` among `exprs`, the variable names they mention)."""
    loads = False
    names: set[str] = set()
    todo: list[object] = [e for e in exprs if e is not None]
    while todo:
        e = todo.pop()
        if isinstance(e, ir.Load):
            loads = True
        elif isinstance(e, ir.Var):
            names.add(e.name)
        if isinstance(e, (tuple, list)):
            todo.extend(e)
        elif hasattr(e, "__dataclass_fields__"):
            todo.extend(getattr(e, f) for f in e.__dataclass_fields__ if f != "span")
    return loads, frozenset(names)
