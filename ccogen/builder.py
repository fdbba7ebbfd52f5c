"""The Python builder API: build a protocol in Python, get the IR the text would give.

Everything the `.cco` text can say, the builder can build, and the result is the
*same* frozen `ccogen.ir.nodes.Protocol` that parsing the equivalent text yields
(spans aside, which equality ignores).  `parse(p.to_source()) == p` holds.

```python
import ccogen as cg

p = cg.Protocol("alltoall", team=cg.lsa(), doc="every rank sends one block to every peer")
block = p.param("block", cg.bytes, default=cg.MiB)
send = p.window("send", p.nranks * block)
recv = p.window("recv", p.nranks * block)
with p.kernel("exchange", threads=64) as k:
    with k.lanes(k.peers()) as peer:
        k.put(peer, dst=recv[k.me * block:(k.me + 1) * block],
              src=send[peer * block:(peer + 1) * block], queue=0, signal="remote")
        k.quiet(peer)
        k.wait_signal(peer, queue=0)
with p.ensure() as e:
    with e.for_(e.peers()) as q:
        e.check(recv[q * block:(q + 1) * block]
                == cg.init(send @ q)[e.me * block:(e.me + 1) * block])
```

Protocol and declarations (text form on the right)
---------------------------------------------------
- `Protocol(name, *, team=None, doc=None)`          `protocol NAME(...):` + docstring
- `p.team = cg.lsa(4)`, also `team=` above          `team lsa(4)`; default `team lsa`.
  `cg.lsa()`, `cg.lsa(n)`, `cg.world()`, `cg.world(n)`.
- `p.param(name, cg.bytes | cg.int_, default=E)`    `name: bytes = E`; returns a `Value`.
  The type may also be `"bytes"`/`"int"` or Python's `bytes`/`int`; `ccogen.builder.int`
  is `int_` (served by a module `__getattr__` so that `int` stays the builtin here).
- `p.queues(n)` / `p.queues("auto")`                `queues n` / `queues auto` (default 1)
- `p.between_launches("host_sync")`                 `between_launches: host_sync`
- `p.window(name, size, align=None)`                `window name: size, align=A`; a `Window`
- `p.counter(name)`                                  `counter name`; a `Counter`
- `p.kernel(name, threads=T, blocks=None)`          `kernel name(threads=T, blocks=B):`
- `p.ensure()`                                       `ensure:`
- `p.nranks`                                         `nranks` (for window sizes)
- `p.params`, `p.windows`, `p.counters`: read-only name -> handle mappings (also for a
  protocol from `Protocol.from_ir`).
- `p.ir` (the frozen IR), `p.to_source()` (canonical text), `p == q` (compares IR; `q`
  may be a builder `Protocol` or an `ir.Protocol`), `Protocol.from_ir(ir_protocol)`.

Names are Python identifiers that are neither keywords nor built-in names (`me`,
`nranks`, `init`, the built-in functions and the op names).  Parameters, windows and
counters share one namespace; kernels have their own.  Declarations must not be made
inside a `with` block, and each kind keeps its source order in the IR.

Kernels and ensure
------------------
`with p.kernel(...) as k:` and `with p.ensure() as e:` open a scope; a scope has

- `k.me`, `k.nranks`, `k.peers()`, `k.ranks()`, `k.range(stop)` / `k.range(start, stop[,
  step])`, `k.len(x)` (the built-ins; all return `Value`s);
- `with k.for_(iterable, name=None) as i:`          `for i in iterable:`
- `with k.if_(c):` / `with k.elif_(c):` / `with k.else_():`; `elif_`/`else_` must directly
  follow an `if_`/`elif_` block of the same body and become `If(..., orelse=(If(...),))`;
- `k.pass_()`                                        `pass`
- kernels only: `with k.lanes(it) as x:`, `k.warps(it)`, `k.blocks(it)` (issuer blocks;
  `blocks` only at the top level of a kernel, `warps` not inside `lanes` or `warps`,
  `lanes` not inside `lanes`), and the operations, with the signatures of the text:
  `k.put(peer, dst=, src=, queue=, signal=, aggregate=, signal_per_copy=, mode=, count=)`,
  `k.get(peer, dst=, src=, queue=, signal=, aggregate=, mode=)`, `k.copy(dst=, src=)`,
  `k.commit(peer, queue=)`, `k.quiet()`, `k.quiet(peer)`, `k.quiet(peer, queue=)`,
  `k.wait_signal(src, queue=, expected=)`, `k.wait_count(counter, expected=)`,
  `k.reset_count(counter)`, `k.barrier()`, `k.fence()`.  `queue` is an integer or `"auto"`
  (the default); `signal`/`mode` are the strings of the text (or `ir.SignalKind`/`ir.Mode`);
  `aggregate`/`signal_per_copy` are Python bools; `count`/`counter` a `Counter` or the name
  of a declared one; regions are a `Window` (the whole window) or a slice of one.
- ensure only: `e.check(region == region)` / `e.check(region != region)`.

`pass` lowers to nothing, as in the text: an empty body is an empty tuple (the printer
writes `pass` for it), and `k.pass_()` only exists for symmetry.

Loop variables: `with k.lanes(k.peers()) as peer:` names the variable `peer`, read from
the `with ... as NAME` target.  `name="p"` overrides it.  Where no usable target exists
(no `as`, an attribute target, a name that is taken or reserved) the builder picks `i0`, `i1`...
(deterministic per protocol, skipping taken names).  A given `name=` that shadows a
parameter, window, counter or an enclosing loop variable is an error.

Values
------
`Value` wraps an IR `Expr`.  `+ - * // % **`, unary `-`/`+` and `abs()` build `BinOp`,
`UnaryOp` and `Call`; `== != < <= > >=` build `Compare` and return a `Value` (so `Value`
is unhashable).  Python ints and bools become `Const` (a negative int too, as the text's
`-1` does), lists and tuples `ListExpr`, Python `range(...)` objects `range(...)` calls.
`cg.and_(a, b, ...)`, `cg.or_(...)`, `cg.not_(a)`, `cg.where(cond, then, orelse)` (`then
if cond else orelse`), `cg.min(...)`, `cg.max(...)`, `cg.abs(x)` build the rest.  A Python
`if`, `and`, `or`, `not`, chained comparison, `min`/`max` or `range` on a `Value` needs a
concrete value and raises E004 at that line; `/`, `&`, `|`, `~`, `^`, `<<`, `>>` are E002.
Reflected operators keep Python's order: `0 == k.me` builds `me == 0`.

Regions: `w[a:b]` (either bound may be omitted) is a `Region`; `w.at(r)` or `w @ r` is
rank r's window and `cg.init(x)` its contents before the first kernel (both only in
`ensure`); `region == region` / `region != region` is a `Condition` for `e.check`.

Sizes: `cg.KiB`, `cg.MiB`, `cg.GiB` are the plain integers 2**10, 2**20, 2**30.

Errors and spans
----------------
Every node records the span of the user's call (Python >= 3.11 instruction positions:
line, end line, start and end column), so diagnostics point at the user's file.  Every
mistake raises `DiagnosticError` at once, at the faulty call, with coded diagnostics
(E002 names and arguments, E003 regions, E004 truth values).  Every public function and
method takes `src_loc_at=0`: a wrapper passes `src_loc_at=1` to blame its own caller.
"""

from __future__ import annotations

import builtins
import dis
import functools
import itertools
import keyword
import linecache
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from types import CodeType, FrameType, MappingProxyType, TracebackType
from typing import ClassVar, Final, NoReturn, Self, TypeAlias

from ccogen.diag import error
from ccogen.errors import DiagnosticError
from ccogen.ir import nodes
from ccogen.ir.opkind import OpKind
from ccogen.ir.signatures import CHOICES, SIGNATURES, Arg, bind, make_op
from ccogen.source import SourceFile, Span

KiB: Final = 1 << 10
MiB: Final = 1 << 20
GiB: Final = 1 << 30

bytes = nodes.ParamType.BYTES
int_: Final = nodes.ParamType.INT  # `cg.int` is served by `__getattr__` below

_BUILTINS: Final = ("peers", "ranks", "range", "len", "min", "max", "abs")
_KEYWORDS: Final = frozenset(
    {*keyword.kwlist, "protocol", "team", "queues", "window", "counter", "kernel", "ensure",
     "lanes", "warps", "blocks", "auto"}
)
_BUILTIN_NAMES: Final = frozenset({"me", "nranks", "init", *_BUILTINS, *SIGNATURES})
_NAME_HELP: Final = "names are Python identifiers that are neither keywords nor built-in names"
_TRUTH_HELP: Final = (
    "Python's `if`, `and`, `or`, `not`, `min`, `max` and chained comparisons need a concrete "
    "value; use `k.if_(...)`, `cg.where`, `cg.and_`, `cg.or_`, `cg.not_`, `cg.min` or `cg.max`"
)

ExprLike: TypeAlias = "Value | int | range | Sequence[Value | int]"


# ----------------------------------------------------------------------------- spans


@dataclass
class _Lines:
    lines: list[str]
    file: SourceFile


_FILES: dict[str, _Lines] = {}


def _source_file(frame: FrameType) -> SourceFile | None:
    """The `SourceFile` of a frame's Python file, cached while linecache's copy is."""
    filename = frame.f_code.co_filename
    lines = linecache.getlines(filename, frame.f_globals)
    if not lines:
        return None
    cached = _FILES.get(filename)
    if cached is None or cached.lines is not lines:
        cached = _FILES[filename] = _Lines(lines, SourceFile(filename, "".join(lines)))
    return cached.file


@functools.lru_cache(maxsize=512)
def _code_positions(code: CodeType) -> tuple[tuple[int | None, ...], ...]:
    return tuple(code.co_positions())


def _char_column(file: SourceFile, line: int, byte_column: int) -> int:
    """1-based character column of a UTF-8 byte offset into a line."""
    text = file.line_text(line)
    if text.isascii():
        return byte_column + 1
    prefix = text.encode("utf-8")[:byte_column]
    return len(prefix.decode("utf-8", errors="ignore")) + 1


def _frame_span(frame: FrameType) -> Span:
    """The span of the expression a frame is executing (its whole line as a fallback)."""
    file = _source_file(frame)
    if file is None:  # no source text (<stdin>, exec): an empty span on the right line
        file = SourceFile(frame.f_code.co_filename, "\n" * frame.f_lineno)
        start = file.offset(frame.f_lineno, 1)
        return Span(file, start, start)
    positions = _code_positions(frame.f_code)
    index = frame.f_lasti // 2
    pos = positions[index] if 0 <= index < len(positions) else (None, None, None, None)
    line, end_line, col, end_col = pos
    if line is None or end_line is None or col is None or end_col is None:
        return _line_span(file, frame.f_lineno)
    start = file.offset(line, _char_column(file, line, col))
    return Span(file, start, file.offset(end_line, _char_column(file, end_line, end_col)))


def _line_span(file: SourceFile, line: int) -> Span:
    text = file.line_text(line)
    start = file.offset(line, len(text) - len(text.lstrip()) + 1)
    return Span(file, start, file.offset(line, len(text.rstrip()) + 1))


def _span_at(src_loc_at: int) -> Span:
    """The span of the call to the function that calls this, `src_loc_at` frames up."""
    return _frame_span(sys._getframe(2 + src_loc_at))


# ----------------------------------------------------------------------------- diagnostics


def _fail(
    code: str, message: str, span: Span | None, label: str = "", *,
    help: str | None = None, secondary: Sequence[tuple[Span | None, str]] = (),
) -> NoReturn:
    raise DiagnosticError([error(code, message, span, label, help=help, secondary=secondary)])


def _describe(value: object) -> str:
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, Window | Region):
        return "a region"
    if isinstance(value, Value):
        return "a symbolic expression"
    if value is None or isinstance(value, builtins.bool):
        return f"`{value}`"
    return f"`{type(value).__name__}`"


def _check_name(name: object, what: str, span: Span) -> str:
    """A valid, unreserved name for a `what`, or an E002."""
    if not isinstance(name, str):
        _fail("E002", f"the {what} name must be a string, not {_describe(name)}", span,
              "not a name")
    if not name.isidentifier() or not name.isascii():
        _fail("E002", f"`{name}` is not a valid name", span, f"cannot name a {what}",
              help=_NAME_HELP)
    if name in _KEYWORDS:
        _fail("E002", f"`{name}` is a keyword", span, f"cannot name a {what}", help=_NAME_HELP)
    if name in _BUILTIN_NAMES:
        _fail("E002", f"`{name}` is a built-in name", span, f"cannot name a {what}",
              help=_NAME_HELP)
    return name


def _name_ok(name: str) -> bool:
    return name.isidentifier() and name.isascii() and name not in _KEYWORDS \
        and name not in _BUILTIN_NAMES


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
        return _binop("+", self, other, _span_at(0))

    def __radd__(self, other: ExprLike) -> Value:
        return _binop("+", other, self, _span_at(0))

    def __sub__(self, other: ExprLike) -> Value:
        return _binop("-", self, other, _span_at(0))

    def __rsub__(self, other: ExprLike) -> Value:
        return _binop("-", other, self, _span_at(0))

    def __mul__(self, other: ExprLike) -> Value:
        return _binop("*", self, other, _span_at(0))

    def __rmul__(self, other: ExprLike) -> Value:
        return _binop("*", other, self, _span_at(0))

    def __floordiv__(self, other: ExprLike) -> Value:
        return _binop("//", self, other, _span_at(0))

    def __rfloordiv__(self, other: ExprLike) -> Value:
        return _binop("//", other, self, _span_at(0))

    def __mod__(self, other: ExprLike) -> Value:
        return _binop("%", self, other, _span_at(0))

    def __rmod__(self, other: ExprLike) -> Value:
        return _binop("%", other, self, _span_at(0))

    def __pow__(self, other: ExprLike) -> Value:
        return _binop("**", self, other, _span_at(0))

    def __rpow__(self, other: ExprLike) -> Value:
        return _binop("**", other, self, _span_at(0))

    def __neg__(self) -> Value:
        return Value(nodes.UnaryOp(op="-", operand=self.expr, span=_span_at(0)))

    def __pos__(self) -> Value:
        return Value(nodes.UnaryOp(op="+", operand=self.expr, span=_span_at(0)))

    def __abs__(self) -> Value:
        return Value(nodes.Call(func="abs", args=(self.expr,), span=_span_at(0)))

    def __eq__(self, other: object) -> Value:  # type: ignore[override]
        return _compare("==", self, other, _span_at(0))

    def __ne__(self, other: object) -> Value:  # type: ignore[override]
        return _compare("!=", self, other, _span_at(0))

    def __lt__(self, other: ExprLike) -> Value:
        return _compare("<", self, other, _span_at(0))

    def __le__(self, other: ExprLike) -> Value:
        return _compare("<=", self, other, _span_at(0))

    def __gt__(self, other: ExprLike) -> Value:
        return _compare(">", self, other, _span_at(0))

    def __ge__(self, other: ExprLike) -> Value:
        return _compare(">=", self, other, _span_at(0))

    def __bool__(self) -> builtins.bool:
        _fail("E004", "a symbolic value has no truth value here: use `k.if_(...)`",
              _span_at(0), "needs a concrete bool", help=_TRUTH_HELP)

    def __index__(self) -> int:
        _fail("E004", "a symbolic value is not a Python integer", _span_at(0),
              "needs a concrete integer",
              help="use `k.range(...)` and `with k.for_(...)` to loop inside the protocol")

    def __iter__(self) -> Iterator[Value]:
        _fail("E004", "a symbolic value cannot be iterated in Python", _span_at(0),
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
    _fail("E002", f"`{op}` is not an operator of the protocol language", _span_at(1),
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


def _expr_of(value: object, what: str, span: Span | None) -> nodes.Expr:
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
        items = tuple(_expr_of(v, what, span) for v in value)
        return nodes.ListExpr(items=items, span=span)
    _fail("E002", f"{what} must be an integer expression, not {_describe(value)}", span,
          "not a number")


def _binop(op: str, left: object, right: object, span: Span) -> Value:
    what = f"an operand of `{op}`"
    return Value(nodes.BinOp(op=op, left=_expr_of(left, what, span),
                          right=_expr_of(right, what, span), span=span))


def _compare(op: str, left: object, right: object, span: Span) -> Value:
    what = f"an operand of `{op}`"
    operands = (_expr_of(left, what, span), _expr_of(right, what, span))
    return Value(nodes.Compare(ops=(op,), operands=operands, span=span))


def _bool_op(op: str, values: Sequence[ExprLike], span: Span) -> Value:
    if len(values) < 2:
        _fail("E002", f"`cg.{op}_` takes at least 2 arguments, not {len(values)}", span,
              f"{len(values)} given")
    exprs = tuple(_expr_of(v, f"an operand of `{op}`", span) for v in values)
    return Value(nodes.BoolOp(op=op, values=exprs, span=span))


def and_(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """`a and b and ...` (Python's value semantics)."""
    return _bool_op("and", values, _span_at(src_loc_at))


def or_(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """`a or b or ...` (Python's value semantics)."""
    return _bool_op("or", values, _span_at(src_loc_at))


def not_(value: ExprLike, *, src_loc_at: int = 0) -> Value:
    """`not value`."""
    span = _span_at(src_loc_at)
    return Value(nodes.UnaryOp(op="not", operand=_expr_of(value, "the operand of `not`", span),
                            span=span))


def where(cond: ExprLike, then: ExprLike, orelse: ExprLike, *, src_loc_at: int = 0) -> Value:
    """`then if cond else orelse`."""
    span = _span_at(src_loc_at)
    return Value(nodes.IfExp(cond=_expr_of(cond, "the condition", span),
                          then=_expr_of(then, "the `then` value", span),
                          orelse=_expr_of(orelse, "the `orelse` value", span), span=span))


def _call(func: str, args: Sequence[object], span: Span, lo: int, hi: int | None) -> Value:
    if len(args) < lo or (hi is not None and len(args) > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        _fail("E002", f"`{func}` takes {want} argument{'' if want == '1' else 's'}, "
              f"not {len(args)}", span, f"{len(args)} given")
    exprs = tuple(_expr_of(a, f"an argument of `{func}`", span) for a in args)
    return Value(nodes.Call(func=func, args=exprs, span=span))


def min(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """The built-in `min(...)` of the language."""
    return _call("min", values, _span_at(src_loc_at), 1, None)


def max(*values: ExprLike, src_loc_at: int = 0) -> Value:
    """The built-in `max(...)` of the language."""
    return _call("max", values, _span_at(src_loc_at), 1, None)


def abs(value: ExprLike, *, src_loc_at: int = 0) -> Value:
    """The built-in `abs(x)` of the language."""
    return _call("abs", (value,), _span_at(src_loc_at), 1, 1)


_LEAVES: Final = (nodes.Const, nodes.Me, nodes.NRanks, str, int, nodes.SignalKind, nodes.Mode)


@functools.cache
def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name != "span")


def _walk_names(node: object) -> Iterator[nodes.Var | nodes.ParamRef]:
    """Every `Var` and `ParamRef` in an expression or region."""
    if node is None or isinstance(node, _LEAVES):
        return
    if isinstance(node, nodes.Var | nodes.ParamRef):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _walk_names(item)
    else:
        cls: type = type(node)
        assert is_dataclass(cls)
        for name in _child_fields(cls):
            yield from _walk_names(getattr(node, name))


# ----------------------------------------------------------------------------- teams


def _team(kind: nodes.TeamKind, size: ExprLike | None, span: Span) -> nodes.Team:
    expr = None if size is None else _expr_of(size, "the team size", span)
    return nodes.Team(kind=kind, size=expr, span=span)


def lsa(size: ExprLike | None = None, *, src_loc_at: int = 0) -> nodes.Team:
    """`team lsa` (node-local ranks), or `team lsa(size)`."""
    return _team(nodes.TeamKind.LSA, size, _span_at(src_loc_at))


def world(size: ExprLike | None = None, *, src_loc_at: int = 0) -> nodes.Team:
    """`team world` (every rank, across nodes), or `team world(size)`."""
    return _team(nodes.TeamKind.WORLD, size, _span_at(src_loc_at))


# ----------------------------------------------------------------------------- regions


class Window:
    """A declared window; as a region it is the whole window."""

    __slots__ = ("_protocol", "name", "span")

    def __init__(self, protocol: Protocol, name: str, span: Span | None) -> None:
        self._protocol = protocol
        self.name = name
        self.span = span

    def __repr__(self) -> str:
        return f"Window({self.name!r})"

    __hash__ = object.__hash__

    def region(self) -> Region:
        return Region(window=self)

    def __getitem__(self, key: object) -> Region:
        return _slice(self.region(), key, _span_at(0))

    def at(self, rank: ExprLike, *, src_loc_at: int = 0) -> Region:
        """Rank `rank`'s copy of the window (`w@rank`; `ensure` only)."""
        return _at(self.region(), rank, _span_at(src_loc_at))

    def __matmul__(self, rank: ExprLike) -> Region:
        return _at(self.region(), rank, _span_at(0))

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("==", self, other, _span_at(0))

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("!=", self, other, _span_at(0))


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

    def __getitem__(self, key: object) -> Region:
        return _slice(self, key, _span_at(0))

    def at(self, rank: ExprLike, *, src_loc_at: int = 0) -> Region:
        """Rank `rank`'s copy of this region (`ensure` only)."""
        return _at(self, rank, _span_at(src_loc_at))

    def __matmul__(self, rank: ExprLike) -> Region:
        return _at(self, rank, _span_at(0))

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("==", self, other, _span_at(0))

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return _condition("!=", self, other, _span_at(0))

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def to_ir(self, span: Span | None = None) -> nodes.Region:
        return nodes.Region(window=self.window.name, start=self.start, stop=self.stop,
                         rank=self.rank, init=self.init, span=self.span or span)


def _as_region(value: object) -> Region | None:
    if isinstance(value, Window):
        return value.region()
    return value if isinstance(value, Region) else None


def _slice(region: Region, key: object, span: Span) -> Region:
    name = region.window.name
    if not isinstance(key, slice):
        _fail("E002", f"a window is sliced by a byte range `{name}[a:b]`, not indexed",
              span, "an index, not a slice", help=f"write `{name}[a:b]`")
    if key.step is not None:
        _fail("E003", "a region has no step", span, "step given here",
              help=f"write `{name}[a:b]`")
    if region.sliced:
        _fail("E003", f"region of `{name}` is sliced twice", span, "already a slice",
              help="slice the window once")
    start = None if key.start is None else _expr_of(key.start, "a region bound", span)
    stop = None if key.stop is None else _expr_of(key.stop, "a region bound", span)
    return replace(region, start=start, stop=stop, sliced=True, span=span)


def _at(region: Region, rank: ExprLike, span: Span) -> Region:
    if region.rank is not None:
        _fail("E002", f"`{region.window.name}` already names a rank", span, "rank given twice")
    if region.sliced or region.init:
        what = "a slice" if region.sliced else "`init(...)`"
        _fail("E002", f"`.at(...)` applies to a window, not to {what}", span, "not a window",
              help="write `cg.init(w.at(r))[a:b]`")
    return replace(region, rank=_expr_of(rank, "the rank", span), span=span)


def init(region: Window | Region, *, src_loc_at: int = 0) -> Region:
    """`init(x)`: the contents of window `x` before the first kernel (`ensure` only)."""
    span = _span_at(src_loc_at)
    found = _as_region(region)
    if found is None:
        _fail("E002", f"`init` takes a window, not {_describe(region)}", span, "not a window",
              help="write `cg.init(w)` or `cg.init(w.at(r))`")
    if found.init or found.sliced:
        _fail("E002", "`init` takes a window, not a region", span, "not a window",
              help="write `cg.init(w)[a:b]`")
    return replace(found, init=True, span=span)


@dataclass(frozen=True, eq=False)
class Condition:
    """`region == region` or `region != region`, for `e.check(...)`."""

    op: str
    left: Region
    right: Region
    span: Span | None = None

    def __bool__(self) -> builtins.bool:
        _fail("E004", "a region comparison has no truth value here: use `e.check(...)`",
              _span_at(0), "needs a concrete bool")


def _condition(op: str, left: Window | Region, right: object, span: Span) -> Condition:
    other = _as_region(right)
    if other is None:
        _fail("E002", f"a region can only be compared with a region, not {_describe(right)}",
              span, "not a region")
    this = _as_region(left)
    assert this is not None
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


# ----------------------------------------------------------------------------- blocks


@dataclass(eq=False)
class _Frame:
    """One open `with` block: its statements so far and what closing it builds."""

    kind: str  # kernel | ensure | for | if | elif | else | lanes | warps | blocks
    span: Span
    head: nodes.Expr | None = None  # the condition or the iterable
    name: str | None = None  # the loop variable name given with `name=`
    var: str | None = None  # the loop variable, once entered
    body: list[nodes.Stmt] = field(default_factory=list)
    chain: builtins.bool = False  # the last statement is an `If` that `elif_`/`else_` extend
    entered: builtins.bool = False


class _LoopBlock:
    """`with k.for_(...) as i:` and the issuer blocks: entering gives the loop variable."""

    def __init__(self, scope: _Scope, frame: _Frame) -> None:
        self._scope = scope
        self._frame = frame

    def __enter__(self) -> Value:
        return self._scope._enter_loop(self._frame, sys._getframe(1))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._scope._exit(self._frame, ok=exc_type is None)


class _CondBlock:
    """`with k.if_(...)`, `k.elif_(...)`, `k.else_()`."""

    def __init__(self, scope: _Scope, frame: _Frame) -> None:
        self._scope = scope
        self._frame = frame

    def __enter__(self) -> None:
        self._scope._enter_cond(self._frame)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._scope._exit(self._frame, ok=exc_type is None)


_STORES: Final = frozenset({"STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"})


@functools.lru_cache(maxsize=512)
def _with_targets(code: CodeType) -> Mapping[int, str]:
    """Offsets of `with`-entering instructions whose result is stored to a plain name."""
    found: dict[int, str] = {}
    instrs = list(dis.get_instructions(code))
    for prev, cur, nxt in zip([None, *instrs], instrs, instrs[1:], strict=False):
        enters = cur.opname == "BEFORE_WITH" or (  # 3.11-3.13; 3.14 calls `__enter__`
            cur.opname == "CALL" and prev is not None and prev.opname == "LOAD_SPECIAL")
        if enters and nxt.opname in _STORES:
            found[cur.offset] = str(nxt.argval)
    return found


def _with_target(frame: FrameType) -> str | None:
    """The NAME of `with ... as NAME:` that is entering in `frame`, if any."""
    return _with_targets(frame.f_code).get(frame.f_lasti)


# ----------------------------------------------------------------------------- scopes


class _Scope:
    """What kernels and `ensure` share: built-ins, `for`, `if`/`elif`/`else`, `pass`."""

    _KIND: ClassVar[str] = ""

    def __init__(self, protocol: Protocol, title: str, span: Span) -> None:
        self._protocol = protocol
        self._title = title
        self._span = span
        self._frames: list[_Frame] = []
        self._state = "new"  # new | open | done

    def __repr__(self) -> str:
        return f"<{self._title} ({self._state})>"

    # -- the scope's own `with`
    def __enter__(self) -> Self:
        if self._state != "new":
            _fail("E002", f"{self._title} was already built", self._span, "entered again",
                  help="each `with` needs a new `p.kernel(...)` or `p.ensure()`")
        self._protocol._open_scope(self)
        self._frames.append(_Frame(self._KIND, self._span, entered=True))
        self._state = "open"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._state = "done"
        root = self._frames[0]
        self._frames.clear()
        self._protocol._close_scope(self, _body(root) if exc_type is None else None)

    def _finish(self, body: tuple[nodes.Stmt, ...]) -> None:
        raise NotImplementedError

    # -- built-ins
    @property
    def me(self) -> Value:
        """`me`: this rank's index in the team."""
        return Value(nodes.Me(span=_span_at(0)))

    @property
    def nranks(self) -> Value:
        """`nranks`: the team size."""
        return Value(nodes.NRanks(span=_span_at(0)))

    def peers(self, *, src_loc_at: int = 0) -> Value:
        """`peers()`: every rank but `me`, in increasing order."""
        return _call("peers", (), _span_at(src_loc_at), 0, 0)

    def ranks(self, *, src_loc_at: int = 0) -> Value:
        """`ranks()`: every rank of the team."""
        return _call("ranks", (), _span_at(src_loc_at), 0, 0)

    def range(self, *args: ExprLike, src_loc_at: int = 0) -> Value:
        """`range(stop)`, `range(start, stop)`, `range(start, stop, step)`."""
        return _call("range", args, _span_at(src_loc_at), 1, 3)

    def len(self, value: ExprLike, *, src_loc_at: int = 0) -> Value:
        """`len(x)` of a sequence (`peers()`, `range(...)`, a list)."""
        return _call("len", (value,), _span_at(src_loc_at), 1, 1)

    # -- statements
    def for_(self, iterable: ExprLike, *, name: str | None = None,
             src_loc_at: int = 0) -> _LoopBlock:
        """`with k.for_(iterable) as i:` is `for i in iterable:` (sequential)."""
        return self._loop("for", iterable, name, _span_at(src_loc_at))

    def if_(self, cond: ExprLike, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.if_(cond):` is `if cond:`."""
        return self._cond("if", cond, _span_at(src_loc_at))

    def elif_(self, cond: ExprLike, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.elif_(cond):` right after an `if_`/`elif_` block is `elif cond:`."""
        return self._cond("elif", cond, _span_at(src_loc_at))

    def else_(self, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.else_():` right after an `if_`/`elif_` block is `else:`."""
        return self._cond("else", None, _span_at(src_loc_at))

    def pass_(self, *, src_loc_at: int = 0) -> None:
        """`pass`: adds nothing (the IR has no `pass`; an empty body prints as one)."""
        self._top("`pass`", _span_at(src_loc_at))

    # -- machinery
    def _top(self, what: str, span: Span) -> _Frame:
        if self._state != "open":
            when = "has not started" if self._state == "new" else "has ended"
            _fail("E002", f"{what} is outside {self._title}", span,
                  f"its `with` block {when}", secondary=[(self._span, f"{self._title}")])
        return self._frames[-1]

    def _add(self, stmt: nodes.Stmt) -> None:
        top = self._frames[-1]
        top.body.append(stmt)
        top.chain = False

    def _in_scope(self) -> dict[str, Span | None]:
        return {f.var: f.span for f in self._frames if f.var is not None}

    def _expr(self, value: object, what: str, span: Span) -> nodes.Expr:
        expr = _expr_of(value, what, span)
        self._check_names(expr, span)
        return expr

    def _check_names(self, node: nodes.Expr | nodes.Region, span: Span) -> None:
        bound = self._in_scope()
        for ref in _walk_names(node):
            if isinstance(ref, nodes.Var) and ref.name not in bound:
                _fail("E002", f"loop variable `{ref.name}` is used outside its `with` block",
                      span, f"`{ref.name}` is not bound here", secondary=[(ref.span, "bound here")])
            if isinstance(ref, nodes.ParamRef):
                self._protocol._check_param_ref(ref, span)

    def _loop(self, kind: str, iterable: ExprLike, name: str | None, span: Span) -> _LoopBlock:
        self._top(f"`{kind}`", span)
        head = self._expr(iterable, "the iterable", span)
        return _LoopBlock(self, _Frame(kind, span, head=head, name=name))

    def _cond(self, kind: str, cond: ExprLike | None, span: Span) -> _CondBlock:
        self._top(f"`{kind}`", span)
        head = None if kind == "else" else self._expr(cond, "the condition", span)
        return _CondBlock(self, _Frame(kind, span, head=head))

    def _push(self, frame: _Frame) -> None:
        self._top(f"`{frame.kind}`", frame.span)
        if frame.entered:
            _fail("E002", f"this `{frame.kind}` block was already used", frame.span,
                  "entered again", help="call the method again for a new block")
        frame.entered = True

    def _enter_loop(self, frame: _Frame, user: FrameType) -> Value:
        self._push(frame)
        self._check_nesting(frame)
        frame.var = self._protocol._loop_var(frame.name, _with_target(user), self._in_scope(),
                                             frame.span)
        self._frames.append(frame)
        return Value(nodes.Var(name=frame.var, span=frame.span))

    def _enter_cond(self, frame: _Frame) -> None:
        self._push(frame)
        if frame.kind != "if" and not self._frames[-1].chain:
            _fail("E002", f"`{frame.kind}_` must directly follow an `if_` or `elif_` block",
                  frame.span, f"no `if_` block right before this `{frame.kind}_`",
                  help="put it right after the `with k.if_(...):` block it continues")
        self._frames.append(frame)

    def _check_nesting(self, frame: _Frame) -> None:
        """Kernels check where issuer blocks may go."""

    def _exit(self, frame: _Frame, *, ok: builtins.bool) -> None:
        if not self._frames or self._frames[-1] is not frame:
            _fail("E002", f"`{frame.kind}` block closed out of order", frame.span,
                  "closed out of order", help="use the blocks as `with` statements")
        self._frames.pop()
        parent = self._frames[-1]
        if not ok:  # an exception leaves the block: drop it
            parent.chain = False
            return
        self._close(frame, parent)

    def _close(self, frame: _Frame, parent: _Frame) -> None:
        body = _body(frame)
        if frame.kind == "for":
            assert frame.var is not None and frame.head is not None
            self._add(nodes.For(var=frame.var, iter=frame.head, body=body, span=frame.span))
        elif frame.kind in ("lanes", "warps", "blocks"):
            assert frame.var is not None and frame.head is not None
            self._add(nodes.IssuerBlock(kind=nodes.IssuerKind(frame.kind), var=frame.var,
                                     iter=frame.head, body=body, span=frame.span))
        elif frame.kind == "if":
            assert frame.head is not None
            self._add(nodes.If(cond=frame.head, body=body, span=frame.span))
            parent.chain = True
        else:
            tail = body
            if frame.kind == "elif":
                assert frame.head is not None
                tail = (nodes.If(cond=frame.head, body=body, span=frame.span),)
            last = parent.body[-1]
            assert isinstance(last, nodes.If)
            parent.body[-1] = _attach(last, tail)
            parent.chain = frame.kind == "elif"


def _body(frame: _Frame) -> tuple[nodes.Stmt, ...]:
    return tuple(frame.body)


def _attach(node: nodes.If, orelse: tuple[nodes.Stmt, ...]) -> nodes.If:
    """`node` with `orelse` as the `else` of the last `elif` of its chain."""
    if node.orelse:
        tail = node.orelse[0]
        assert len(node.orelse) == 1 and isinstance(tail, nodes.If)
        orelse = (_attach(tail, orelse),)
    return nodes.If(cond=node.cond, body=node.body, orelse=orelse, span=node.span)


class Kernel(_Scope):
    """`with p.kernel(name, threads=T) as k:` — the statements of one kernel."""

    _KIND: ClassVar[str] = "kernel"

    def __init__(self, protocol: Protocol, name: str, threads: nodes.Expr,
                 blocks: nodes.Expr | None, span: Span) -> None:
        super().__init__(protocol, f"kernel `{name}`", span)
        self.name = name
        self._threads = threads
        self._blocks = blocks

    def _finish(self, body: tuple[nodes.Stmt, ...]) -> None:
        self._protocol._kernels.append(nodes.Kernel(name=self.name, threads=self._threads,
                                                 blocks=self._blocks, body=body, span=self._span))

    # -- issuer blocks
    def lanes(self, iterable: ExprLike, *, name: str | None = None,
              src_loc_at: int = 0) -> _LoopBlock:
        """`with k.lanes(it) as x:` is `lanes x in it:` (one thread per value)."""
        return self._loop("lanes", iterable, name, _span_at(src_loc_at))

    def warps(self, iterable: ExprLike, *, name: str | None = None,
              src_loc_at: int = 0) -> _LoopBlock:
        """`with k.warps(it) as w:` is `warps w in it:` (one warp per value)."""
        return self._loop("warps", iterable, name, _span_at(src_loc_at))

    def blocks(self, iterable: ExprLike, *, name: str | None = None,
               src_loc_at: int = 0) -> _LoopBlock:
        """`with k.blocks(it) as b:` is `blocks b in it:` (kernel top level only)."""
        return self._loop("blocks", iterable, name, _span_at(src_loc_at))

    def _check_nesting(self, frame: _Frame) -> None:
        inner = self._frames[1:]
        if frame.kind == "blocks" and inner:
            _fail("E002", f"`blocks` must be at the top level of {self._title}", frame.span,
                  "nested issuer block", secondary=[(inner[-1].span,
                                                     f"inside this `{inner[-1].kind}`")])
        outer = {"lanes": ("lanes",), "warps": ("lanes", "warps")}.get(frame.kind, ())
        for f in reversed(inner):
            if f.kind in outer:
                _fail("E002", f"`{frame.kind}` cannot be nested inside `{f.kind}`", frame.span,
                      "nested issuer block", secondary=[(f.span, f"inside this `{f.kind}`")])

    # -- operations
    def put(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`put(peer, dst=, src=, queue="auto", signal="none", aggregate=False,
        signal_per_copy=False, mode="auto", count=None)`: local `src` to `peer`'s `dst`."""
        self._op(OpKind.PUT, args, kwargs, _span_at(src_loc_at))

    def get(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`get(peer, dst=, src=, queue="auto", signal="none", aggregate=False, mode="auto")`."""
        self._op(OpKind.GET, args, kwargs, _span_at(src_loc_at))

    def copy(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`copy(dst=, src=)`: a local copy on the compute units."""
        self._op(OpKind.COPY, args, kwargs, _span_at(src_loc_at))

    def commit(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`commit(peer, queue="auto")`: ring the doorbell for aggregate ops."""
        self._op(OpKind.COMMIT, args, kwargs, _span_at(src_loc_at))

    def quiet(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`quiet()`, `quiet(peer)` or `quiet(peer, queue=q)`: wait until drained."""
        self._op(OpKind.QUIET, args, kwargs, _span_at(src_loc_at))

    def wait_signal(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`wait_signal(src, queue="auto", expected=None)` (None: computed)."""
        self._op(OpKind.WAIT_SIGNAL, args, kwargs, _span_at(src_loc_at))

    def wait_count(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`wait_count(counter, expected=None)` (None: every byte counted this epoch)."""
        self._op(OpKind.WAIT_COUNT, args, kwargs, _span_at(src_loc_at))

    def reset_count(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`reset_count(counter)`: zero this rank's counter (see E027 before using it)."""
        self._op(OpKind.RESET_COUNT, args, kwargs, _span_at(src_loc_at))

    def barrier(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`barrier()`: every rank of the team, all blocks."""
        self._op(OpKind.BARRIER, args, kwargs, _span_at(src_loc_at))

    def fence(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`fence()`: order earlier stores before later ops."""
        self._op(OpKind.FENCE, args, kwargs, _span_at(src_loc_at))

    def _op(self, name: OpKind, args: Sequence[object], kwargs: Mapping[str, object],
            span: Span) -> None:
        self._top(f"`{name}`", span)
        given = [Arg(None, a, span) for a in args] + [Arg(k, v, span) for k, v in kwargs.items()]
        bound, diags = bind(name, given, span)
        if diags:
            raise DiagnosticError(diags)
        kinds = {p.name: p.kind for p in SIGNATURES[name]}
        values = {key: self._arg(kinds[key], key, arg.value, span) for key, arg in bound.items()}
        self._add(make_op(name, values, span))

    def _arg(self, kind: str, key: str, value: object, span: Span) -> object:
        if kind == "region":
            return self._region(key, value, span)
        if kind == "queue" and (value is None or (isinstance(value, str) and value == "auto")):
            return None
        if kind in ("signal", "mode"):
            return _choice(kind, value, span)
        if kind == "bool":
            if not isinstance(value, builtins.bool):
                _fail("E002", f"`{key}=` must be `True` or `False`", span,
                      f"{_describe(value)} given")
            return value
        if kind == "counter":
            return self._protocol._counter_name(key, value, span)
        return self._expr(value, f"`{key}`", span)

    def _region(self, key: str, value: object, span: Span) -> nodes.Region:
        region = self._protocol._own_region(key, value, span)
        if region.init:
            _fail("E002", "`init(...)` is only allowed in `ensure`", region.span or span,
                  "not in a kernel")
        if region.rank is not None:
            _fail("E002", "`w@p` is only allowed in `ensure`", region.span or span,
                  "not in a kernel", help="in kernels, name the peer as the op's first argument")
        result = region.to_ir(span)
        self._check_names(result, span)
        return result


def _choice(kind: str, value: object, span: Span) -> nodes.SignalKind | nodes.Mode:
    enum = nodes.SignalKind if kind == "signal" else nodes.Mode
    if isinstance(value, enum):
        return value
    choices = CHOICES[kind]
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(f'"{c}"' for c in choices)
        _fail("E002", f"`{kind}=` must be one of {listed}", span,
              f"{_describe(value)} given", help=_suggest(value, choices))
    return enum(value)


def _suggest(value: object, choices: Sequence[str]) -> str | None:
    import difflib

    if not isinstance(value, str):
        return None
    close = difflib.get_close_matches(value, list(choices), n=1)
    return f'did you mean `"{close[0]}"`?' if close else None


class Ensure(_Scope):
    """`with p.ensure() as e:` — the postconditions, checked after the last kernel."""

    _KIND: ClassVar[str] = "ensure"

    def __init__(self, protocol: Protocol, span: Span) -> None:
        super().__init__(protocol, "`ensure`", span)

    def _finish(self, body: tuple[nodes.Stmt, ...]) -> None:
        self._protocol._ensure = body
        self._protocol._ensure_span = self._span

    def check(self, condition: Condition, *, src_loc_at: int = 0) -> None:
        """`e.check(region == region)` (or `!=`): a postcondition."""
        span = _span_at(src_loc_at)
        self._top("`check`", span)
        if not isinstance(condition, Condition):
            _fail("E002", f"`check` needs a comparison of regions, not {_describe(condition)}",
                  span, "not a postcondition",
                  help="write `e.check(recv == cg.init(send.at(0)))`")
        left = self._side(condition.left, span)
        right = self._side(condition.right, span)
        self._add(nodes.Check(op=condition.op, left=left, right=right, span=span))

    def _side(self, region: Region, span: Span) -> nodes.Region:
        result = self._protocol._own_region("the comparison", region, span).to_ir(span)
        self._check_names(result, span)
        return result


# ----------------------------------------------------------------------------- protocol

_MISSING: Final = object()


def _param_type(value: object, span: Span) -> nodes.ParamType:
    if isinstance(value, nodes.ParamType):
        return value
    found: dict[object, nodes.ParamType] = {
        "bytes": nodes.ParamType.BYTES, builtins.bytes: nodes.ParamType.BYTES,
        "int": nodes.ParamType.INT, builtins.int: nodes.ParamType.INT,
    }
    try:
        return found[value]
    except (KeyError, TypeError):
        _fail("E002", f"a parameter type is `cg.bytes` or `cg.int_`, not {_describe(value)}",
              span, "unknown parameter type")


class Protocol:
    """A protocol under construction; `ir` gives the frozen `ccogen.ir.nodes.Protocol`."""

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __init__(self, name: str, *, team: nodes.Team | None = None, doc: str | None = None,
                 src_loc_at: int = 0) -> None:
        span = _span_at(src_loc_at)
        if doc is not None and not isinstance(doc, str):
            _fail("E002", f"`doc=` must be a string, not {_describe(doc)}", span, "not a string")
        self._setup(_check_name(name, "protocol", span), span, doc)
        if team is not None:
            self._set_team(team, span)

    def _setup(self, name: str, span: Span | None, doc: str | None) -> None:
        self._name = name
        self._span = span
        self._doc = doc
        self._team = nodes.Team()
        self._queues: nodes.Expr | None = nodes.Const(value=1)
        self._queues_span: Span | None = None
        self._launches = nodes.LaunchOrder.BACK_TO_BACK
        self._launches_span: Span | None = None
        self._params: list[nodes.Param] = []
        self._windows: list[nodes.Window] = []
        self._counters: list[nodes.Counter] = []
        self._kernels: list[nodes.Kernel] = []
        self._ensure: tuple[nodes.Stmt, ...] | None = None
        self._ensure_span: Span | None = None
        self._declared: dict[str, tuple[str, Span | None]] = {}  # params, windows, counters
        self._kernel_names: dict[str, Span | None] = {}
        self._loop_names: set[str] = set()
        self._fresh = 0
        self._open: _Scope | None = None
        self._handles: dict[str, Value | Window | Counter] = {}

    @classmethod
    def from_ir(cls, protocol: nodes.Protocol) -> Protocol:
        """A builder wrapping an existing IR protocol (say, a parsed one); it can grow."""
        self = cls.__new__(cls)
        self._setup(protocol.name, protocol.span, protocol.doc)
        self._team = protocol.team
        self._queues, self._queues_span = protocol.queues, protocol.queues_span
        self._launches = protocol.between_launches
        self._launches_span = protocol.between_launches_span
        for p in protocol.params:
            self._record("parameter", p, Value(nodes.ParamRef(name=p.name, span=p.span)))
            self._params.append(p)
        for w in protocol.windows:
            self._record("window", w, Window(self, w.name, w.span))
            self._windows.append(w)
        for c in protocol.counters:
            self._record("counter", c, Counter(self, c.name, c.span))
            self._counters.append(c)
        for k in protocol.kernels:
            self._kernel_names[k.name] = k.span
            self._kernels.append(k)
        self._ensure = protocol.ensure or None
        self._loop_names = set(_loop_vars(protocol))
        return self

    def _record(self, what: str, node: nodes.Param | nodes.Window | nodes.Counter,
                handle: Value | Window | Counter) -> None:
        self._declared[node.name] = (what, node.span)
        self._handles[node.name] = handle

    # -- reading
    @property
    def name(self) -> str:
        return self._name

    @property
    def doc(self) -> str | None:
        return self._doc

    @property
    def team(self) -> nodes.Team:
        return self._team

    @team.setter
    def team(self, team: nodes.Team) -> None:
        self._set_team(team, _span_at(0))

    @property
    def nranks(self) -> Value:
        """`nranks`: the team size (for window sizes and other declarations)."""
        return Value(nodes.NRanks(span=_span_at(0)))

    @property
    def params(self) -> Mapping[str, Value]:
        return MappingProxyType({k: v for k, v in self._handles.items() if isinstance(v, Value)})

    @property
    def windows(self) -> Mapping[str, Window]:
        return MappingProxyType({k: v for k, v in self._handles.items() if isinstance(v, Window)})

    @property
    def counters(self) -> Mapping[str, Counter]:
        return MappingProxyType({k: v for k, v in self._handles.items()
                                 if isinstance(v, Counter)})

    @property
    def ir(self) -> nodes.Protocol:
        """The frozen IR of everything built so far."""
        return self._build(_span_at(0))

    def to_source(self, *, src_loc_at: int = 0) -> str:
        """The canonical `.cco` text of the protocol."""
        from ccogen.syntax.printer import print_protocol

        return print_protocol(self._build(_span_at(src_loc_at)))

    def __eq__(self, other: object) -> builtins.bool:
        if isinstance(other, Protocol):
            span = _span_at(0)
            return self._build(span) == other._build(span)
        if isinstance(other, nodes.Protocol):
            return self._build(_span_at(0)) == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"<ccogen.Protocol {self._name!r}>"

    def _build(self, span: Span) -> nodes.Protocol:
        if self._open is not None:
            _fail("E002", f"{self._open._title} is not finished", span, "read here",
                  secondary=[(self._open._span, "its `with` block is still open")])
        return nodes.Protocol(
            name=self._name, params=tuple(self._params), doc=self._doc, team=self._team,
            queues=self._queues, windows=tuple(self._windows), counters=tuple(self._counters),
            kernels=tuple(self._kernels), ensure=self._ensure or (), span=self._span,
            queues_span=self._queues_span, between_launches=self._launches,
            between_launches_span=self._launches_span)

    # -- declarations
    def param(self, name: str, type: object, *, default: object = _MISSING,
              src_loc_at: int = 0) -> Value:
        """`name: type = default` in the protocol's header; the `Value` of the parameter."""
        span = _span_at(src_loc_at)
        self._declare(name, "parameter", span)
        kind = _param_type(type, span)
        if default is _MISSING:
            _fail("E002", f"parameter `{name}` needs a default", span, "no `default=`",
                  help=f'write `p.param("{name}", ..., default=...)`')
        value = self._decl_expr(default, "`default`", span)
        self._params.append(nodes.Param(name=name, type=kind, default=value, span=span))
        handle = Value(nodes.ParamRef(name=name, span=span))
        self._register(name, "parameter", span, handle)
        return handle

    def between_launches(self, order: str, *, src_loc_at: int = 0) -> None:
        """`between_launches: host_sync` (or `back_to_back`, the default when not called)."""
        span = _span_at(src_loc_at)
        self._top_level("between_launches", span)
        if self._launches_span is not None:
            _fail("E002", "`between_launches` declared twice", span, "declared again",
                  secondary=[(self._launches_span, "first declared here")])
        orders = {o.value: o for o in nodes.LaunchOrder}
        if not isinstance(order, str) or order not in orders:
            _fail("E002", f"unknown launch order {order!r}", span,
                  "expected \"host_sync\" or \"back_to_back\"")
        self._launches, self._launches_span = orders[order], span

    def queues(self, count: ExprLike | str, *, src_loc_at: int = 0) -> None:
        """`queues count` or `queues auto` (`count="auto"`); 1 when not called."""
        span = _span_at(src_loc_at)
        self._top_level("queues", span)
        if self._queues_span is not None:
            _fail("E002", "`queues` declared twice", span, "declared again",
                  secondary=[(self._queues_span, "first declared here")])
        auto = isinstance(count, str) and count == "auto"
        self._queues = None if auto else self._decl_expr(count, "the queue count", span)
        self._queues_span = span

    def window(self, name: str, size: ExprLike, *, align: ExprLike | None = None,
               src_loc_at: int = 0) -> Window:
        """`window name: size` (`, align=A`): a symmetric buffer of `size` bytes."""
        span = _span_at(src_loc_at)
        self._declare(name, "window", span)
        value = self._decl_expr(size, "the window size", span)
        aligned = None if align is None else self._decl_expr(align, "`align`", span)
        self._windows.append(nodes.Window(name=name, size=value, align=aligned, span=span))
        handle = Window(self, name, span)
        self._register(name, "window", span, handle)
        return handle

    def counter(self, name: str, *, src_loc_at: int = 0) -> Counter:
        """`counter name`: a counted-write counter on every rank."""
        span = _span_at(src_loc_at)
        self._declare(name, "counter", span)
        self._counters.append(nodes.Counter(name=name, span=span))
        handle = Counter(self, name, span)
        self._register(name, "counter", span, handle)
        return handle

    def kernel(self, name: str, *, threads: ExprLike | None = None,
               blocks: ExprLike | None = None, src_loc_at: int = 0) -> Kernel:
        """`with p.kernel(name, threads=T, blocks=B) as k:` is `kernel name(...):`."""
        span = _span_at(src_loc_at)
        _check_name(name, "kernel", span)
        if threads is None:
            _fail("E002", f"kernel `{name}` needs `threads=`", span, "no thread count",
                  help=f'write `p.kernel("{name}", threads=32)`')
        count = self._decl_expr(threads, "`threads`", span)
        grid = None if blocks is None else self._decl_expr(blocks, "`blocks`", span)
        return Kernel(self, name, count, grid, span)

    def ensure(self, *, src_loc_at: int = 0) -> Ensure:
        """`with p.ensure() as e:` is `ensure:`."""
        return Ensure(self, _span_at(src_loc_at))

    # -- checks shared with the scopes
    def _set_team(self, team: object, span: Span) -> None:
        if not isinstance(team, nodes.Team):
            _fail("E002", f"`team` must be `cg.lsa(...)` or `cg.world(...)`, not "
                  f"{_describe(team)}", span, "not a team")
        if team.size is not None:
            self._check_decl_names(team.size, team.span or span)
        self._team = team

    def _top_level(self, what: str, span: Span) -> None:
        if self._open is not None:
            _fail("E002", f"`{what}` cannot be declared inside {self._open._title}", span,
                  "inside a `with` block", secondary=[(self._open._span, "the block starts here")],
                  help="declare parameters, windows, counters and queues before the kernels")

    def _declare(self, name: str, what: str, span: Span) -> None:
        self._top_level(what, span)
        _check_name(name, what, span)
        if name in self._declared:
            _fail("E002", f"`{name}` is declared twice", span, f"{what} declared again",
                  secondary=[(self._declared[name][1], "first declared here")])
        if name in self._loop_names:
            _fail("E002", f"`{name}` is already a loop variable", span, f"cannot name a {what}",
                  help="choose another name")

    def _register(self, name: str, what: str, span: Span,
                  handle: Value | Window | Counter) -> None:
        self._declared[name] = (what, span)
        self._handles[name] = handle

    def _decl_expr(self, value: object, what: str, span: Span) -> nodes.Expr:
        expr = _expr_of(value, what, span)
        self._check_decl_names(expr, span)
        return expr

    def _check_decl_names(self, expr: nodes.Expr, span: Span) -> None:
        for ref in _walk_names(expr):
            if isinstance(ref, nodes.Var):
                _fail("E002", f"loop variable `{ref.name}` is used outside its `with` block",
                      span, f"`{ref.name}` is not bound here", secondary=[(ref.span, "bound here")])
            self._check_param_ref(ref, span)

    def _check_param_ref(self, ref: nodes.ParamRef | nodes.Var, span: Span) -> None:
        known = self._declared.get(ref.name)
        if known is None or known[0] != "parameter":
            _fail("E002", f"parameter `{ref.name}` is not declared in protocol `{self._name}`",
                  span, "from another protocol",
                  help="use the values that this protocol's `p.param(...)` returned")

    def _counter_name(self, key: str, value: object, span: Span) -> str:
        if isinstance(value, Counter):
            if value._protocol is not self:
                _fail("E002", f"counter `{value.name}` belongs to another protocol", span,
                      "from another protocol")
            return value.name
        if not isinstance(value, str):
            _fail("E002", f"`{key}` must be a counter, not {_describe(value)}", span,
                  "expected a counter", help='declare one with `p.counter("name")`')
        if self._declared.get(value, ("", None))[0] != "counter":
            _fail("E002", f"`{value}` is not a declared counter", span, "expected a counter",
                  help=f'declare it with `p.counter("{value}")`')
        return value

    def _own_region(self, key: str, value: object, span: Span) -> Region:
        region = _as_region(value)
        if region is None:
            _fail("E002", f"`{key}` must be a region of a window (`w` or `w[a:b]`), not "
                  f"{_describe(value)}", span, "not a region")
        if region.window._protocol is not self:
            _fail("E002", f"window `{region.window.name}` belongs to another protocol", span,
                  "from another protocol")
        return region

    def _open_scope(self, scope: _Scope) -> None:
        if self._open is not None:
            _fail("E002", f"{scope._title} cannot start inside {self._open._title}", scope._span,
                  "starts here", secondary=[(self._open._span, "still open")])
        if isinstance(scope, Kernel) and scope.name in self._kernel_names:
            _fail("E002", f"`{scope.name}` is declared twice", scope._span,
                  "kernel declared again",
                  secondary=[(self._kernel_names[scope.name], "first declared here")])
        if isinstance(scope, Ensure) and self._ensure is not None:
            _fail("E002", "`ensure` declared twice", scope._span, "declared again",
                  secondary=[(self._ensure_span, "first declared here")])
        if isinstance(scope, Kernel):
            self._kernel_names[scope.name] = scope._span
        self._open = scope

    def _close_scope(self, scope: _Scope, body: tuple[nodes.Stmt, ...] | None) -> None:
        self._open = None
        if body is not None:
            scope._finish(body)
        elif isinstance(scope, Kernel):  # abandoned by an exception: the name is free again
            del self._kernel_names[scope.name]

    def _loop_var(self, given: str | None, inferred: str | None,
                  in_scope: Mapping[str, Span | None], span: Span) -> str:
        """The loop variable's name: `name=`, else the `with` target, else `i0`, `i1`..."""
        if given is not None:
            chosen = self._check_loop_name(given, in_scope, span)
        elif inferred is not None and self._loop_name_free(inferred, in_scope):
            chosen = inferred
        else:
            chosen = self._fresh_name(in_scope)
        self._loop_names.add(chosen)
        return chosen

    def _loop_name_free(self, name: str, in_scope: Mapping[str, Span | None]) -> builtins.bool:
        return _name_ok(name) and name not in self._declared and name not in in_scope

    def _fresh_name(self, in_scope: Mapping[str, Span | None]) -> str:
        for n in itertools.count(self._fresh):
            if self._loop_name_free(f"i{n}", in_scope):
                self._fresh = n + 1
                return f"i{n}"
        raise AssertionError("unreachable")

    def _check_loop_name(self, name: str, in_scope: Mapping[str, Span | None],
                         span: Span) -> str:
        _check_name(name, "loop variable", span)
        if name in in_scope:
            shadowed = in_scope[name]
        elif name in self._declared:
            shadowed = self._declared[name][1]
        else:
            return name
        _fail("E002", f"loop variable `{name}` shadows another name", span, "already defined",
              help="choose another name", secondary=[(shadowed, "defined here")])


def _loop_vars(protocol: nodes.Protocol) -> Iterator[str]:
    """The names of every loop variable of an IR protocol."""
    stack: list[nodes.Stmt] = [s for k in protocol.kernels for s in k.body] + list(protocol.ensure)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, nodes.For | nodes.IssuerBlock):
            yield stmt.var
        if isinstance(stmt, nodes.For | nodes.IssuerBlock | nodes.If):
            stack.extend(stmt.body)
        if isinstance(stmt, nodes.If):
            stack.extend(stmt.orelse)


def __getattr__(name: str) -> object:
    """`ccogen.builder.int` is `int_` (a module attribute would shadow `int` in this file)."""
    if name == "int":
        return int_
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Condition",
    "Counter",
    "Ensure",
    "GiB",
    "Kernel",
    "KiB",
    "MiB",
    "Protocol",
    "Region",
    "Value",
    "Window",
    "abs",
    "and_",
    "bytes",
    "init",
    "int_",
    "lsa",
    "max",
    "min",
    "not_",
    "or_",
    "where",
    "world",
]
