"""`Protocol`: declarations, kernels and `ensure` under construction; `ir` freezes them."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import ClassVar, Final

from ccogen.builder.names import check_name, name_ok
from ccogen.builder.scopes import Ensure, Kernel, Require, Scope
from ccogen.builder.spans import span_at
from ccogen.builder.values import (
    Counter,
    ElementType,
    ExprLike,
    Region,
    Shape,
    Value,
    Window,
    as_region,
    describe,
    expr_of,
    fail,
    walk_names,
)
from ccogen.ir import nodes
from ccogen.ir.dtype import DTYPE_NAMES, DType
from ccogen.source import Span

# ----------------------------------------------------------------------------- protocol

_MISSING: Final = object()


def _param_type(value: object, span: Span) -> nodes.ParamType:
    if isinstance(value, nodes.ParamType):
        return value
    found: dict[object, nodes.ParamType] = {
        "bytes": nodes.ParamType.BYTES, builtins.bytes: nodes.ParamType.BYTES,
        "int": nodes.ParamType.INT, builtins.int: nodes.ParamType.INT,
        "dtype": nodes.ParamType.DTYPE,
    }
    try:
        return found[value]
    except (KeyError, TypeError):
        fail("E002", "a parameter type is `cg.bytes`, `cg.int_` or `cg.dtype`, not "
             f"{describe(value)}", span, "unknown parameter type")


def _dtype_value(value: object, span: Span) -> DType:
    """A concrete element type: `cg.bf16`, `DType.BF16` or `"bf16"`."""
    if isinstance(value, ElementType) and isinstance(value.spec, DType):
        return value.spec
    if isinstance(value, str) and value in DTYPE_NAMES:
        return DType(value)
    fail("E002", f"an element type is one of {', '.join(DTYPE_NAMES)}, not {describe(value)}",
         span, "not an element type", help="write `cg.bf16` (or another `cg.` element type)")


class Protocol:
    """A protocol under construction; `ir` gives the frozen `ccogen.ir.nodes.Protocol`."""

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __init__(self, name: str, *, team: nodes.Team | None = None, doc: str | None = None,
                 src_loc_at: int = 0) -> None:
        span = span_at(src_loc_at)
        if doc is not None and not isinstance(doc, str):
            fail("E002", f"`doc=` must be a string, not {describe(doc)}", span, "not a string")
        self._setup(check_name(name, "protocol", span), span, doc)
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
        self._buffers: list[nodes.Buffer] = []
        self._counters: list[nodes.Counter] = []
        self._kernels: list[nodes.Kernel] = []
        self._ensure: tuple[nodes.Stmt, ...] | None = None
        self._ensure_span: Span | None = None
        self._require: tuple[nodes.Stmt, ...] | None = None
        self._declared: dict[str, tuple[str, Span | None]] = {}  # params, windows, counters
        self._kernel_names: dict[str, Span | None] = {}
        self._loop_names: set[str] = set()
        self._fresh = 0
        self._open: Scope | None = None
        self._handles: dict[str, Value | Window | Counter | ElementType] = {}

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
            ref = nodes.ParamRef(name=p.name, span=p.span)
            handle: Value | ElementType = (ElementType(ref, self) if p.type is
                                           nodes.ParamType.DTYPE else Value(ref))
            self._record("parameter", p, handle)
            self._params.append(p)
        for w in protocol.windows:
            self._record("window", w, Window(self, w.name, w.span))
            self._windows.append(w)
        for b in protocol.buffers:
            self._record("buffer", b, Window(self, b.name, b.span, buffer=True))
            self._buffers.append(b)
        for c in protocol.counters:
            self._record("counter", c, Counter(self, c.name, c.span))
            self._counters.append(c)
        for k in protocol.kernels:
            self._kernel_names[k.name] = k.span
            self._kernels.append(k)
        self._ensure = protocol.ensure or None
        self._require = protocol.require or None
        self._loop_names = set(_loop_vars(protocol))
        return self

    def _record(self, what: str, node: nodes.Param | nodes.Window | nodes.Counter | nodes.Buffer,
                handle: Value | Window | Counter | ElementType) -> None:
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
        self._set_team(team, span_at(0))

    @property
    def nranks(self) -> Value:
        """`nranks`: the team size (for window sizes and other declarations)."""
        return Value(nodes.NRanks(span=span_at(0)))

    @property
    def params(self) -> Mapping[str, Value | ElementType]:
        """Integer parameters (`Value`s) and `dtype` parameters (`ElementType`s)."""
        return MappingProxyType({k: v for k, v in self._handles.items()
                                 if isinstance(v, Value | ElementType)})

    @property
    def windows(self) -> Mapping[str, Window]:
        return MappingProxyType({k: v for k, v in self._handles.items()
                                 if isinstance(v, Window) and not v.buffer})

    @property
    def buffers(self) -> Mapping[str, Window]:
        return MappingProxyType({k: v for k, v in self._handles.items()
                                 if isinstance(v, Window) and v.buffer})

    @property
    def counters(self) -> Mapping[str, Counter]:
        return MappingProxyType({k: v for k, v in self._handles.items()
                                 if isinstance(v, Counter)})

    @property
    def ir(self) -> nodes.Protocol:
        """The frozen IR of everything built so far."""
        return self._build(span_at(0))

    def to_source(self, *, src_loc_at: int = 0) -> str:
        """The canonical `.cco` text of the protocol."""
        from ccogen.syntax.printer import print_protocol

        return print_protocol(self._build(span_at(src_loc_at)))

    def __eq__(self, other: object) -> builtins.bool:
        if isinstance(other, Protocol):
            span = span_at(0)
            return self._build(span) == other._build(span)
        if isinstance(other, nodes.Protocol):
            return self._build(span_at(0)) == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"<ccogen.Protocol {self._name!r}>"

    def _build(self, span: Span) -> nodes.Protocol:
        if self._open is not None:
            fail("E002", f"{self._open._title} is not finished", span, "read here",
                  secondary=[(self._open._span, "its `with` block is still open")])
        return nodes.Protocol(
            name=self._name, params=tuple(self._params), doc=self._doc, team=self._team,
            queues=self._queues, windows=tuple(self._windows), counters=tuple(self._counters),
            buffers=tuple(self._buffers), kernels=tuple(self._kernels),
            ensure=self._ensure or (), require=self._require or (), span=self._span,
            queues_span=self._queues_span, between_launches=self._launches,
            between_launches_span=self._launches_span)

    # -- declarations
    def param(self, name: str, type: object, *, default: object = _MISSING,
              src_loc_at: int = 0) -> Value:
        """`name: type = default` in the protocol's header; the `Value` of the parameter
        (an `ElementType` for a `cg.dtype` parameter: `T[n]` sizes a window)."""
        span = span_at(src_loc_at)
        self._declare(name, "parameter", span)
        kind = _param_type(type, span)
        if default is _MISSING:
            fail("E002", f"parameter `{name}` needs a default", span, "no `default=`",
                  help=f'write `p.param("{name}", ..., default=...)`')
        if kind is nodes.ParamType.DTYPE:
            self._params.append(nodes.Param(name=name, type=kind,
                                            default=_dtype_value(default, span), span=span))
            element = ElementType(nodes.ParamRef(name=name, span=span), self)
            self._register(name, "parameter", span, element)
            return element  # type: ignore[return-value]
        value = self._decl_expr(default, "`default`", span)
        self._params.append(nodes.Param(name=name, type=kind, default=value, span=span))
        handle = Value(nodes.ParamRef(name=name, span=span))
        self._register(name, "parameter", span, handle)
        return handle

    def between_launches(self, order: str, *, src_loc_at: int = 0) -> None:
        """`between_launches: host_sync` (or `back_to_back`, the default when not called)."""
        span = span_at(src_loc_at)
        self._top_level("between_launches", span)
        if self._launches_span is not None:
            fail("E002", "`between_launches` declared twice", span, "declared again",
                 secondary=[(self._launches_span, "first declared here")])
        orders = {o.value: o for o in nodes.LaunchOrder}
        if not isinstance(order, str) or order not in orders:
            fail("E002", f"unknown launch order {order!r}", span,
                 "expected \"host_sync\" or \"back_to_back\"")
        self._launches, self._launches_span = orders[order], span

    def queues(self, count: ExprLike | str, *, src_loc_at: int = 0) -> None:
        """`queues count` or `queues auto` (`count="auto"`); 1 when not called."""
        span = span_at(src_loc_at)
        self._top_level("queues", span)
        if self._queues_span is not None:
            fail("E002", "`queues` declared twice", span, "declared again",
                  secondary=[(self._queues_span, "first declared here")])
        auto = isinstance(count, str) and count == "auto"
        self._queues = None if auto else self._decl_expr(count, "the queue count", span)
        self._queues_span = span

    def window(self, name: str, size: ExprLike | Shape, *, align: ExprLike | None = None,
               src_loc_at: int = 0) -> Window:
        """`window name: size` (`, align=A`): a symmetric buffer of `size` bytes; with a
        shape `cg.bf16[n]` (or `T[n]`), `window name: bf16[n]`."""
        span = span_at(src_loc_at)
        self._declare(name, "window", span)
        spec: DType | nodes.ParamRef = DType.U8
        if isinstance(size, Shape):
            spec, value = self._shape(size, span)
        else:
            value = self._decl_expr(size, "the window size", span)
        aligned = None if align is None else self._decl_expr(align, "`align`", span)
        self._windows.append(nodes.Window(name=name, size=value, align=aligned, dtype=spec,
                                          span=span))
        handle = Window(self, name, span)
        self._register(name, "window", span, handle)
        return handle

    def buffer(self, name: str, shape: Shape, *, src_loc_at: int = 0) -> Window:
        """`buffer name: DTYPE[COUNT]`: a local, non-symmetric buffer handed in at each
        launch (`shape` is `cg.bf16[n]` or `T[n]`)."""
        span = span_at(src_loc_at)
        self._declare(name, "buffer", span)
        if not isinstance(shape, Shape):
            fail("E002", f"buffer `{name}` needs an element type and a count, not "
                 f"{describe(shape)}", span, "expected `DTYPE[COUNT]`",
                 help=f'write `p.buffer("{name}", cg.u8[...])` or another element type')
        spec, value = self._shape(shape, span)
        self._buffers.append(nodes.Buffer(name=name, dtype=spec, size=value, span=span))
        handle = Window(self, name, span, buffer=True)
        self._register(name, "buffer", span, handle)
        return handle

    def _shape(self, shape: Shape, span: Span) -> tuple[DType | nodes.ParamRef, nodes.Expr]:
        element = shape.type
        if isinstance(element.spec, nodes.ParamRef) and element._protocol is not self:
            fail("E002", f"parameter `{element.spec.name}` is not declared in protocol "
                 f"`{self._name}`", span, "from another protocol")
        self._check_decl_names(shape.count, span)
        return element.spec, shape.count

    def counter(self, name: str, *, src_loc_at: int = 0) -> Counter:
        """`counter name`: a counted-write counter on every rank."""
        span = span_at(src_loc_at)
        self._declare(name, "counter", span)
        self._counters.append(nodes.Counter(name=name, span=span))
        handle = Counter(self, name, span)
        self._register(name, "counter", span, handle)
        return handle

    def kernel(self, name: str, *, threads: ExprLike | None = None,
               blocks: ExprLike | None = None, src_loc_at: int = 0) -> Kernel:
        """`with p.kernel(name, threads=T, blocks=B) as k:` is `kernel name(...):`."""
        span = span_at(src_loc_at)
        check_name(name, "kernel", span)
        if threads is None:
            fail("E002", f"kernel `{name}` needs `threads=`", span, "no thread count",
                  help=f'write `p.kernel("{name}", threads=32)`')
        count = self._decl_expr(threads, "`threads`", span)
        grid = None if blocks is None else self._decl_expr(blocks, "`blocks`", span)
        return Kernel(self, name, count, grid, span)

    def ensure(self, *, src_loc_at: int = 0) -> Ensure:
        """`with p.ensure() as e:` is `ensure:`."""
        return Ensure(self, span_at(src_loc_at))

    def require(self, *, src_loc_at: int = 0) -> Require:
        """`with p.require() as r:` is `require:` (run-time values' bounds)."""
        return Require(self, span_at(src_loc_at))

    # -- checks shared with the scopes
    def _set_team(self, team: object, span: Span) -> None:
        if not isinstance(team, nodes.Team):
            fail("E002", f"`team` must be `cg.lsa(...)` or `cg.world(...)`, not "
                  f"{describe(team)}", span, "not a team")
        if team.size is not None:
            self._check_decl_names(team.size, team.span or span)
        self._team = team

    def _top_level(self, what: str, span: Span) -> None:
        if self._open is not None:
            fail("E002", f"`{what}` cannot be declared inside {self._open._title}", span,
                  "inside a `with` block", secondary=[(self._open._span, "the block starts here")],
                  help="declare parameters, windows, counters and queues before the kernels")

    def _declare(self, name: str, what: str, span: Span) -> None:
        self._top_level(what, span)
        check_name(name, what, span)
        if name in self._declared:
            fail("E002", f"`{name}` is declared twice", span, f"{what} declared again",
                  secondary=[(self._declared[name][1], "first declared here")])
        if name in self._loop_names:
            fail("E002", f"`{name}` is already a loop variable", span, f"cannot name a {what}",
                  help="choose another name")

    def _register(self, name: str, what: str, span: Span,
                  handle: Value | Window | Counter | ElementType) -> None:
        self._declared[name] = (what, span)
        self._handles[name] = handle

    def _decl_expr(self, value: object, what: str, span: Span) -> nodes.Expr:
        expr = expr_of(value, what, span)
        self._check_decl_names(expr, span)
        return expr

    def _check_decl_names(self, expr: nodes.Expr, span: Span) -> None:
        for ref in walk_names(expr):
            if isinstance(ref, nodes.Var):
                fail("E002", f"loop variable `{ref.name}` is used outside its `with` block",
                      span, f"`{ref.name}` is not bound here", secondary=[(ref.span, "bound here")])
            self._check_param_ref(ref, span)

    def _check_param_ref(self, ref: nodes.ParamRef | nodes.Var, span: Span) -> None:
        known = self._declared.get(ref.name)
        if known is None or known[0] != "parameter":
            fail("E002", f"parameter `{ref.name}` is not declared in protocol `{self._name}`",
                  span, "from another protocol",
                  help="use the values that this protocol's `p.param(...)` returned")
        if isinstance(self._handles.get(ref.name), ElementType):
            fail("E002", f"`{ref.name}` is an element type, not a number", span,
                 "a `dtype` parameter", help=f"use it as a window's type: `{ref.name}[n]`")

    def _counter_name(self, key: str, value: object, span: Span) -> str:
        if isinstance(value, Counter):
            if value._protocol is not self:
                fail("E002", f"counter `{value.name}` belongs to another protocol", span,
                      "from another protocol")
            return value.name
        if not isinstance(value, str):
            fail("E002", f"`{key}` must be a counter, not {describe(value)}", span,
                  "expected a counter", help='declare one with `p.counter("name")`')
        if self._declared.get(value, ("", None))[0] != "counter":
            fail("E002", f"`{value}` is not a declared counter", span, "expected a counter",
                  help=f'declare it with `p.counter("{value}")`')
        return value

    def _own_region(self, key: str, value: object, span: Span) -> Region:
        region = as_region(value)
        if region is None:
            fail("E002", f"`{key}` must be a region of a window (`w` or `w[a:b]`), not "
                  f"{describe(value)}", span, "not a region")
        if region.window._protocol is not self:
            fail("E002", f"window `{region.window.name}` belongs to another protocol", span,
                  "from another protocol")
        return region

    def _open_scope(self, scope: Scope) -> None:
        if self._open is not None:
            fail("E002", f"{scope._title} cannot start inside {self._open._title}", scope._span,
                  "starts here", secondary=[(self._open._span, "still open")])
        if isinstance(scope, Kernel) and scope.name in self._kernel_names:
            fail("E002", f"`{scope.name}` is declared twice", scope._span,
                  "kernel declared again",
                  secondary=[(self._kernel_names[scope.name], "first declared here")])
        if isinstance(scope, Require) and self._require is not None:
            fail("E002", "`require` declared twice", scope._span, "declared again")
        if isinstance(scope, Ensure) and self._ensure is not None:
            fail("E002", "`ensure` declared twice", scope._span, "declared again",
                  secondary=[(self._ensure_span, "first declared here")])
        if isinstance(scope, Kernel):
            self._kernel_names[scope.name] = scope._span
        self._open = scope

    def _close_scope(self, scope: Scope, body: tuple[nodes.Stmt, ...] | None) -> None:
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
        return name_ok(name) and name not in self._declared and name not in in_scope

    def _fresh_name(self, in_scope: Mapping[str, Span | None]) -> str:
        for n in itertools.count(self._fresh):
            if self._loop_name_free(f"i{n}", in_scope):
                self._fresh = n + 1
                return f"i{n}"
        raise AssertionError("unreachable")

    def _check_loop_name(self, name: str, in_scope: Mapping[str, Span | None],
                         span: Span) -> str:
        check_name(name, "loop variable", span)
        if name in in_scope:
            shadowed = in_scope[name]
        elif name in self._declared:
            shadowed = self._declared[name][1]
        else:
            return name
        fail("E002", f"loop variable `{name}` shadows another name", span, "already defined",
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
