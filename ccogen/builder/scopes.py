"""Kernels and `ensure`: the `with` blocks they open (`for`, `if`, issuer blocks) and
the statements they record (the operations, in kernels; postconditions, in `ensure`)."""

from __future__ import annotations

import builtins
import dis
import functools
import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self

from ccogen.builder.names import check_name
from ccogen.builder.spans import span_at
from ccogen.builder.values import (
    Condition,
    Each,
    ExprLike,
    Reduction,
    Region,
    Value,
    as_region,
    builtin_call,
    describe,
    expr_of,
    fail,
    walk_names,
)
from ccogen.errors import DiagnosticError
from ccogen.ir import nodes
from ccogen.ir.opkind import OpKind
from ccogen.ir.signatures import CHOICES, SIGNATURES, Arg, bind, make_op
from ccogen.source import Span

if TYPE_CHECKING:
    from ccogen.builder.protocol import Protocol


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
    lets: dict[str, Span | None] = field(default_factory=dict)  # names bound by `let`


class _LoopBlock:
    """`with k.for_(...) as i:` and the issuer blocks: entering gives the loop variable."""

    def __init__(self, scope: Scope, frame: _Frame) -> None:
        self._scope = scope
        self._frame = frame

    def __enter__(self) -> Value:
        return self._scope._enter_loop(self._frame, sys._getframe(1))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._scope._exit(self._frame, ok=exc_type is None)


class _CondBlock:
    """`with k.if_(...)`, `k.elif_(...)`, `k.else_()`."""

    def __init__(self, scope: Scope, frame: _Frame) -> None:
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


@functools.lru_cache(maxsize=512)
def _call_targets(code: CodeType) -> Mapping[int, str]:
    """Offsets of calls whose result is stored straight to a plain name (`x = f(...)`)."""
    found: dict[int, str] = {}
    instrs = list(dis.get_instructions(code))
    for cur, nxt in itertools.pairwise(instrs):
        if cur.opname.startswith("CALL") and nxt.opname in _STORES:
            # a frame calling reports the call's offset or its last inline cache entry's
            found[cur.offset] = found[nxt.offset - 2] = str(nxt.argval)
    return found


def _assign_target(frame: FrameType) -> str | None:
    """The NAME of `NAME = k.let(...)` that is calling in `frame`, if any."""
    return _call_targets(frame.f_code).get(frame.f_lasti)


# ----------------------------------------------------------------------------- scopes


class Scope:
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
            fail("E002", f"{self._title} was already built", self._span, "entered again",
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
        return Value(nodes.Me(span=span_at(0)))

    @property
    def launch(self) -> Value:
        """`launch`: the launch's index, usable as `k.launch % K` (a landing slot)."""
        return Value(nodes.Launch(span=span_at(0)))

    @property
    def nranks(self) -> Value:
        """`nranks`: the team size."""
        return Value(nodes.NRanks(span=span_at(0)))

    def peers(self, *, src_loc_at: int = 0) -> Value:
        """`peers()`: every rank but `me`, in increasing order."""
        return builtin_call("peers", (), span_at(src_loc_at), 0, 0)

    def ranks(self, *, src_loc_at: int = 0) -> Value:
        """`ranks()`: every rank of the team."""
        return builtin_call("ranks", (), span_at(src_loc_at), 0, 0)

    def range(self, *args: ExprLike, src_loc_at: int = 0) -> Value:
        """`range(stop)`, `range(start, stop)`, `range(start, stop, step)`."""
        return builtin_call("range", args, span_at(src_loc_at), 1, 3)

    def len(self, value: ExprLike, *, src_loc_at: int = 0) -> Value:
        """`len(x)` of a sequence (`peers()`, `range(...)`, a list)."""
        return builtin_call("len", (value,), span_at(src_loc_at), 1, 1)

    # -- statements
    def for_(self, iterable: ExprLike, *, name: str | None = None,
             src_loc_at: int = 0) -> _LoopBlock:
        """`with k.for_(iterable) as i:` is `for i in iterable:` (sequential)."""
        return self._loop("for", iterable, name, span_at(src_loc_at))

    def if_(self, cond: ExprLike, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.if_(cond):` is `if cond:`."""
        return self._cond("if", cond, span_at(src_loc_at))

    def elif_(self, cond: ExprLike, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.elif_(cond):` right after an `if_`/`elif_` block is `elif cond:`."""
        return self._cond("elif", cond, span_at(src_loc_at))

    def else_(self, *, src_loc_at: int = 0) -> _CondBlock:
        """`with k.else_():` right after an `if_`/`elif_` block is `else:`."""
        return self._cond("else", None, span_at(src_loc_at))

    def pass_(self, *, src_loc_at: int = 0) -> None:
        """`pass`: adds nothing (the IR has no `pass`; an empty body prints as one)."""
        self._top("`pass`", span_at(src_loc_at))

    # -- machinery
    def _top(self, what: str, span: Span) -> _Frame:
        if self._state != "open":
            when = "has not started" if self._state == "new" else "has ended"
            fail("E002", f"{what} is outside {self._title}", span,
                  f"its `with` block {when}", secondary=[(self._span, f"{self._title}")])
        return self._frames[-1]

    def _add(self, stmt: nodes.Stmt) -> None:
        top = self._frames[-1]
        top.body.append(stmt)
        top.chain = False

    def _in_scope(self) -> dict[str, Span | None]:
        found: dict[str, Span | None] = {}
        for f in self._frames:
            if f.var is not None:
                found[f.var] = f.span
            found.update(f.lets)
        return found

    # -- v2: assignments and comprehensions
    def let(self, value: ExprLike, *, name: str | None = None, src_loc_at: int = 0) -> Value:
        """`right = k.let(expr)` is `right = expr`: a name bound for the rest of the block."""
        span = span_at(src_loc_at)
        top = self._top("`let`", span)
        expr = self._expr(value, "the value", span)
        chosen = name if name is not None else _assign_target(sys._getframe(1 + src_loc_at))
        if chosen is None:
            fail("E002", "`let` needs a name", span, "no name",
                 help='write `x = k.let(...)` or `k.let(..., name="x")`')
        if chosen not in top.lets:
            self._protocol._check_loop_name(check_name(chosen, "name", span),
                                            self._in_scope(), span)
            self._protocol._loop_names.add(chosen)
            top.lets[chosen] = span
        self._add(nodes.Assign(var=chosen, value=expr, span=span))
        return Value(nodes.Var(name=chosen, span=span))

    def each(self, iterable: ExprLike, element: object, *, name: str | None = None,
             cond: object = None, src_loc_at: int = 0) -> Each:
        """`[element(v) for v in iterable if cond(v)]`: `element` and `cond` are callables of
        the variable (named after `element`'s parameter, or `name=`)."""
        span = span_at(src_loc_at)
        self._top("`each`", span)
        head = self._expr(iterable, "the iterable", span)
        if not callable(element):
            fail("E002", "`each` takes a function of the variable, e.g. `lambda p: x @ p`",
                 span, f"{describe(element)} given")
        code = getattr(element, "__code__", None)
        guess = code.co_varnames[0] if code is not None and code.co_argcount >= 1 else None
        var = self._protocol._loop_var(name, guess, self._in_scope(), span)
        frame = _Frame("each", span, var=var, entered=True)
        self._frames.append(frame)
        try:
            bound = Value(nodes.Var(name=var, span=span))
            elt = element(bound)
            test = None
            if cond is not None:
                test = self._expr(cond(bound) if callable(cond) else cond, "the condition", span)
            elt_ir = self._each_elt(elt, span)
        finally:
            self._frames.pop()
        return Each(var, head, elt_ir, test, span)

    def _each_elt(self, elt: object, span: Span) -> object:
        region = as_region(elt)
        if region is not None:
            result = self._protocol._own_region("the element", region, span).to_ir(span)
            self._check_names(result, span)
            return result
        return _weight(self, elt, span)

    def _expr(self, value: object, what: str, span: Span) -> nodes.Expr:
        expr = expr_of(value, what, span)
        self._check_names(expr, span)
        return expr

    def _check_names(self, node: object, span: Span) -> None:
        bound = self._in_scope()
        for ref in walk_names(node):
            if isinstance(ref, nodes.Var) and ref.name not in bound:
                fail("E002", f"loop variable `{ref.name}` is used outside its `with` block",
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
            fail("E002", f"this `{frame.kind}` block was already used", frame.span,
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
            fail("E002", f"`{frame.kind}_` must directly follow an `if_` or `elif_` block",
                  frame.span, f"no `if_` block right before this `{frame.kind}_`",
                  help="put it right after the `with k.if_(...):` block it continues")
        self._frames.append(frame)

    def _check_nesting(self, frame: _Frame) -> None:
        """Kernels check where issuer blocks may go."""

    def _exit(self, frame: _Frame, *, ok: builtins.bool) -> None:
        if not self._frames or self._frames[-1] is not frame:
            fail("E002", f"`{frame.kind}` block closed out of order", frame.span,
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


class Kernel(Scope):
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
        return self._loop("lanes", iterable, name, span_at(src_loc_at))

    def warps(self, iterable: ExprLike, *, name: str | None = None,
              src_loc_at: int = 0) -> _LoopBlock:
        """`with k.warps(it) as w:` is `warps w in it:` (one warp per value)."""
        return self._loop("warps", iterable, name, span_at(src_loc_at))

    def blocks(self, iterable: ExprLike, *, name: str | None = None,
               src_loc_at: int = 0) -> _LoopBlock:
        """`with k.blocks(it) as b:` is `blocks b in it:` (kernel top level only)."""
        return self._loop("blocks", iterable, name, span_at(src_loc_at))

    def _check_nesting(self, frame: _Frame) -> None:
        inner = self._frames[1:]
        if frame.kind == "blocks" and inner:
            fail("E002", f"`blocks` must be at the top level of {self._title}", frame.span,
                  "nested issuer block", secondary=[(inner[-1].span,
                                                     f"inside this `{inner[-1].kind}`")])
        outer = {"lanes": ("lanes",), "warps": ("lanes", "warps")}.get(frame.kind, ())
        for f in reversed(inner):
            if f.kind in outer:
                fail("E002", f"`{frame.kind}` cannot be nested inside `{f.kind}`", frame.span,
                      "nested issuer block", secondary=[(f.span, f"inside this `{f.kind}`")])

    # -- operations
    def put(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`put(peer, dst=, src=, queue="auto", signal="none", aggregate=False,
        signal_per_copy=False, mode="auto", count=None)`: local `src` to `peer`'s `dst`."""
        self._op(OpKind.PUT, args, kwargs, span_at(src_loc_at))

    def get(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`get(peer, dst=, src=, queue="auto", signal="none", aggregate=False, mode="auto")`."""
        self._op(OpKind.GET, args, kwargs, span_at(src_loc_at))

    def copy(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`copy(dst=, src=)`: a local copy on the compute units."""
        self._op(OpKind.COPY, args, kwargs, span_at(src_loc_at))

    def commit(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`commit(peer, queue="auto")`: ring the doorbell for aggregate ops."""
        self._op(OpKind.COMMIT, args, kwargs, span_at(src_loc_at))

    def quiet(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`quiet()`, `quiet(peer)` or `quiet(peer, queue=q)`: wait until drained."""
        self._op(OpKind.QUIET, args, kwargs, span_at(src_loc_at))

    def wait_signal(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`wait_signal(src, queue="auto", expected=None)` (None: computed)."""
        self._op(OpKind.WAIT_SIGNAL, args, kwargs, span_at(src_loc_at))

    def wait_count(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`wait_count(counter, expected=None)` (None: every byte counted this epoch)."""
        self._op(OpKind.WAIT_COUNT, args, kwargs, span_at(src_loc_at))

    def reset_count(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`reset_count(counter)`: zero this rank's counter (see E027 before using it)."""
        self._op(OpKind.RESET_COUNT, args, kwargs, span_at(src_loc_at))

    def barrier(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`barrier()`: every rank of the team, all blocks."""
        self._op(OpKind.BARRIER, args, kwargs, span_at(src_loc_at))

    def fence(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`fence()`: order earlier stores before later ops."""
        self._op(OpKind.FENCE, args, kwargs, span_at(src_loc_at))

    def reduce(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`reduce(dst=, srcs=[...], op="sum", weights=None)`: `dst` := the element-wise
        combination of `srcs` (local regions, or a peer's `x @ p`) in list order."""
        self._op(OpKind.REDUCE, args, kwargs, span_at(src_loc_at))

    def signal(self, *args: object, src_loc_at: int = 0, **kwargs: object) -> None:
        """`signal(peer, queue="auto")`: a credit — one increment of the peer's slot
        `[me, queue]` after this issuer's earlier ops on `(peer, queue)`, no data."""
        self._op(OpKind.SIGNAL, args, kwargs, span_at(src_loc_at))

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
                fail("E002", f"`{key}=` must be `True` or `False`", span,
                      f"{describe(value)} given")
            return value
        if kind == "counter":
            return self._protocol._counter_name(key, value, span)
        if kind == "reduce_op":
            if isinstance(value, nodes.ReduceOp):
                return value
            return _choice(kind, value, span)
        if kind == "regions":
            return self._regions(key, value, span)
        if kind == "weights":
            if value is None:
                return None
            return self._weights(key, value, span)
        return self._expr(value, f"`{key}`", span)

    def _regions(self, key: str, value: object, span: Span) -> object:
        if isinstance(value, Each):
            if not isinstance(value.elt, nodes.Region):
                fail("E002", f"`{key}=` lists regions, not numbers", span, "not regions")
            self._no_init(value.elt, span)
            return nodes.ListComp(elt=value.elt, var=value.var, iter=value.iterable,
                                  cond=value.cond, span=value.span)
        if not isinstance(value, list | tuple) or not value:
            fail("E002", f"`{key}=` takes a non-empty list of regions or `k.each(...)`, not "
                 f"{describe(value)}", span, "not a list of regions")
        return tuple(self._region(key, v, span, allow_peer=True) for v in value)

    def _weights(self, key: str, value: object, span: Span) -> object:
        if isinstance(value, Each):
            if isinstance(value.elt, nodes.Region):
                fail("E002", f"`{key}=` lists numbers, not regions", span, "not numbers")
            return nodes.ListComp(elt=value.elt, var=value.var,  # type: ignore[arg-type]
                                  iter=value.iterable, cond=value.cond, span=value.span)
        if not isinstance(value, list | tuple):
            fail("E002", f"`{key}=` takes a list of numbers, not {describe(value)}", span,
                 "not a list")
        return tuple(_weight(self, v, span) for v in value)

    def _no_init(self, region: nodes.Region, span: Span) -> None:
        if region.init:
            fail("E002", "`init(...)` is only allowed in `ensure`", region.span or span,
                 "not in a kernel")

    def _region(self, key: str, value: object, span: Span, *,
                allow_peer: builtins.bool = False) -> nodes.Region:
        region = self._protocol._own_region(key, value, span)
        if region.single:
            fail("E002", "a region is a slice of a window", region.span or span,
                 "an index, not a slice", help="write `w[a:b]`; read one element with "
                 "`cg.load(w, i)`")
        if region.init:
            fail("E002", "`init(...)` is only allowed in `ensure`", region.span or span,
                  "not in a kernel")
        if region.rank is not None and not allow_peer:
            fail("E002", "`w@p` is only allowed in `ensure` and in the `srcs` of `reduce`",
                 region.span or span, "not here",
                 help="in kernels, name the peer as the op's first argument")
        result = region.to_ir(span)
        self._check_names(result, span)
        return result


def _weight(scope: Scope, value: object, span: Span) -> nodes.Expr:
    """A weight: a Python float (finite), or an integer expression."""
    if isinstance(value, float) and not isinstance(value, builtins.bool):
        import math

        if not math.isfinite(value):
            fail("E002", f"a weight must be finite, not {value}", span, "not finite")
        return nodes.Const(value=value, span=span)
    return scope._expr(value, "a weight", span)


def _choice(kind: str, value: object,
            span: Span) -> nodes.SignalKind | nodes.Mode | nodes.ReduceOp:
    enum: type = {"signal": nodes.SignalKind, "mode": nodes.Mode,
                  "reduce_op": nodes.ReduceOp}[kind]
    if isinstance(value, enum):
        return value  # type: ignore[return-value]
    choices = CHOICES[kind]
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(f'"{c}"' for c in choices)
        key = "op" if kind == "reduce_op" else kind
        fail("E002", f"`{key}=` must be one of {listed}", span,
              f"{describe(value)} given", help=_suggest(value, choices))
    return enum(value)  # type: ignore[no-any-return]


def _suggest(value: object, choices: Sequence[str]) -> str | None:
    import difflib

    if not isinstance(value, str):
        return None
    close = difflib.get_close_matches(value, list(choices), n=1)
    return f'did you mean `"{close[0]}"`?' if close else None


class Require(Scope):
    """`with p.require() as r:` — preconditions over the initial contents (`require:`);
    `r.check(cg.chain(0, "<=", cg.load(counts, q), "<=", cap))`."""

    _KIND: ClassVar[str] = "require"

    def __init__(self, protocol: Protocol, span: Span) -> None:
        super().__init__(protocol, "`require`", span)

    def _finish(self, body: tuple[nodes.Stmt, ...]) -> None:
        self._protocol._require = tuple(_initial(s) for s in body)

    def check(self, condition: ExprLike, *, src_loc_at: int = 0) -> None:
        """A precondition: a comparison (or `cg.and_`/`cg.or_`/`cg.not_` of some)."""
        span = span_at(src_loc_at)
        self._top("`check`", span)
        cond = self._expr(condition, "a precondition", span)
        if not isinstance(cond, nodes.Compare | nodes.BoolOp) and not (
                isinstance(cond, nodes.UnaryOp) and cond.op == "not"):
            fail("E002", "expected a condition", span, "not a precondition",
                 help='write a comparison such as `cg.chain(0, "<=", cg.load(counts, q), '
                      '"<=", cap)`')
        self._add(nodes.Require(cond=cond, span=span))


def _initial(node: Any) -> Any:
    """Every `Load` under `node` reads the initial contents (`require` is about them)."""
    import dataclasses

    if isinstance(node, nodes.Load):
        return dataclasses.replace(node, init=True, index=_initial(node.index),
                                   rank=_initial(node.rank))
    if isinstance(node, tuple):
        return tuple(_initial(n) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: _initial(getattr(node, f.name)) for f in dataclasses.fields(node)
                   if f.name != "span"}
        return dataclasses.replace(node, **changes)  # type: ignore[type-var]
    return node


class Ensure(Scope):
    """`with p.ensure() as e:` — the postconditions, checked after the last kernel."""

    _KIND: ClassVar[str] = "ensure"

    def __init__(self, protocol: Protocol, span: Span) -> None:
        super().__init__(protocol, "`ensure`", span)

    def _finish(self, body: tuple[nodes.Stmt, ...]) -> None:
        self._protocol._ensure = body
        self._protocol._ensure_span = self._span

    def check(self, condition: Condition, *, src_loc_at: int = 0) -> None:
        """`e.check(region == region)` (or `!=`): a postcondition."""
        span = span_at(src_loc_at)
        self._top("`check`", span)
        if not isinstance(condition, Condition):
            fail("E002", f"`check` needs a comparison of regions, not {describe(condition)}",
                  span, "not a postcondition",
                  help="write `e.check(recv == cg.init(send.at(0)))`")
        left = self._side(condition.left, span)
        right: nodes.Region | nodes.Reduction
        if isinstance(condition.right, Reduction):
            right = self._reduction(condition.right, span)
        else:
            right = self._side(condition.right, span)
        self._add(nodes.Check(op=condition.op, left=left, right=right, span=span))

    def _reduction(self, r: Reduction, span: Span) -> nodes.Reduction:
        terms: tuple[nodes.Region, ...] | nodes.ListComp
        if isinstance(r.terms, Each):
            if not isinstance(r.terms.elt, nodes.Region):
                fail("E002", f"the terms of `{r.op.value}` are regions", span, "not regions")
            terms = nodes.ListComp(elt=r.terms.elt, var=r.terms.var, iter=r.terms.iterable,
                                   cond=r.terms.cond, span=r.terms.span)
        else:
            if not r.terms:
                fail("E002", f"`{r.op.value}` of an empty list", span, "nothing to combine")
            terms = tuple(self._side(self._protocol._own_region("a term", t, span), span)
                          for t in r.terms)
        weights = None
        if r.weights is not None:
            if isinstance(r.weights, Each):
                weights = nodes.ListComp(elt=r.weights.elt,  # type: ignore[arg-type]
                                         var=r.weights.var, iter=r.weights.iterable,
                                         cond=r.weights.cond, span=r.weights.span)
            else:
                weights = tuple(_weight(self, w, span) for w in r.weights)  # type: ignore[assignment]
        return nodes.Reduction(op=r.op, terms=terms, weights=weights, span=r.span or span)

    def _side(self, region: Region, span: Span) -> nodes.Region:
        result = self._protocol._own_region("the comparison", region, span).to_ir(span)
        self._check_names(result, span)
        return result
