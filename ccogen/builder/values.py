"""The values the builder hands out: symbolic expressions (`Value` and `cg.and_`,
`cg.min`, ...), teams, regions (`Window`, `Region`, `cg.init`, `Condition`) and counters."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Final, NoReturn, TypeAlias

from ccogen.builder.spans import span_at
from ccogen.diag import error
from ccogen.errors import DiagnosticError
from ccogen.ir import nodes
from ccogen.ir.dtype import DType
from ccogen.source import Span

if TYPE_CHECKING:
    from ccogen.builder.protocol import Protocol

TRUTH_HELP: Final = (
    "Python's `if`, `and`, `or`, `not`, `min`, `max` and chained comparisons need a concrete "
    "value; use `k.if_(...)`, `cg.where`, `cg.and_`, `cg.or_`, `cg.not_`, `cg.min` or `cg.max`"
)

ExprLike: TypeAlias = "Value | int | range | Sequence[Value | int]"


# ----------------------------------------------------------------------------- diagnostics


def fail(
    code: str, message: str, span: Span | None, label: str = "", *,
    help: str | None = None, secondary: Sequence[tuple[Span | None, str]] = (),
) -> NoReturn:
    raise DiagnosticError([error(code, message, span, label, help=help, secondary=secondary)])


def describe(value: object) -> str:
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, Window | Region):
        return "a region"
    if isinstance(value, Value):
        return "a symbolic expression"
    if value is None or isinstance(value, builtins.bool):
        return f"`{value}`"
    return f"`{type(value).__name__}`"


# ----------------------------------------------------------------------------- values


class Value:
    """A symbolic integer or boolean expression (an IR `Expr`) with Python operators."""

    __slots__ = ("expr",)
    __hash__: ClassVar[None] = None  # type: ignore[assignment]  # `==` builds an expression

    def __init__(self, expr: nodes.Expr) -> None:
        self.expr = expr

    def __repr__(self) -> str:
        try:
            from ccogen.syntax.printer import expr as show
        except ImportError:  # pragma: no cover - the printer ships with ccogen
            return f"Value({self.expr!r})"
        return f"Value({show(self.expr)})"

    def __add__(self, other: ExprLike) -> Value:
        return _binop("+", self, other, span_at(0))

    def __radd__(self, other: ExprLike) -> Value:
        return _binop("+", other, self, span_at(0))

    def __sub__(self, other: ExprLike) -> Value:
        return _binop("-", self, other, span_at(0))

    def __rsub__(self, other: ExprLike) -> Value:
        return _binop("-", other, self, span_at(0))

    def __mul__(self, other: ExprLike) -> Value:
        return _binop("*", self, other, span_at(0))

    def __rmul__(self, other: ExprLike) -> Value:
        return _binop("*", other, self, span_at(0))

    def __floordiv__(self, other: ExprLike) -> Value:
        return _binop("//", self, other, span_at(0))

    def __rfloordiv__(self, other: ExprLike) -> Value:
        return _binop("//", other, self, span_at(0))

    def __mod__(self, other: ExprLike) -> Value:
        return _binop("%", self, other, span_at(0))

    def __rmod__(self, other: ExprLike) -> Value:
        return _binop("%", other, self, span_at(0))

    def __pow__(self, other: ExprLike) -> Value:
        return _binop("**", self, other, span_at(0))

    def __rpow__(self, other: ExprLike) -> Value:
        return _binop("**", other, self, span_at(0))

    def __neg__(self) -> Value:
        return Value(nodes.UnaryOp(op="-", operand=self.expr, span=span_at(0)))

    def __pos__(self) -> Value:
        return Value(nodes.UnaryOp(op="+", operand=self.expr, span=span_at(0)))

    def __abs__(self) -> Value:
        return Value(nodes.Call(func="abs", args=(self.expr,), span=span_at(0)))

    def __eq__(self, other: object) -> Value:  # type: ignore[override]
        return _compare("==", self, other, span_at(0))

    def __ne__(self, other: object) -> Value:  # type: ignore[override]
        return _compare("!=", self, other, span_at(0))

    def __lt__(self, other: ExprLike) -> Value:
        return _compare("<", self, other, span_at(0))

    def __le__(self, other: ExprLike) -> Value:
        return _compare("<=", self, other, span_at(0))

    def __gt__(self, other: ExprLike) -> Value:
        return _compare(">", self, other, span_at(0))

    def __ge__(self, other: ExprLike) -> Value:
        return _compare(">=", self, other, span_at(0))

    def __bool__(self) -> builtins.bool:
        fail("E004", "a symbolic value has no truth value here: use `k.if_(...)`",
              span_at(0), "needs a concrete bool", help=TRUTH_HELP)

    def __index__(self) -> int:
        fail("E004", "a symbolic value is not a Python integer", span_at(0),
              "needs a concrete integer",
              help="use `k.range(...)` and `with k.for_(...)` to loop inside the protocol")

    def __iter__(self) -> Iterator[Value]:
        fail("E004", "a symbolic value cannot be iterated in Python", span_at(0),
              "Python iteration here", help="loop inside the protocol: `with k.for_(...) as i:`")

    def __truediv__(self, other: object) -> NoReturn:
        _unsupported("/", "use `//`: protocol arithmetic is on integers")

    __rtruediv__ = __truediv__

    def __and__(self, other: object) -> NoReturn:
        _unsupported("&", "use `cg.and_(a, b)`")

    __rand__ = __and__

    def __or__(self, other: object) -> NoReturn:
        _unsupported("|", "use `cg.or_(a, b)`")

    __ror__ = __or__

    def __invert__(self) -> NoReturn:
        _unsupported("~", "use `cg.not_(a)` for `not`")

    def __xor__(self, other: object) -> NoReturn:
        _unsupported("^", "the language has no bitwise operators")

    __rxor__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __xor__


def _unsupported(op: str, hint: str) -> NoReturn:
    fail("E002", f"`{op}` is not an operator of the protocol language", span_at(1),
          "unsupported operator", help=hint)


def _range_call(value: range, span: Span | None) -> nodes.Expr:
    """A Python `range` as the shortest `range(...)` call that means it."""
    args: tuple[int, ...] = (value.stop,)
    if value.step != 1:
        args = (value.start, value.stop, value.step)
    elif value.start != 0:
        args = (value.start, value.stop)
    consts = tuple(nodes.Const(value=a, span=span) for a in args)
    return nodes.Call(func="range", args=consts, span=span)


def expr_of(value: object, what: str, span: Span | None) -> nodes.Expr:
    """The IR expression of a Python value; `what` names it in the error."""
    if isinstance(value, Value):
        return value.expr
    if isinstance(value, builtins.bool):
        return nodes.Const(value=value, span=span)
    if isinstance(value, int):
        return nodes.Const(value=value, span=span)
    if isinstance(value, range):
        return _range_call(value, span)
    if isinstance(value, list | tuple):
        items = tuple(expr_of(v, what, span) for v in value)
        return nodes.ListExpr(items=items, span=span)
    fail("E002", f"{what} must be an integer expression, not {describe(value)}", span,
          "not a number")


def _binop(op: str, left: object, right: object, span: Span) -> Value:
    what = f"an operand of `{op}`"
    return Value(nodes.BinOp(op=op, left=expr_of(left, what, span),
                          right=expr_of(right, what, span), span=span))


def _compare(op: str, left: object, right: object, span: Span) -> Value:
    what = f"an operand of `{op}`"
    operands = (expr_of(left, what, span), expr_of(right, what, span))
    return Value(nodes.Compare(ops=(op,), operands=operands, span=span))


def _bool_op(op: str, values: Sequence[ExprLike], span: Span) -> Value:
    if len(values) < 2:
        fail("E002", f"`cg.{op}_` takes at least 2 arguments, not {len(values)}", span,
              f"{len(values)} given")
    exprs = tuple(expr_of(v, f"an operand of `{op}`", span) for v in values)
    return Value(nodes.BoolOp(op=op, values=exprs, span=span))


def and_(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """`a and b and ...` (Python's value semantics)."""
    return _bool_op("and", values, span_at(src_loc_at))


def or_(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """`a or b or ...` (Python's value semantics)."""
    return _bool_op("or", values, span_at(src_loc_at))


def not_(value: ExprLike, *, src_loc_at: int = 0) -> Value:
    """`not value`."""
    span = span_at(src_loc_at)
    return Value(nodes.UnaryOp(op="not", operand=expr_of(value, "the operand of `not`", span),
                            span=span))


def where(cond: ExprLike, then: ExprLike, orelse: ExprLike, *, src_loc_at: int = 0) -> Value:
    """`then if cond else orelse`."""
    span = span_at(src_loc_at)
    return Value(nodes.IfExp(cond=expr_of(cond, "the condition", span),
                          then=expr_of(then, "the `then` value", span),
                          orelse=expr_of(orelse, "the `orelse` value", span), span=span))


def builtin_call(func: str, args: Sequence[object], span: Span, lo: int, hi: int | None) -> Value:
    if len(args) < lo or (hi is not None and len(args) > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        fail("E002", f"`{func}` takes {want} argument{'' if want == '1' else 's'}, "
              f"not {len(args)}", span, f"{len(args)} given")
    exprs = tuple(expr_of(a, f"an argument of `{func}`", span) for a in args)
    return Value(nodes.Call(func=func, args=exprs, span=span))


def load(region: Window | Region, index: ExprLike, *, src_loc_at: int = 0) -> Value:
    """`load(x[i])` (`cg.load(x, i)`), `load(x@p[i])` (`cg.load(x @ p, i)`): element `i`,
    a run-time value.  In `require` it is the initial contents; in `ensure` the final
    ones, or the initial ones of `cg.load(cg.init(x @ p), i)` (the text writes
    `x[i]` and `init(x@p)[i]` there)."""
    span = span_at(src_loc_at)
    found = as_region(region)
    if found is None or found.sliced:
        fail("E002", "`load` reads one element of a window or buffer", span,
              f"{describe(region)} given", help="write `cg.load(x, i)` or `cg.load(x @ p, i)`")
    return Value(nodes.Load(window=found.window.name, index=expr_of(index, "the index", span),
                            rank=found.rank, init=found.init, span=span))


def chain(*parts: object, src_loc_at: int = 0) -> Value:
    """A chained comparison: `cg.chain(0, "<=", n, "<=", cap)` is `0 <= n <= cap`."""
    span = span_at(src_loc_at)
    operands, ops = parts[0::2], parts[1::2]
    if len(parts) < 3 or len(parts) % 2 == 0 or not builtins.all(
            isinstance(o, str) and o in ("<", "<=", ">", ">=", "==", "!=") for o in ops):
        fail("E002", "`cg.chain` takes operands and comparison strings in turn", span,
              "not a chain", help='write `cg.chain(0, "<=", n, "<=", cap)`')
    return Value(nodes.Compare(ops=tuple(ops),  # type: ignore[arg-type]
                               operands=tuple(expr_of(o, "an operand", span) for o in operands),
                               span=span))


def _generator(func: str, each: Each, span: Span) -> Value:
    """`sum(elt for v in it)` of numbers (static or run-time), in an expression."""
    assert isinstance(each.elt, nodes.Expr.__args__)  # type: ignore[attr-defined]
    return Value(nodes.GenExpr(func=func, elt=each.elt, var=each.var,  # type: ignore[arg-type]
                               iter=each.iterable, cond=each.cond, span=span))


def _numbers(values: Sequence[object]) -> builtins.bool:
    return len(values) == 1 and isinstance(values[0], Each) and not isinstance(
        values[0].elt, nodes.Region)


def _regions_given(values: Sequence[object]) -> builtins.bool:
    """`cg.max([a, b])` / `cg.max(e.each(...))` of regions: a reduction, not a number."""
    if len(values) != 1:
        return False
    only = values[0]
    return isinstance(only, Each) or (isinstance(only, list | tuple) and builtins.any(
        isinstance(v, Window | Region) for v in only))


def min(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """The built-in `min(...)` of the language (of regions in `ensure`: a `Reduction`)."""
    if _numbers(values):
        return _generator("min", values[0], span_at(src_loc_at))  # type: ignore[arg-type]
    if _regions_given(values):
        return _reduction(nodes.ReduceOp.MIN, values[0], None,  # type: ignore[return-value]
                          span_at(src_loc_at))
    return builtin_call("min", values, span_at(src_loc_at), 1, None)


def max(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """The built-in `max(...)` of the language (of regions in `ensure`: a `Reduction`)."""
    if _numbers(values):
        return _generator("max", values[0], span_at(src_loc_at))  # type: ignore[arg-type]
    if _regions_given(values):
        return _reduction(nodes.ReduceOp.MAX, values[0], None,  # type: ignore[return-value]
                          span_at(src_loc_at))
    return builtin_call("max", values, span_at(src_loc_at), 1, None)


def abs(value: ExprLike, *, src_loc_at: int = 0) -> Value:
    """The built-in `abs(x)` of the language."""
    return builtin_call("abs", (value,), span_at(src_loc_at), 1, 1)


_LEAVES: Final = (nodes.Const, nodes.Me, nodes.NRanks, nodes.Launch, str, int, nodes.SignalKind,
                  nodes.Mode)


@functools.cache
def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name != "span")


def walk_names(node: object) -> Iterator[nodes.Var | nodes.ParamRef]:
    """Every `Var` and `ParamRef` in an expression or region."""
    if node is None or isinstance(node, _LEAVES):
        return
    if isinstance(node, nodes.Var | nodes.ParamRef):
        yield node
    elif isinstance(node, nodes.GenExpr):  # its variable is bound inside it
        yield from walk_names(node.iter)
        for part in (node.elt, node.cond):
            yield from (v for v in walk_names(part)
                        if not (isinstance(v, nodes.Var) and v.name == node.var))
    elif isinstance(node, tuple):
        for item in node:
            yield from walk_names(item)
    else:
        cls: type = type(node)
        assert is_dataclass(cls)
        for name in _child_fields(cls):
            yield from walk_names(getattr(node, name))


# ----------------------------------------------------------------------------- teams


def _team(kind: nodes.TeamKind, size: ExprLike | None, span: Span) -> nodes.Team:
    expr = None if size is None else expr_of(size, "the team size", span)
    return nodes.Team(kind=kind, size=expr, span=span)


def lsa(size: ExprLike | None = None, *, src_loc_at: int = 0) -> nodes.Team:
    """`team lsa` (node-local ranks), or `team lsa(size)`."""
    return _team(nodes.TeamKind.LSA, size, span_at(src_loc_at))


def world(size: ExprLike | None = None, *, src_loc_at: int = 0) -> nodes.Team:
    """`team world` (every rank, across nodes), or `team world(size)`."""
    return _team(nodes.TeamKind.WORLD, size, span_at(src_loc_at))


# ----------------------------------------------------------------------------- element types


class ElementType:
    """An element type for `p.window`/`p.buffer`: `cg.bf16[n]`, or a dtype parameter `T[n]`."""

    __slots__ = ("_protocol", "spec")

    def __init__(self, spec: DType | nodes.ParamRef, protocol: Protocol | None = None) -> None:
        self.spec = spec
        self._protocol = protocol

    def __repr__(self) -> str:
        return self.spec.name if isinstance(self.spec, nodes.ParamRef) else self.spec.value

    def __getitem__(self, count: ExprLike) -> Shape:
        span = span_at(0)
        return Shape(self, expr_of(count, "the element count", span), span)


@dataclass(frozen=True, eq=False)
class Shape:
    """`DTYPE[COUNT]`: what `p.window(name, ...)` and `p.buffer(name, ...)` take."""

    type: ElementType
    count: nodes.Expr
    span: Span | None = None


u8: Final = ElementType(DType.U8)
i32: Final = ElementType(DType.I32)
u32: Final = ElementType(DType.U32)
i64: Final = ElementType(DType.I64)
u64: Final = ElementType(DType.U64)
f16: Final = ElementType(DType.F16)
bf16: Final = ElementType(DType.BF16)
f32: Final = ElementType(DType.F32)


# ----------------------------------------------------------------------------- regions


class Window:
    """A declared window (or local buffer: `buffer`); as a region it is the whole of it."""

    __slots__ = ("_protocol", "buffer", "name", "span")

    def __init__(self, protocol: Protocol, name: str, span: Span | None, *,
                 buffer: builtins.bool = False) -> None:
        self._protocol = protocol
        self.name = name
        self.span = span
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"{'Buffer' if self.buffer else 'Window'}({self.name!r})"

    __hash__ = object.__hash__

    def region(self) -> Region:
        return Region(window=self)

    def __getitem__(self, key: object) -> Region:
        return _slice(self.region(), key, span_at(0))

    def at(self, rank: ExprLike, *, src_loc_at: int = 0) -> Region:
        """Rank `rank`'s copy of the window (`w@rank`; `ensure` only)."""
        return _at(self.region(), rank, span_at(src_loc_at))

    def __matmul__(self, rank: ExprLike) -> Region:
        return _at(self.region(), rank, span_at(0))

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("==", self, other, span_at(0))

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("!=", self, other, span_at(0))


@dataclass(frozen=True, eq=False)
class Region:
    """Bytes `[start, stop)` of a window, possibly of another rank (`at`) or initial (`init`)."""

    window: Window
    start: nodes.Expr | None = None
    stop: nodes.Expr | None = None
    rank: nodes.Expr | None = None
    init: builtins.bool = False
    sliced: builtins.bool = False
    span: Span | None = None
    single: builtins.bool = False  # `got[p]` in `ensure`: one element

    def __getitem__(self, key: object) -> Region:
        return _slice(self, key, span_at(0))

    def at(self, rank: ExprLike, *, src_loc_at: int = 0) -> Region:
        """Rank `rank`'s copy of this region (`ensure` only)."""
        return _at(self, rank, span_at(src_loc_at))

    def __matmul__(self, rank: ExprLike) -> Region:
        return _at(self, rank, span_at(0))

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("==", self, other, span_at(0))

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("!=", self, other, span_at(0))

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def to_ir(self, span: Span | None = None) -> nodes.Region:
        return nodes.Region(window=self.window.name, start=self.start, stop=self.stop,
                            rank=self.rank, init=self.init, single=self.single,
                            span=self.span or span)


def as_region(value: object) -> Region | None:
    if isinstance(value, Window):
        return value.region()
    return value if isinstance(value, Region) else None


def _slice(region: Region, key: object, span: Span) -> Region:
    name = region.window.name
    if not isinstance(key, slice):
        if region.sliced:
            fail("E003", f"region of `{name}` is sliced twice", span, "already a slice",
                  help="slice the window once")
        # one element (`got[p]` in `ensure`; the scopes refuse it in kernels)
        return replace(region, start=expr_of(key, "an element index", span), stop=None,
                       sliced=True, single=True, span=span)
    if key.step is not None:
        fail("E003", "a region has no step", span, "step given here",
              help=f"write `{name}[a:b]`")
    if region.sliced:
        fail("E003", f"region of `{name}` is sliced twice", span, "already a slice",
              help="slice the window once")
    start = None if key.start is None else expr_of(key.start, "a region bound", span)
    stop = None if key.stop is None else expr_of(key.stop, "a region bound", span)
    return replace(region, start=start, stop=stop, sliced=True, span=span)


def _at(region: Region, rank: ExprLike, span: Span) -> Region:
    if region.rank is not None:
        fail("E002", f"`{region.window.name}` already names a rank", span, "rank given twice")
    if region.sliced or region.init:
        what = "a slice" if region.sliced else "`init(...)`"
        fail("E002", f"`.at(...)` applies to a window, not to {what}", span, "not a window",
              help="write `cg.init(w.at(r))[a:b]`")
    return replace(region, rank=expr_of(rank, "the rank", span), span=span)


def init(region: Window | Region, *, src_loc_at: int = 0) -> Region:
    """`init(x)`: the contents of window `x` before the first kernel (`ensure` only)."""
    span = span_at(src_loc_at)
    found = as_region(region)
    if found is None:
        fail("E002", f"`init` takes a window, not {describe(region)}", span, "not a window",
              help="write `cg.init(w)` or `cg.init(w.at(r))`")
    if found.init or found.sliced:
        fail("E002", "`init` takes a window, not a region", span, "not a window",
              help="write `cg.init(w)[a:b]`")
    return replace(found, init=True, span=span)


@dataclass(frozen=True, eq=False)
class Each:
    """`[elt for var in iterable if cond]`, made by `k.each(...)`/`e.each(...)`."""

    var: str
    iterable: nodes.Expr
    elt: object  # a Region, or a number / Value
    cond: nodes.Expr | None
    span: Span | None = None


@dataclass(frozen=True, eq=False)
class Reduction:
    """`cg.sum(...)`, `cg.max(...)`, `cg.min(...)` of regions, for `e.check(...)`."""

    op: nodes.ReduceOp
    terms: Sequence[object] | Each
    weights: Sequence[object] | Each | None
    span: Span | None = None

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("==", other, self, span_at(0))  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("!=", other, self, span_at(0))  # type: ignore[arg-type]

    __hash__: ClassVar[None] = None  # type: ignore[assignment]


def _reduction(op: nodes.ReduceOp, terms: object, weights: object, span: Span) -> Reduction:
    if not isinstance(terms, list | tuple | Each):
        fail("E002", f"`cg.{op.value}` takes a list of regions or `e.each(...)`, not "
             f"{describe(terms)}", span, "not a list",
             help=f"write `cg.{op.value}(e.each(e.ranks(), lambda p: cg.init(x @ p)))`")
    if weights is not None and op is not nodes.ReduceOp.SUM:
        fail("E002", f"`weights=` only goes with `sum`, not `{op.value}`", span,
             "weights of a max or min")
    if weights is not None and not isinstance(weights, list | tuple | Each):
        fail("E002", f"`weights=` takes a list of numbers, not {describe(weights)}", span,
             "not a list")
    return Reduction(op, terms, weights, span)  # type: ignore[arg-type]


def sum(terms: Sequence[Window | Region] | Each, *, weights: Sequence[object] | Each | None = None,
        src_loc_at: int = 0) -> Reduction:
    """`sum(...)` of regions in `ensure` (element-wise, optionally weighted); of numbers
    (`cg.sum(k.each(k.peers(), lambda p: cg.load(got, p)))`) a `Value`."""
    if weights is None and _numbers([terms]):
        return _generator("sum", terms, span_at(src_loc_at))  # type: ignore[arg-type, return-value]
    return _reduction(nodes.ReduceOp.SUM, terms, weights, span_at(src_loc_at))


@dataclass(frozen=True, eq=False)
class Condition:
    """`region == region` or `region != region` (or a `Reduction`), for `e.check(...)`."""

    op: str
    left: Region
    right: Region | Reduction
    span: Span | None = None

    def __bool__(self) -> builtins.bool:
        fail("E004", "a region comparison has no truth value here: use `e.check(...)`",
              span_at(0), "needs a concrete bool")


def _condition(op: str, left: Window | Region, right: object, span: Span) -> Condition:
    other: Region | Reduction | None = (right if isinstance(right, Reduction)
                                        else as_region(right))
    if other is None:
        fail("E002", f"a region can only be compared with a region or a reduction, not "
             f"{describe(right)}", span, "not a region")
    this = as_region(left)
    if this is None:
        fail("E002", f"a reduction can only be compared with a region, not {describe(left)}",
             span, "not a region")
    return Condition(op, this, other, span)


class Counter:
    """A declared counted-write counter: pass it as `count=` or to `wait_count`."""

    __slots__ = ("_protocol", "name", "span")

    def __init__(self, protocol: Protocol, name: str, span: Span | None) -> None:
        self._protocol = protocol
        self.name = name
        self.span = span

    def __repr__(self) -> str:
        return f"Counter({self.name!r})"
