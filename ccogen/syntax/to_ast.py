"""lark parse tree -> AST (`ccogen.syntax.ast`), attaching a span to every node."""

from __future__ import annotations

import ast as pyast
import builtins
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from lark import Token, Tree
from lark.exceptions import VisitError
from lark.tree import Meta

from ccogen.diag import error
from ccogen.errors import DiagnosticError
from ccogen.source import SourceFile, Span
from ccogen.syntax import ast as A

# CPython 3.11's AST validator keeps its recursion depth in interpreter-wide state
# (python/cpython#106905): literal_eval from two threads at once fails with
# "AST constructor recursion depth mismatch". Parses share this module, so
# string literals are decoded one at a time.
_LITERAL_LOCK = threading.Lock()

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def int_literal(text: str) -> int:
    """Python's integer literals: `1_024`, `0x10`, `0b1`; `02` is not one (ValueError)."""
    return int(text, 0)


def _code_end(line: str) -> int:
    """Length of `line` without a trailing `# comment` (quotes respected)."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "\"'":
            quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":
            return i
        i += 1
    return len(line)


def _trim_end(text: str, start: int, end: int) -> int:
    """Drop the newline, indentation and comments a statement's `_NL` token swallowed."""
    end = min(end, len(text))
    start = min(start, end)
    while True:
        while end > start and text[end - 1].isspace():
            end -= 1
        line_start = text.rfind("\n", start, end) + 1
        line_start = max(line_start, start)
        cut = line_start + _code_end(text[line_start:end])
        if cut >= end:
            return end
        end = cut


class ToAst:
    """Build AST nodes bottom-up; each method receives the rule's meta for its span.

    `transform` walks the tree itself, as lark's `Transformer` with `v_args(meta=True)`
    does (children first; a rule without a method stays a `Tree`; an exception other
    than a `DiagnosticError` comes out as lark's `VisitError`), without lark's wrapper
    object built per call (a fifth of the parse, docs/performance.md)."""

    def __init__(self, file: SourceFile) -> None:
        self.file = file

    def transform(self, tree: Tree[Token]) -> A.ProtocolDecl:
        return self._walk(tree, _rules())  # type: ignore[no-any-return]

    def _walk(self, tree: Tree[Token], rules: dict[str, Callable[..., Any]]) -> Any:
        children = [self._walk(c, rules) if isinstance(c, Tree) else c for c in tree.children]
        method = rules.get(tree.data)
        if method is None:
            return Tree(tree.data, children, tree.meta)
        try:
            return method(self, tree.meta, children)
        except DiagnosticError:
            raise
        except Exception as exc:
            raise VisitError(tree.data, tree, exc) from exc

    def _span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.file, 0, 0)
        start = min(meta.start_pos, len(self.file.text))
        return Span(self.file, start, _trim_end(self.file.text, start, meta.end_pos))

    def _tok(self, tok: Token) -> Span:
        limit = len(self.file.text)
        start = min(tok.start_pos or 0, limit)
        return Span(self.file, start, min(tok.end_pos if tok.end_pos is not None else start, limit))

    def _name(self, tok: Token) -> A.Name:
        return A.Name(id=str(tok), span=self._tok(tok))

    # ----------------------------------------------------------------- protocol
    def start(self, meta: Meta, children: list[Any]) -> A.ProtocolDecl:
        return children[-1]  # type: ignore[no-any-return]

    def protocol(self, meta: Meta, c: list[Any]) -> A.ProtocolDecl:
        name, params, doc, *decls = c
        return A.ProtocolDecl(name=self._name(name), params=tuple(params or ()), doc=doc,
                              decls=tuple(decls), span=self._span(meta))

    def params(self, meta: Meta, c: list[Any]) -> list[A.ParamDecl]:
        return [p for p in c if p is not None]

    def param(self, meta: Meta, c: list[Any]) -> A.ParamDecl:
        return A.ParamDecl(name=self._name(c[0]), type=self._name(c[1]), default=c[2],
                           span=self._span(meta))

    def docstring(self, meta: Meta, c: list[Any]) -> A.String:
        return self.string(meta, c)

    def team_decl(self, meta: Meta, c: list[Any]) -> A.TeamDecl:
        return A.TeamDecl(kind=self._name(c[0]), size=c[1], span=self._span(meta))

    def queues_decl(self, meta: Meta, c: list[Any]) -> A.QueuesDecl:
        return A.QueuesDecl(count=c[0], span=self._span(meta))

    def setting_decl(self, meta: Meta, c: list[Any]) -> A.SettingDecl:
        return A.SettingDecl(name=self._name(c[0]), value=self._name(c[1]),
                             span=self._span(meta))

    def window_decl(self, meta: Meta, c: list[Any]) -> A.WindowDecl:
        option = self._name(c[2]) if c[2] is not None else None
        return A.WindowDecl(name=self._name(c[0]), size=c[1], option=option, option_value=c[3],
                            span=self._span(meta))

    def buffer_decl(self, meta: Meta, c: list[Any]) -> A.BufferDecl:
        return A.BufferDecl(name=self._name(c[0]), type=c[1], span=self._span(meta))

    def counter_decl(self, meta: Meta, c: list[Any]) -> A.CounterDecl:
        return A.CounterDecl(name=self._name(c[0]), span=self._span(meta))

    def kernel_decl(self, meta: Meta, c: list[Any]) -> A.KernelDecl:
        return A.KernelDecl(name=self._name(c[0]), args=tuple(c[1] or ()), body=c[2],
                            span=self._span(meta))

    def kernel_args(self, meta: Meta, c: list[Any]) -> list[A.Argument]:
        return [a for a in c if a is not None]

    def kernel_arg(self, meta: Meta, c: list[Any]) -> A.Argument:
        return A.Argument(keyword=str(c[0]), value=c[1], span=self._span(meta))

    def ensure_decl(self, meta: Meta, c: list[Any]) -> A.EnsureDecl:
        return A.EnsureDecl(body=c[0], span=self._span(meta))

    def require_decl(self, meta: Meta, c: list[Any]) -> A.RequireDecl:
        return A.RequireDecl(body=c[0], span=self._span(meta))

    # ----------------------------------------------------------------- statements
    def suite(self, meta: Meta, c: list[Any]) -> tuple[A.AStmt, ...]:
        return tuple(c)

    def expr_stmt(self, meta: Meta, c: list[Any]) -> A.ExprStmt:
        return A.ExprStmt(value=c[0], span=self._span(meta))

    def assign_stmt(self, meta: Meta, c: list[Any]) -> A.AssignStmt:
        return A.AssignStmt(var=self._name(c[0]), value=c[1], span=self._span(meta))

    def pass_stmt(self, meta: Meta, c: list[Any]) -> A.PassStmt:
        return A.PassStmt(span=self._span(meta))

    def if_stmt(self, meta: Meta, c: list[Any]) -> A.IfStmt:
        cond, body, *rest = c
        orelse = rest.pop() if rest else None
        branches = ((cond, body), *rest)
        return A.IfStmt(branches=tuple(branches), orelse=orelse, span=self._span(meta))

    def elif_clause(self, meta: Meta, c: list[Any]) -> tuple[A.AExpr, tuple[A.AStmt, ...]]:
        return (c[0], c[1])

    def else_clause(self, meta: Meta, c: list[Any]) -> tuple[A.AStmt, ...]:
        return c[0]  # type: ignore[no-any-return]

    def for_stmt(self, meta: Meta, c: list[Any]) -> A.ForStmt:
        return A.ForStmt(var=self._name(c[0]), iter=c[1], body=c[2], span=self._span(meta))

    def issuer_stmt(self, meta: Meta, c: list[Any]) -> A.IssuerStmt:
        return A.IssuerStmt(kind=str(c[0]), var=self._name(c[1]), iter=c[2], body=c[3],
                            span=self._span(meta))

    # ----------------------------------------------------------------- expressions
    def ifexp(self, meta: Meta, c: list[Any]) -> A.IfExp:
        return A.IfExp(then=c[0], cond=c[1], orelse=c[2], span=self._span(meta))

    def or_op(self, meta: Meta, c: list[Any]) -> A.BoolOp:
        return A.BoolOp(op="or", values=tuple(c), span=self._span(meta))

    def and_op(self, meta: Meta, c: list[Any]) -> A.BoolOp:
        return A.BoolOp(op="and", values=tuple(c), span=self._span(meta))

    def not_op(self, meta: Meta, c: list[Any]) -> A.Unary:
        return A.Unary(op="not", operand=c[0], span=self._span(meta))

    def compare(self, meta: Meta, c: list[Any]) -> A.Compare:
        return A.Compare(ops=tuple(str(t) for t in c[1::2]), operands=tuple(c[0::2]),
                         span=self._span(meta))

    def binop(self, meta: Meta, c: list[Any]) -> A.BinOp:
        return A.BinOp(op=str(c[1]), left=c[0], right=c[2], span=self._span(meta))

    def pow(self, meta: Meta, c: list[Any]) -> A.BinOp:
        return A.BinOp(op="**", left=c[0], right=c[1], span=self._span(meta))

    def unary(self, meta: Meta, c: list[Any]) -> A.Unary:
        return A.Unary(op=str(c[0]), operand=c[1], span=self._span(meta))

    def call(self, meta: Meta, c: list[Any]) -> A.Call:
        return A.Call(func=c[0], args=tuple(c[1] or ()), span=self._span(meta))

    def call_gen(self, meta: Meta, c: list[Any]) -> A.Call:
        func, elt, (var, it, cond, comp_meta) = c
        gen = A.ListComp(elt=elt, var=var, iter=it, cond=cond, generator=True,
                         span=Span(self.file, elt.span.start, comp_meta.end))
        return A.Call(func=func, args=(A.Argument(keyword=None, value=gen, span=gen.span),),
                      span=self._span(meta))

    def comp_for(self, meta: Meta, c: list[Any]) -> tuple[Any, ...]:
        return (self._name(c[0]), c[1], c[2], self._span(meta))

    def listcomp(self, meta: Meta, c: list[Any]) -> A.ListComp:
        elt, (var, it, cond, _) = c
        return A.ListComp(elt=elt, var=var, iter=it, cond=cond, generator=False,
                          span=self._span(meta))

    def arguments(self, meta: Meta, c: list[Any]) -> list[A.Argument]:
        return [a for a in c if a is not None]

    def pos_arg(self, meta: Meta, c: list[Any]) -> A.Argument:
        return A.Argument(keyword=None, value=c[0], span=self._span(meta))

    def kw_arg(self, meta: Meta, c: list[Any]) -> A.Argument:
        return A.Argument(keyword=str(c[0]), value=c[1], span=self._span(meta))

    def subscript(self, meta: Meta, c: list[Any]) -> A.Subscript:
        value, (start, stop, is_slice) = c
        return A.Subscript(value=value, start=start, stop=stop, is_slice=is_slice,
                           span=self._span(meta))

    def slice(self, meta: Meta, c: list[Any]) -> tuple[Any, Any, bool]:
        return (c[0], c[1], True)

    def index(self, meta: Meta, c: list[Any]) -> tuple[Any, Any, bool]:
        return (c[0], None, False)

    def name(self, meta: Meta, c: list[Any]) -> A.Name:
        return self._name(c[0])

    def _int(self, meta: Meta, text: str) -> int:
        try:
            return int_literal(text)
        except ValueError:
            raise DiagnosticError([error(
                "E001", f"invalid integer literal `{text}`", self._span(meta),
                "leading zeros are not allowed", help=f"write `{text.lstrip('0') or '0'}`, or "
                "`0o`/`0x`/`0b` for another base")]) from None

    def number(self, meta: Meta, c: list[Any]) -> A.Number:
        return A.Number(value=self._int(meta, str(c[0])), span=self._span(meta), text=str(c[0]))

    def float(self, meta: Meta, c: list[Any]) -> A.Float:
        return A.Float(value=float(str(c[0]).replace("_", "")), span=self._span(meta),
                       text=str(c[0]))

    def size(self, meta: Meta, c: list[Any]) -> A.Size:
        return A.Size(value=self._int(meta, str(c[0])) * UNITS[str(c[1])], span=self._span(meta))

    def string(self, meta: Meta, c: list[Any]) -> A.String:
        try:
            with _LITERAL_LOCK:
                value = pyast.literal_eval(str(c[0]))
        except (ValueError, SyntaxError) as exc:
            reason = getattr(exc, "msg", None) or str(exc)
            raise DiagnosticError([error("E001", "invalid string literal", self._span(meta),
                                         reason)]) from None
        return A.String(value=value, span=self._span(meta))

    def true(self, meta: Meta, c: list[Any]) -> A.Bool:
        return A.Bool(value=True, span=self._span(meta))

    def false(self, meta: Meta, c: list[Any]) -> A.Bool:
        return A.Bool(value=False, span=self._span(meta))

    def list(self, meta: Meta, c: list[Any]) -> A.List:
        return A.List(items=tuple(x for x in c if x is not None), span=self._span(meta))

    def remote(self, meta: Meta, c: builtins.list[Any]) -> A.Remote:
        return A.Remote(window=self._name(c[0]), rank=c[1], span=self._span(meta))


@cache
def _rules() -> dict[str, Callable[..., Any]]:
    """ToAst's rule methods by rule name (every public method but `transform`)."""
    return {name: f for name, f in vars(ToAst).items()
            if not name.startswith("_") and name != "transform" and callable(f)}
