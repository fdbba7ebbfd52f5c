"""Build IR by hand from Python syntax, with real spans (tests only).

Independent of the `.cco` parser: Python's `ast` reads the text and this module
maps it onto `ccogen.ir.nodes`.  Issuer blocks are written as loops over a marker
call, `for p in lanes(peers()):` (also `warps(...)`, `blocks(...)`); `w @ p` is the
remote window `w@p`; a statement `a == b` in `ensure` is a `Check`; `pass` is an
empty statement.  Every node gets a span into one `SourceFile` holding the text.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from ccogen.ir import nodes as ir
from ccogen.ir.opkind import OpKind
from ccogen.ir.signatures import SIGNATURES, make_op
from ccogen.source import SourceFile, Span

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**"}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
        ast.In: "in", ast.NotIn: "not in"}
_ISSUERS = {"lanes": ir.IssuerKind.LANES, "warps": ir.IssuerKind.WARPS,
            "blocks": ir.IssuerKind.BLOCKS}


class _Reader:
    def __init__(self, text: str, params: Iterable[str]) -> None:
        self.file = SourceFile("<test>", text)
        self.params = set(params)

    def span(self, node: ast.AST) -> Span:
        start = self.file.offset(node.lineno, node.col_offset + 1)  # type: ignore[attr-defined]
        end = self.file.offset(node.end_lineno, node.end_col_offset + 1)  # type: ignore[attr-defined]
        return Span(self.file, start, end)

    # ------------------------------------------------------------------ expressions

    def expr(self, n: ast.expr) -> ir.Expr:
        sp = self.span(n)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return ir.Const(value=n.value, span=sp)
        if isinstance(n, ast.Name):
            return self._name(n.id, sp)
        if isinstance(n, ast.BinOp):
            return ir.BinOp(op=_BINOPS[type(n.op)], left=self.expr(n.left),
                            right=self.expr(n.right), span=sp)
        if isinstance(n, ast.UnaryOp):
            return ir.UnaryOp(op=_UNARY[type(n.op)], operand=self.expr(n.operand), span=sp)
        if isinstance(n, ast.Compare):
            return ir.Compare(ops=tuple(_CMP[type(o)] for o in n.ops),
                              operands=tuple(self.expr(x) for x in [n.left, *n.comparators]),
                              span=sp)
        if isinstance(n, ast.BoolOp):
            return ir.BoolOp(op="and" if isinstance(n.op, ast.And) else "or",
                             values=tuple(self.expr(v) for v in n.values), span=sp)
        if isinstance(n, ast.IfExp):
            return ir.IfExp(cond=self.expr(n.test), then=self.expr(n.body),
                            orelse=self.expr(n.orelse), span=sp)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            return ir.Call(func=n.func.id, args=tuple(self.expr(a) for a in n.args), span=sp)
        if isinstance(n, ast.List):
            return ir.ListExpr(items=tuple(self.expr(i) for i in n.elts), span=sp)
        raise ValueError(f"unsupported expression {ast.dump(n)}")

    def _name(self, name: str, sp: Span) -> ir.Expr:
        if name == "me":
            return ir.Me(span=sp)
        if name == "nranks":
            return ir.NRanks(span=sp)
        if name in ("True", "False"):
            return ir.Const(value=name == "True", span=sp)
        if name in self.params:
            return ir.ParamRef(name=name, span=sp)
        return ir.Var(name=name, span=sp)

    def region(self, n: ast.expr) -> ir.Region:
        sp = self.span(n)
        start = stop = None
        if isinstance(n, ast.Subscript):
            assert isinstance(n.slice, ast.Slice)
            start = self.expr(n.slice.lower) if n.slice.lower else None
            stop = self.expr(n.slice.upper) if n.slice.upper else None
            n = n.value
        init = False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "init":
            init, n = True, n.args[0]
        rank = None
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            rank, n = self.expr(n.right), n.left
        assert isinstance(n, ast.Name), ast.dump(n)
        return ir.Region(window=n.id, start=start, stop=stop, rank=rank, init=init, span=sp)

    # ------------------------------------------------------------------ statements

    def stmts(self, body: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        return tuple(s for s in (self.stmt(b) for b in body) if s is not None)

    def stmt(self, s: ast.stmt) -> ir.Stmt | None:
        sp = self.span(s)
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.For):
            return self._for(s, sp)
        if isinstance(s, ast.If):
            return ir.If(cond=self.expr(s.test), body=self.stmts(s.body),
                         orelse=self.stmts(s.orelse), span=sp)
        assert isinstance(s, ast.Expr), ast.dump(s)
        if isinstance(s.value, ast.Compare):
            c = s.value
            return ir.Check(op=_CMP[type(c.ops[0])], left=self.region(c.left),
                            right=self.region(c.comparators[0]), span=sp)
        return self.op(s.value)

    def _for(self, s: ast.For, sp: Span) -> ir.Stmt:
        assert isinstance(s.target, ast.Name)
        it = s.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in _ISSUERS:
            return ir.IssuerBlock(kind=_ISSUERS[it.func.id], var=s.target.id,
                                  iter=self.expr(it.args[0]), body=self.stmts(s.body), span=sp)
        return ir.For(var=s.target.id, iter=self.expr(it), body=self.stmts(s.body), span=sp)

    def op(self, call: ast.expr) -> ir.Op:
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        name = OpKind(call.func.id)
        specs = SIGNATURES[name]
        positional = [p for p in specs if p.positional]
        args = {positional[i].name: a for i, a in enumerate(call.args)}
        args.update({k.arg: k.value for k in call.keywords if k.arg})
        kinds = {p.name: p.kind for p in specs}
        values = {key: self._arg(kinds[key], node) for key, node in args.items()}
        return make_op(name, values, self.span(call))

    def _arg(self, kind: str, n: ast.expr) -> Any:
        if kind == "region":
            return self.region(n)
        if kind in ("signal", "mode"):
            assert isinstance(n, ast.Constant)
            return ir.SignalKind(n.value) if kind == "signal" else ir.Mode(n.value)
        if kind == "bool":
            assert isinstance(n, ast.Constant)
            return bool(n.value)
        if kind == "counter":
            assert isinstance(n, ast.Name)
            return n.id
        return self.expr(n)


def expr(text: str, params: Iterable[str] = ()) -> ir.Expr:
    reader = _Reader(text, params)
    return reader.expr(ast.parse(text, mode="eval").body)


def body(text: str, params: Iterable[str] = ()) -> tuple[ir.Stmt, ...]:
    text = textwrap.dedent(text).strip("\n")
    reader = _Reader(text, params)
    return reader.stmts(ast.parse(text).body)


def protocol(
    name: str = "p",
    *,
    params: Mapping[str, int | str] | None = None,
    bytes_params: Iterable[str] = (),
    team: str | None = None,
    queues: int | str | None = 1,
    windows: Mapping[str, str] | None = None,
    counters: Iterable[str] = (),
    kernels: Iterable[tuple[str, str | int, str | int | None, str]] = (),
    ensure: str = "",
) -> ir.Protocol:
    """A protocol from texts: `kernels` are `(name, threads, blocks, body)`."""
    params = dict(params or {})
    names = list(params)
    file = SourceFile(f"<{name}>", f"protocol {name}")
    span = Span(file, 0, len(file.text))
    ptype = {n: ir.ParamType.BYTES if n in set(bytes_params) else ir.ParamType.INT for n in names}
    return ir.Protocol(
        name=name,
        params=tuple(ir.Param(name=n, type=ptype[n], default=_x(v, names)) for n, v in
                     params.items()),
        team=ir.Team(size=_x(team, names) if team is not None else None),
        queues=None if queues is None else _x(queues, names),
        windows=tuple(ir.Window(name=w, size=expr(size, names))
                      for w, size in (windows or {}).items()),
        counters=tuple(ir.Counter(name=c) for c in counters),
        kernels=tuple(ir.Kernel(name=k, threads=_x(t, names),
                                blocks=None if b is None else _x(b, names), body=body(text, names))
                      for k, t, b, text in kernels),
        ensure=body(ensure, names) if ensure else (),
        span=span,
    )


def _x(value: int | str, params: Iterable[str]) -> ir.Expr:
    return expr(str(value), params)
