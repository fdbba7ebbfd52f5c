"""AST -> IR: name resolution, argument and type checks (E002).

Requires: a parsed `ast.ProtocolDecl`.  Guarantees: an `ir.Protocol` whose names all
resolve (loop variables, parameters, windows, counters, built-ins), whose ops have
their arguments bound and typed, and whose `ensure` holds only region comparisons.
Emits: E002 for every name or argument mistake.  Bounds and values are checked at
instantiation (E003–E005), where they are known.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ccogen.diag import Diagnostic, error
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DTYPE_NAMES, DType
from ccogen.ir.opkind import OpKind
from ccogen.ir.signatures import CHOICES, SIGNATURES, Arg, bind, make_op
from ccogen.source import Span
from ccogen.syntax import ast as A

# names of 8-bit float formats, answered with how FP8 data travels (as bytes)
_FP8_NAMES = frozenset({"e4m3", "e5m2", "fp8", "f8", "e4m3fn", "e5m2fnuz", "e4m3fnuz",
                        "float8", "fp8_e4m3", "fp8_e5m2"})

BUILTIN_ARITY: dict[str, tuple[int, int]] = {
    "peers": (0, 0), "ranks": (0, 0), "range": (1, 3), "len": (1, 1),
    "min": (1, 99), "max": (1, 99), "abs": (1, 1),
}
REDUCTIONS = ("sum", "max", "min")
RESERVED = ("me", "nranks", "launch", *BUILTIN_ARITY, *SIGNATURES, "init", "sum", "load",
            *DTYPE_NAMES)


class _Skip(Exception):
    """Abandon the current statement after its diagnostic was reported."""


@dataclass
class _Scope:
    params: dict[str, ir.ParamType] = field(default_factory=dict)
    windows: set[str] = field(default_factory=set)
    buffers: set[str] = field(default_factory=set)
    counters: set[str] = field(default_factory=set)
    loop_vars: tuple[str, ...] = ()  # loop variables and assigned names, innermost last

    def known(self) -> list[str]:
        return [*self.params, *self.windows, *self.buffers, *self.counters, *self.loop_vars,
                "me", "nranks"]

    def memories(self) -> set[str]:
        """Names a region may name: windows and buffers."""
        return self.windows | self.buffers


def _suggest(name: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"did you mean `{close[0]}`?" if close else None


def _suggest_choice(node: A.AExpr, choices: Sequence[str]) -> str | None:
    if not isinstance(node, A.String):
        return None
    close = difflib.get_close_matches(node.value, list(choices), n=1)
    return f'did you mean `"{close[0]}"`?' if close else None


class Lowerer:
    def __init__(self) -> None:
        self.diags: list[Diagnostic] = []
        self.scope = _Scope()
        self.in_ensure = False
        self.in_require = False
        self.in_weights = False
        self._param_spans: dict[str, Span] = {}

    def fail(self, diag: Diagnostic) -> _Skip:
        self.diags.append(diag)
        return _Skip()

    # ------------------------------------------------------------------ protocol
    def protocol(self, node: A.ProtocolDecl) -> ir.Protocol:
        params = tuple(p for p in (self._param(p) for p in node.params) if p is not None)
        out: dict[str, object] = {"team": ir.Team(), "queues": ir.Const(value=1)}
        seen: dict[str, Span] = dict(self._param_spans)  # one namespace for declarations
        windows: list[ir.Window] = []
        buffers: list[ir.Buffer] = []
        counters: list[ir.Counter] = []
        kernels: list[ir.Kernel] = []
        # declarations first (any order), so kernels may use every window and counter
        for decl in node.decls:
            try:
                if isinstance(decl, A.WindowDecl):
                    windows.append(self._window(decl, seen))
                elif isinstance(decl, A.BufferDecl):
                    buffers.append(self._buffer(decl, seen))
                elif isinstance(decl, A.CounterDecl):
                    self._declare(decl.name, seen, "counter")
                    self.scope.counters.add(decl.name.id)
                    counters.append(ir.Counter(name=decl.name.id, span=decl.span))
                elif isinstance(decl, A.TeamDecl):
                    self._once(decl, seen, "team")
                    out["team"] = self._team(decl)
                elif isinstance(decl, A.QueuesDecl):
                    self._once(decl, seen, "queues")
                    out["queues"] = self._queues(decl)
                    out["queues_span"] = decl.span
                elif isinstance(decl, A.SettingDecl):
                    out["between_launches"] = self._setting(decl, seen)
                    out["between_launches_span"] = decl.span
            except _Skip:
                pass
        kernel_names: dict[str, Span] = {}
        ensure: tuple[ir.Stmt, ...] = ()
        require: tuple[ir.Stmt, ...] = ()
        for decl in node.decls:
            try:
                if isinstance(decl, A.KernelDecl):
                    self._declare(decl.name, kernel_names, "kernel")
                    kernels.append(self._kernel(decl))
                elif isinstance(decl, A.EnsureDecl):
                    self._once(decl, seen, "ensure")
                    ensure = self._ensure(decl)
                elif isinstance(decl, A.RequireDecl):
                    self._once(decl, seen, "require")
                    require = self._require(decl)
            except _Skip:
                pass
        return ir.Protocol(
            name=node.name.id, params=params, doc=node.doc.value if node.doc else None,
            team=out["team"], queues=out["queues"],  # type: ignore[arg-type]
            windows=tuple(windows), counters=tuple(counters), buffers=tuple(buffers),
            kernels=tuple(kernels),
            ensure=ensure, require=require, span=node.span,
            queues_span=out.get("queues_span"),  # type: ignore[arg-type]
            between_launches=out.get("between_launches", ir.LaunchOrder.BACK_TO_BACK),  # type: ignore[arg-type]
            between_launches_span=out.get("between_launches_span"),  # type: ignore[arg-type]
        )

    def _once(self, decl: A.ADecl, seen: dict[str, Span], what: str) -> None:
        key = f"<{what}>"
        if key in seen:
            raise self.fail(error("E002", f"`{what}` declared twice", decl.span, "declared again",
                                  secondary=[(seen[key], "first declared here")]))
        seen[key] = decl.span

    def _declare(self, name: A.Name, seen: dict[str, Span], what: str) -> None:
        if name.id in RESERVED:
            raise self.fail(error("E002", f"`{name.id}` is a built-in name", name.span,
                                  f"cannot name a {what}"))
        if name.id in seen:
            raise self.fail(error("E002", f"`{name.id}` is declared twice", name.span,
                                  f"{what} declared again", secondary=[(seen[name.id],
                                                                        "first declared here")]))
        seen[name.id] = name.span

    def _param(self, p: A.ParamDecl) -> ir.Param | None:
        try:
            self._declare(p.name, self._param_spans, "parameter")
        except _Skip:
            return None
        types = {t.value: t for t in ir.ParamType}
        if p.type.id not in types:
            self.diags.append(error("E002", f"unknown parameter type `{p.type.id}`", p.type.span,
                                    "expected `bytes`, `int` or `dtype`"))
            return None
        default: ir.Expr | DType
        try:
            if types[p.type.id] is ir.ParamType.DTYPE:
                default = self._dtype_literal(p.default)
            else:
                default = self.expr(p.default)
        except _Skip:
            return None
        self.scope.params[p.name.id] = types[p.type.id]
        return ir.Param(name=p.name.id, type=types[p.type.id], default=default, span=p.span)

    def _team(self, decl: A.TeamDecl) -> ir.Team:
        kinds = {k.value: k for k in ir.TeamKind}
        if decl.kind.id not in kinds:
            raise self.fail(error("E002", f"unknown team kind `{decl.kind.id}`", decl.kind.span,
                                  "expected `lsa` or `world`"))
        size = self.expr(decl.size) if decl.size is not None else None
        return ir.Team(kind=kinds[decl.kind.id], size=size, span=decl.span)

    def _setting(self, decl: A.SettingDecl, seen: dict[str, Span]) -> ir.LaunchOrder:
        if decl.name.id != "between_launches":
            raise self.fail(error("E002", f"unknown declaration `{decl.name.id}:`",
                                  decl.name.span, "not a declaration",
                                  help="the only `name: value` declaration is "
                                       "`between_launches: host_sync`"))
        self._once(decl, seen, "between_launches")
        orders = {o.value: o for o in ir.LaunchOrder}
        if decl.value.id not in orders:
            raise self.fail(error("E002", f"unknown launch order `{decl.value.id}`",
                                  decl.value.span, "expected `host_sync` or `back_to_back`"))
        return orders[decl.value.id]

    def _queues(self, decl: A.QueuesDecl) -> ir.Expr | None:
        if isinstance(decl.count, A.Name) and decl.count.id == "auto":
            return None
        return self.expr(decl.count)

    def _dtype_literal(self, node: A.AExpr) -> DType:
        if isinstance(node, A.Name) and node.id in DTYPE_NAMES:
            return DType(node.id)
        raise self.fail(error("E002", "a `dtype` parameter's default is an element type",
                              node.span, "not a dtype",
                              help=f"write one of {', '.join(DTYPE_NAMES)}"))

    def _dtype_spec(self, node: A.AExpr) -> DType | ir.ParamRef | None:
        """`bf16` or a dtype parameter `T`; None when `node` names neither."""
        if not isinstance(node, A.Name):
            return None
        if node.id in DTYPE_NAMES:
            return DType(node.id)
        if self.scope.params.get(node.id) is ir.ParamType.DTYPE:
            return ir.ParamRef(name=node.id, span=node.span)
        return None

    def _typed(self, node: A.AExpr) -> tuple[DType | ir.ParamRef, ir.Expr] | None:
        """`DTYPE[COUNT]` -> (dtype, count); None when `node` is not of that form.  A
        name that is no element type before `[COUNT]` (`e4m3[n]`) is E002 saying so."""
        if isinstance(node, A.Subscript) and not node.is_slice and node.start is not None:
            dtype = self._dtype_spec(node.value)
            if dtype is not None:
                return dtype, self.expr(node.start)
            if isinstance(node.value, A.Name):
                raise self.fail(self._not_an_element_type(node.value))
        return None

    def _not_an_element_type(self, name: A.Name) -> Diagnostic:
        what = ("a parameter of type " + self.scope.params[name.id].value
                if name.id in self.scope.params else "not an element type")
        return error("E002", f"`{name.id}` is not an element type", name.span, what,
                     notes=[f"the element types are {', '.join(DTYPE_NAMES)}, or a `dtype` "
                            "parameter (`T: dtype = bf16`)"],
                     help="8-bit floats (`e4m3`, `e5m2`) have no element type yet: declare "
                          "them as bytes (`u8[COUNT]`); transfers and copies move them "
                          "unchanged" if name.id.lower() in _FP8_NAMES else
                          f"write one of {', '.join(DTYPE_NAMES)}, `[COUNT]` after it")

    def _buffer(self, decl: A.BufferDecl, seen: dict[str, Span]) -> ir.Buffer:
        self._declare(decl.name, seen, "buffer")
        self.scope.buffers.add(decl.name.id)  # known even if its type is wrong: no cascade
        typed = self._typed(decl.type)
        if typed is None:
            raise self.fail(error("E002", f"buffer `{decl.name.id}` needs an element type and "
                                  "a count", decl.type.span, "expected `DTYPE[COUNT]`",
                                  help=f"write `buffer {decl.name.id}: u8[...]` (bytes) or "
                                  f"another of {', '.join(DTYPE_NAMES)}"))
        self.scope.buffers.add(decl.name.id)
        return ir.Buffer(name=decl.name.id, dtype=typed[0], size=typed[1], span=decl.span)

    def _window(self, decl: A.WindowDecl, seen: dict[str, Span]) -> ir.Window:
        self._declare(decl.name, seen, "window")
        self.scope.windows.add(decl.name.id)  # known even if its size is wrong: no cascade
        typed = self._typed(decl.size)
        dtype: DType | ir.ParamRef = DType.U8
        if typed is not None:
            dtype, size = typed
        else:
            self._not_a_dtype_name(decl.size)
            size = self.expr(decl.size)
        align = None
        if decl.option is not None:
            if decl.option.id != "align":
                raise self.fail(error("E002", f"unknown window option `{decl.option.id}`",
                                      decl.option.span, "expected `align=`"))
            assert decl.option_value is not None
            align = self.expr(decl.option_value)
        self.scope.windows.add(decl.name.id)
        return ir.Window(name=decl.name.id, size=size, align=align, dtype=dtype, span=decl.span)

    def _not_a_dtype_name(self, node: A.AExpr) -> None:
        if self._dtype_spec(node) is not None:
            assert isinstance(node, A.Name)
            raise self.fail(error("E002", f"`{node.id}` is an element type, not a size",
                                  node.span, "needs a count",
                                  help=f"write `{node.id}[COUNT]`: COUNT elements"))

    def _kernel(self, decl: A.KernelDecl) -> ir.Kernel:
        values: dict[str, ir.Expr] = {}
        for arg in decl.args:
            if arg.keyword not in ("threads", "blocks"):
                raise self.fail(error("E002", f"kernel has no argument `{arg.keyword}`", arg.span,
                                      "unknown keyword", help="kernels take `threads=` and "
                                      "`blocks=`"))
            if arg.keyword in values:
                raise self.fail(error("E002", f"argument `{arg.keyword}` given twice", arg.span,
                                      "given again here"))
            values[arg.keyword] = self.expr(arg.value)
        if "threads" not in values:
            raise self.fail(error("E002", f"kernel `{decl.name.id}` needs `threads=`",
                                  decl.name.span, "no thread count",
                                  help=f"write `kernel {decl.name.id}(threads=32):`"))
        body = self.block(decl.body)
        return ir.Kernel(name=decl.name.id, threads=values["threads"], blocks=values.get("blocks"),
                         body=body, span=decl.span)

    def _ensure(self, decl: A.EnsureDecl) -> tuple[ir.Stmt, ...]:
        self.in_ensure = True
        try:
            return self.block(decl.body)
        finally:
            self.in_ensure = False

    def _require(self, decl: A.RequireDecl) -> tuple[ir.Stmt, ...]:
        self.in_require = True
        try:
            return self.block(decl.body)
        finally:
            self.in_require = False

    # ------------------------------------------------------------------ statements
    def block(self, stmts: Sequence[A.AStmt]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        depth = len(self.scope.loop_vars)
        assigned: set[str] = set()
        try:
            for stmt in stmts:
                if isinstance(stmt, A.PassStmt):
                    continue
                try:
                    if isinstance(stmt, A.AssignStmt):
                        out.append(self._assign(stmt, assigned))
                    else:
                        out.append(self.stmt(stmt))
                except _Skip:
                    pass
        finally:
            self.scope.loop_vars = self.scope.loop_vars[:depth]
        return tuple(out)

    def _assign(self, s: A.AssignStmt, assigned: set[str]) -> ir.Assign:
        value = self.expr(s.value)
        name = s.var.id
        if name not in assigned:
            self._check_new_name(s.var, "name")
            assigned.add(name)
            self.scope.loop_vars = (*self.scope.loop_vars, name)
        return ir.Assign(var=name, value=value, span=s.span)

    def _check_new_name(self, var: A.Name, what: str) -> None:
        sc = self.scope
        if var.id in RESERVED or var.id in sc.loop_vars or var.id in sc.params \
                or var.id in sc.memories() or var.id in sc.counters:
            raise self.fail(error("E002", f"{what} `{var.id}` shadows another name",
                                  var.span, "already defined", help="choose another name"))

    def stmt(self, s: A.AStmt) -> ir.Stmt:
        if isinstance(s, A.IfStmt):
            return self._if(s.branches, s.orelse, s.span)
        if isinstance(s, A.ForStmt):
            it = self.expr(s.iter)
            return ir.For(var=s.var.id, iter=it, body=self._loop_body(s.var, s.body), span=s.span)
        if isinstance(s, A.IssuerStmt):
            if self.in_ensure or self.in_require:
                where = "ensure" if self.in_ensure else "require"
                raise self.fail(error("E002", f"`{s.kind}` is not allowed in `{where}`", s.span,
                                      "issuers exist only in kernels",
                                      help=f"use `for` to iterate in `{where}`"))
            it = self.expr(s.iter)
            return ir.IssuerBlock(kind=ir.IssuerKind(s.kind), var=s.var.id, iter=it,
                                  body=self._loop_body(s.var, s.body), span=s.span)
        return self._expr_stmt(s)

    def _if(self, branches: Sequence[tuple[A.AExpr, tuple[A.AStmt, ...]]],
            orelse: tuple[A.AStmt, ...] | None, span: Span) -> ir.If:
        (cond, body), rest = branches[0], branches[1:]
        c = self.expr(cond)
        b = self.block(body)
        if rest:
            tail: tuple[ir.Stmt, ...] = (self._if(rest, orelse, rest[0][0].span),)
        else:
            tail = self.block(orelse) if orelse is not None else ()
        return ir.If(cond=c, body=b, orelse=tail, span=span)

    def _loop_body(self, var: A.Name, body: Sequence[A.AStmt]) -> tuple[ir.Stmt, ...]:
        sc = self.scope
        self._check_new_name(var, "loop variable")
        sc.loop_vars = (*sc.loop_vars, var.id)
        try:
            return self.block(body)
        finally:
            sc.loop_vars = sc.loop_vars[:-1]

    def _expr_stmt(self, s: A.AStmt) -> ir.Stmt:
        assert isinstance(s, A.ExprStmt)
        value = s.value
        if self.in_ensure:
            return self._check(value)
        if self.in_require:
            return self._precondition(value)
        if not (isinstance(value, A.Call) and isinstance(value.func, A.Name)):
            raise self.fail(error("E002", "expected an operation", value.span,
                                  "this statement does nothing",
                                  help="a kernel statement is an op such as `put(...)`"))
        name = value.func.id
        if name not in SIGNATURES:
            raise self.fail(error("E002", f"unknown operation `{name}`", value.func.span,
                                  "not an operation",
                                  help=_suggest(name, SIGNATURES) or
                                  f"operations are {', '.join(f'`{n}`' for n in SIGNATURES)}"))
        return self.op(OpKind(name), value)

    def _check(self, value: A.AExpr) -> ir.Check:
        if not (isinstance(value, A.Compare) and len(value.ops) == 1
                and value.ops[0] in ("==", "!=")):
            raise self.fail(error("E002", "expected a comparison of regions", value.span,
                                  "not a postcondition",
                                  help="write `region == init(window@rank)[a:b]`"))
        a, b = value.operands
        if self._is_reduction(a):
            if self._is_reduction(b):
                raise self.fail(error("E002", "a comparison of two reductions", value.span,
                                      "one side must be a region",
                                      help="write `region == sum(...)`"))
            a, b = b, a
        left = self.region(a, allow_ensure=True)
        right = self._reduction(b) if self._is_reduction(b) else \
            self.region(b, allow_ensure=True)
        return ir.Check(op=value.ops[0], left=left, right=right, span=value.span)

    def _precondition(self, value: A.AExpr) -> ir.Require:
        if not isinstance(value, A.Compare | A.BoolOp) and not (
                isinstance(value, A.Unary) and value.op == "not"):
            raise self.fail(error("E002", "expected a condition", value.span,
                                  "not a precondition",
                                  help="write a comparison such as `0 <= counts[p] <= cap`"))
        return ir.Require(cond=self.expr(value), span=value.span)

    @staticmethod
    def _is_reduction(node: A.AExpr) -> bool:
        return (isinstance(node, A.Call) and isinstance(node.func, A.Name)
                and node.func.id in REDUCTIONS)

    def _reduction(self, node: A.AExpr) -> ir.Reduction:
        assert isinstance(node, A.Call) and isinstance(node.func, A.Name)
        name = node.func.id
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword: a for a in node.args if a.keyword is not None}
        hint = f"write `{name}(init(x@p) for p in ranks())` or `{name}([a, b], weights=[1, 2])`"
        unknown = [k for k in keywords if k != "weights"]
        if len(positional) != 1 or unknown:
            raise self.fail(error("E002", f"`{name}` in `ensure` takes one list of regions "
                                  "(and `weights=`)", node.span, "unexpected arguments",
                                  help=hint))
        terms = self._region_list(positional[0].value, ensure=True)
        weights = self._weights(keywords["weights"].value) if "weights" in keywords else None
        if weights is not None and ir.ReduceOp(name) is not ir.ReduceOp.SUM:
            raise self.fail(error("E002", f"`weights=` only goes with `sum`, not `{name}`",
                                  keywords["weights"].span, "weights of a max or min",
                                  help="drop `weights=`, or use `sum`"))
        return ir.Reduction(op=ir.ReduceOp(name), terms=terms, weights=weights, span=node.span)

    def _region_list(self, node: A.AExpr, *, ensure: bool) -> tuple[ir.Region, ...] | ir.ListComp:
        """A list of regions `[a, b@p]` or a comprehension `[x@p for p in ranks()]`."""
        if isinstance(node, A.List):
            if not node.items:
                raise self.fail(error("E002", "an empty list of regions", node.span,
                                      "nothing to combine", help="list at least one region"))
            return tuple(self.region(i, allow_ensure=ensure, allow_peer=True)
                         for i in node.items)
        if isinstance(node, A.ListComp):
            return self._comprehension(node, lambda e: self.region(
                e, allow_ensure=ensure, allow_peer=True))
        raise self.fail(error("E002", "expected a list of regions", node.span, "not a list",
                              help="write `[a, b]` or `[x@p for p in ranks()]`"))

    def _weights(self, node: A.AExpr) -> tuple[ir.Expr, ...] | ir.ListComp:
        self.in_weights = True
        try:
            if isinstance(node, A.List):
                return tuple(self.expr(i) for i in node.items)
            if isinstance(node, A.ListComp):
                return self._comprehension(node, self.expr)
            raise self.fail(error("E002", "`weights=` takes a list of numbers", node.span,
                                  "not a list", help="write `weights=[0.5, 0.5]`"))
        finally:
            self.in_weights = False

    def _comprehension(self, node: A.ListComp, element: Callable[[A.AExpr], ir.Region | ir.Expr]
                       ) -> ir.ListComp:
        it = self.expr(node.iter)
        self._check_new_name(node.var, "loop variable")
        sc = self.scope
        sc.loop_vars = (*sc.loop_vars, node.var.id)
        try:
            elt = element(node.elt)
            cond = self.expr(node.cond) if node.cond is not None else None
        finally:
            sc.loop_vars = sc.loop_vars[:-1]
        return ir.ListComp(elt=elt, var=node.var.id, iter=it, cond=cond, span=node.span)

    # ------------------------------------------------------------------ ops
    def op(self, name: OpKind, call: A.Call) -> ir.Op:
        args = [Arg(a.keyword, a.value, a.span) for a in call.args]
        bound, diags = bind(name, args, call.span)
        if diags:
            self.diags.extend(diags)
            raise _Skip()
        values = {key: self.arg_value(name, key, arg) for key, arg in bound.items()}
        if name is OpKind.REDUCE and values.get("weights") is not None and \
                values.get("op", ir.ReduceOp.SUM) is not ir.ReduceOp.SUM:
            op = values["op"]
            assert isinstance(op, ir.ReduceOp)
            raise self.fail(error("E002", f"`weights=` only goes with `op=\"sum\"`, not "
                                  f"`\"{op.value}\"`", bound["weights"].span,
                                  "weights of a max or min", help="drop `weights=`"))
        return make_op(name, values, call.span)

    def arg_value(self, op: OpKind, key: str, arg: Arg) -> object:
        kind = next(p.kind for p in SIGNATURES[op] if p.name == key)
        node: A.AExpr = arg.value
        if kind == "region":
            return self.region(node, allow_ensure=False)
        if kind == "queue" and isinstance(node, A.String) and node.value == "auto":
            return None
        if kind in ("signal", "mode"):
            return self._choice(kind, node)
        if kind == "bool":
            if not isinstance(node, A.Bool):
                raise self.fail(error("E002", f"`{key}=` must be `True` or `False`", node.span,
                                      "not a boolean literal"))
            return node.value
        if kind == "counter":
            return self._counter(node)
        if kind == "regions":
            return self._region_list(node, ensure=False)
        if kind == "weights":
            return self._weights(node)
        if kind == "reduce_op":
            return self._choice(kind, node, key)
        return self.expr(node)

    def _choice(self, kind: str, node: A.AExpr, key: str | None = None) -> object:
        choices = CHOICES[kind]
        listed = ", ".join(f'"{c}"' for c in choices)
        if not isinstance(node, A.String) or node.value not in choices:
            raise self.fail(error("E002", f"`{key or kind}=` must be one of {listed}", node.span,
                                  "not a valid choice",
                                  help=_suggest_choice(node, choices)))
        if kind == "reduce_op":
            return ir.ReduceOp(node.value)
        return ir.SignalKind(node.value) if kind == "signal" else ir.Mode(node.value)

    def _counter(self, node: A.AExpr) -> str:
        if not isinstance(node, A.Name) or node.id not in self.scope.counters:
            found = f"`{node.id}`" if isinstance(node, A.Name) else "this"
            raise self.fail(error("E002", f"{found} is not a declared counter", node.span,
                                  "expected a counter",
                                  help=(_suggest(node.id, self.scope.counters)
                                        if isinstance(node, A.Name) else None)
                                  or "declare it with `counter NAME`"))
        return node.id

    # ------------------------------------------------------------------ regions
    def region(self, node: A.AExpr, *, allow_ensure: bool, allow_peer: bool = False) -> ir.Region:
        whole = node
        start = stop = None
        single = False
        if isinstance(node, A.Subscript):
            if not node.is_slice and not (allow_ensure and self.in_ensure):
                raise self.fail(error("E002", "a region is a slice of a window", node.span,
                                      "an index, not a slice", help="write `w[a:b]`"))
            single = not node.is_slice
            start = self.expr(node.start) if node.start is not None else None
            stop = self.expr(node.stop) if node.stop is not None else None
            node = node.value
        base = self._region_base(node, allow_ensure, allow_peer)
        return ir.Region(window=base.window, start=start, stop=stop, rank=base.rank,
                         init=base.init, single=single, span=whole.span)

    def _region_base(self, node: A.AExpr, allow_ensure: bool,
                     allow_peer: bool = False) -> ir.Region:
        if isinstance(node, A.Call) and isinstance(node.func, A.Name) and node.func.id == "init":
            self._ensure_only(node, "init(...)", allow_ensure)
            if len(node.args) != 1 or node.args[0].keyword is not None:
                raise self.fail(error("E002", "`init` takes one window", node.span,
                                      "expected `init(window)` or `init(window@rank)`"))
            inner = self._region_base(node.args[0].value, allow_ensure)
            return ir.Region(window=inner.window, rank=inner.rank, init=True)
        if isinstance(node, A.Remote):
            if not allow_peer:
                self._ensure_only(node, "`w@p`", allow_ensure)
            self._window_name(node.window)
            return ir.Region(window=node.window.id, rank=self.expr(node.rank))
        if isinstance(node, A.Name):
            self._window_name(node)
            return ir.Region(window=node.id)
        raise self.fail(error("E002", "expected a region of a window", node.span,
                              "not a window or a slice of one", help="write `w[a:b]` or `w`"))

    def _ensure_only(self, node: A.AExpr, what: str, allow: bool) -> None:
        if not allow:
            where = " and in the `srcs` of `reduce`" if what == "`w@p`" else ""
            raise self.fail(error("E002", f"{what} is only allowed in `ensure`{where}", node.span,
                                  "not here",
                                  help="in kernels, name the peer as the op's first argument"))

    def _window_name(self, name: A.Name) -> None:
        if name.id not in self.scope.memories():
            raise self.fail(error("E002", f"`{name.id}` is not a declared window", name.span,
                                  "expected a window",
                                  help=_suggest(name.id, self.scope.memories())
                                  or "declare it with `window NAME: SIZE`"))

    # ------------------------------------------------------------------ expressions
    def expr(self, node: A.AExpr) -> ir.Expr:
        method = getattr(self, f"_x_{type(node).__name__}", None)
        if method is None:
            raise self.fail(error("E002", "expected an integer expression", node.span,
                                  "not a number"))
        return method(node)  # type: ignore[no-any-return]

    def _x_Number(self, n: A.Number) -> ir.Expr:
        return ir.Const(value=n.value, span=n.span, text=n.text)

    def _x_Size(self, n: A.Size) -> ir.Expr:
        return ir.Const(value=n.value, span=n.span, text=n.span.text or None)

    def _x_Float(self, n: A.Float) -> ir.Expr:
        if not self.in_weights:
            raise self.fail(error("E002", "a float is only allowed as a `reduce` weight",
                                  n.span, "not an integer",
                                  help="sizes, offsets and ranks are integers"))
        return ir.Const(value=n.value, span=n.span, text=n.text)

    def _x_Bool(self, n: A.Bool) -> ir.Expr:
        return ir.Const(value=n.value, span=n.span)

    def _x_Name(self, n: A.Name) -> ir.Expr:
        sc = self.scope
        if n.id in sc.loop_vars:
            return ir.Var(name=n.id, span=n.span)
        if n.id in sc.params:
            if sc.params[n.id] is ir.ParamType.DTYPE:
                raise self.fail(error("E002", f"`{n.id}` is an element type, not a number",
                                      n.span, "a `dtype` parameter",
                                      help=f"use it as a window's type: `{n.id}[COUNT]`"))
            return ir.ParamRef(name=n.id, span=n.span)
        if n.id in DTYPE_NAMES:
            raise self.fail(error("E002", f"`{n.id}` is an element type, not a number",
                                  n.span, "a dtype", help=f"use it as a window's type: "
                                  f"`{n.id}[COUNT]`"))
        if n.id == "me":
            return ir.Me(span=n.span)
        if n.id == "nranks":
            return ir.NRanks(span=n.span)
        if n.id == "launch":
            return ir.Launch(span=n.span)
        if n.id in sc.memories() or n.id in sc.counters:
            what = ("window" if n.id in sc.windows else "buffer" if n.id in sc.buffers
                    else "counter")
            raise self.fail(error("E002", f"`{n.id}` is a {what}, not a number", n.span,
                                  f"{what} used as a number"))
        raise self.fail(error("E002", f"unknown name `{n.id}`", n.span, "not defined",
                              help=_suggest(n.id, sc.known())))

    def _x_BinOp(self, n: A.BinOp) -> ir.Expr:
        return ir.BinOp(op=n.op, left=self.expr(n.left), right=self.expr(n.right), span=n.span)

    def _x_Unary(self, n: A.Unary) -> ir.Expr:
        if n.op == "-" and isinstance(n.operand, A.Number | A.Float):
            const = self.expr(n.operand)
            assert isinstance(const, ir.Const) and not isinstance(const.value, bool)
            text = f"-{const.text}" if const.text is not None else None
            return ir.Const(value=-const.value, span=n.span, text=text)
        return ir.UnaryOp(op=n.op, operand=self.expr(n.operand), span=n.span)

    def _x_Compare(self, n: A.Compare) -> ir.Expr:
        return ir.Compare(ops=n.ops, operands=tuple(self.expr(o) for o in n.operands), span=n.span)

    def _x_BoolOp(self, n: A.BoolOp) -> ir.Expr:
        return ir.BoolOp(op=n.op, values=tuple(self.expr(v) for v in n.values), span=n.span)

    def _x_IfExp(self, n: A.IfExp) -> ir.Expr:
        return ir.IfExp(cond=self.expr(n.cond), then=self.expr(n.then),
                        orelse=self.expr(n.orelse), span=n.span)

    def _x_List(self, n: A.List) -> ir.Expr:
        return ir.ListExpr(items=tuple(self.expr(i) for i in n.items), span=n.span)

    def _x_Call(self, n: A.Call) -> ir.Expr:
        name = n.func.id if isinstance(n.func, A.Name) else None
        if name == "load":
            return self._load_call(n)
        if name in REDUCTIONS and len(n.args) == 1 and isinstance(n.args[0].value, A.ListComp) \
                and n.args[0].value.generator:
            return self._generator(name, n.args[0].value, n.span)
        if not isinstance(n.func, A.Name) or n.func.id not in BUILTIN_ARITY:
            if name == "sum":
                raise self.fail(error("E002", "`sum` is only allowed on the right of an "
                                      "`ensure` comparison", n.span, "not here",
                                      help="in kernels, combine data with `reduce(...)`"))
            if name in SIGNATURES:
                raise self.fail(error("E002", f"`{name}` is an operation, not a value", n.span,
                                      "used inside an expression"))
            raise self.fail(error("E002", f"unknown function `{name or '?'}`", n.func.span,
                                  "not a built-in", help=_suggest(name or "", BUILTIN_ARITY)
                                  or f"built-ins are {', '.join(BUILTIN_ARITY)}"))
        lo, hi = BUILTIN_ARITY[n.func.id]
        if any(a.keyword for a in n.args) or not lo <= len(n.args) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi < 99 else f"at least {lo}"
            raise self.fail(error("E002", f"`{n.func.id}` takes {want} positional argument"
                                  f"{'' if want == '1' else 's'}", n.span,
                                  f"{len(n.args)} given"))
        return ir.Call(func=n.func.id, args=tuple(self.expr(a.value) for a in n.args), span=n.span)

    def _x_String(self, n: A.String) -> ir.Expr:
        raise self.fail(error("E002", "a string is not a number", n.span, "string here",
                              help="strings are only for `signal=` and `mode=`"))

    def _x_Subscript(self, n: A.Subscript) -> ir.Expr:
        if not n.is_slice and (self.in_require or self.in_ensure):
            return self._element(n, init=self.in_require)
        if not n.is_slice:
            raise self.fail(error("E002", "an element is read with `load(...)` in a kernel",
                                  n.span, "a run-time value",
                                  help=f"write `load({n.span.text})`"))
        raise self.fail(error("E002", "a region is not a number", n.span, "region used as a number",
                              help="regions go in `dst=`, `src=` and `ensure` comparisons"))

    def _x_Remote(self, n: A.Remote) -> ir.Expr:
        raise self.fail(error("E002", "a region is not a number", n.span, "region used as a number",
                              help="regions go in `dst=`, `src=` and `ensure` comparisons"))

    def _load_call(self, n: A.Call) -> ir.Expr:
        if self.in_require or self.in_ensure:
            where = "require" if self.in_require else "ensure"
            raise self.fail(error("E002", f"`load` is for kernels; in `{where}` write the "
                                  "element itself", n.span, "not here",
                                  help="write `counts[p]` (or `init(counts@p)[i]` in `ensure`)"))
        if len(n.args) != 1 or n.args[0].keyword is not None or not (
                isinstance(n.args[0].value, A.Subscript) and not n.args[0].value.is_slice):
            raise self.fail(error("E002", "`load` reads one element", n.span,
                                  "expected `load(x[i])` or `load(x@p[i])`"))
        return self._element(n.args[0].value, init=False, span=n.span)

    def _element(self, n: A.Subscript, *, init: bool, span: Span | None = None) -> ir.Load:
        """`x[i]`, `x@p[i]`, `init(x@p)[i]`: one element, a run-time value."""
        assert n.start is not None
        base = self._region_base(n.value, allow_ensure=self.in_ensure or self.in_require,
                                 allow_peer=True)
        index = self.expr(n.start)
        if base.rank is not None and base.window in self.scope.buffers and not (
                self.in_ensure or self.in_require):
            raise self.fail(error("E010", f"buffer `{base.window}` is local: a peer's cannot be "
                                  "loaded", n.span, "a buffer exists only on its own rank",
                                  help=f"declare `{base.window}` as a `window` (symmetric: "
                                       "every rank has one the peers can reach)"))
        return ir.Load(window=base.window, index=index, rank=base.rank,
                       init=init or base.init, span=span or n.span)

    def _generator(self, name: str, comp: A.ListComp, span: Span) -> ir.Expr:
        it = self.expr(comp.iter)
        self._check_new_name(comp.var, "loop variable")
        sc = self.scope
        sc.loop_vars = (*sc.loop_vars, comp.var.id)
        try:
            elt = self.expr(comp.elt)
            cond = self.expr(comp.cond) if comp.cond is not None else None
        finally:
            sc.loop_vars = sc.loop_vars[:-1]
        return ir.GenExpr(func=name, elt=elt, var=comp.var.id, iter=it, cond=cond, span=span)

    def _x_ListComp(self, n: A.ListComp) -> ir.Expr:
        raise self.fail(error("E002", "a comprehension is not a number", n.span,
                              "comprehension here",
                              help="comprehensions list the `srcs=` or `weights=` of `reduce` "
                                   "and the terms of `sum` in `ensure`"))


def lower(node: A.ProtocolDecl) -> tuple[ir.Protocol, list[Diagnostic]]:
    lowerer = Lowerer()
    protocol = lowerer.protocol(node)
    return protocol, lowerer.diags
