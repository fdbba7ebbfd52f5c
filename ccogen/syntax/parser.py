"""Text -> AST.  One cached LALR parser; every lark error becomes an E001 diagnostic."""

from __future__ import annotations

import threading
from functools import cache

from lark import (
    Lark,
    Token,
    Tree,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.exceptions import VisitError
from lark.indenter import DedentError

from ccogen.diag import Diagnostic, error
from ccogen.errors import DiagnosticError
from ccogen.limits import MAX_DEPTH
from ccogen.source import SourceFile, Span
from ccogen.syntax import ast as A
from ccogen.syntax import tables
from ccogen.syntax.to_ast import ToAst


@cache
def _parser() -> Lark:
    """The LALR parser: from the tables shipped in the package when they are this
    grammar's (`ccogen.syntax.tables`), else built from `grammar.lark`."""
    return tables.build(tables.grammar_text(), tables.Layout())


# How expected terminals are shown to a person.
_FRIENDLY = {
    "_NL": "a new line", "_INDENT": "an indented block", "_DEDENT": "the end of the block",
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "UNIT": "a size unit",
    "COMP_OP": "a comparison", "ADD_OP": "`+` or `-`", "MUL_OP": "`*`, `//` or `%`",
    "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`", "COLON": "`:`",
    "COMMA": "`,`", "EQUAL": "`=`", "AT": "`@`", "$END": "the end of the file",
    "LANES": "`lanes`", "WARPS": "`warps`", "BLOCKS": "`blocks`",
}


def _show_terminal(name: str) -> str:
    if name in _FRIENDLY:
        return _FRIENDLY[name]
    pattern = _parser().get_terminal(name).pattern if name in _terminal_names() else None
    if pattern is not None and pattern.type == "str":
        return f"`{pattern.value}`"
    return name.lower()


@cache
def _terminal_names() -> frozenset[str]:
    return frozenset(t.name for t in _parser().terminals)


def _expected(names: set[str] | frozenset[str]) -> str:
    shown = sorted({_show_terminal(n) for n in names if not n.startswith("__")})
    if not shown or len(shown) > 6:
        return ""
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "_NL":
        return "end of line"
    if token.type in ("_INDENT", "_DEDENT"):
        return "a change of indentation"
    return f"`{token}`"


def _syntax_error(file: SourceFile, exc: UnexpectedInput) -> Diagnostic:
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        start = tok.start_pos if tok.start_pos is not None else len(file.text)
        if tok.type == "_NL":
            start = file.offset(tok.line or 1, tok.column or 1) if tok.line else start
        end = start + max(1, len(str(tok)) if tok.type not in ("_NL", "$END") else 1)
        expected = _expected(exc.accepts or exc.expected)
        msg = f"unexpected {_found(tok)}"
        label = f"expected {expected}" if expected else "not expected here"
    elif isinstance(exc, UnexpectedCharacters):
        start = exc.pos_in_stream or 0
        end = start + 1
        char = file.text[start : start + 1]
        msg = f"unexpected character `{char}`" if char.strip() else "unexpected whitespace"
        expected = _expected(exc.allowed or set())
        label = f"expected {expected}" if expected else "not expected here"
    else:  # UnexpectedEOF
        assert isinstance(exc, UnexpectedEOF)
        start = end = len(file.text)
        msg = "unexpected end of file"
        label = f"expected {_expected(set(exc.expected))}"
    span = Span(file, min(start, len(file.text)), min(end, len(file.text)))
    return error("E001", msg, span, label, help=_hint(file, span))


def _hint(file: SourceFile, span: Span) -> str | None:
    line = file.line_text(span.line).strip()
    if line.startswith(("if ", "elif ", "else", "for ", "lanes ", "warps ", "blocks ", "kernel ",
                        "ensure", "require", "protocol ")) and not line.endswith(":"):
        return "a block header ends with `:`"
    return None


def _dedent_error(file: SourceFile, exc: DedentError) -> Diagnostic:
    # lark does not say where; find the first line whose indentation matches no open level
    levels = [0]
    for lineno in range(1, len(file.line_starts) + 1):
        text = file.line_text(lineno)
        stripped = text.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(stripped)
        if indent > levels[-1]:
            levels.append(indent)
            continue
        while indent < levels[-1]:
            levels.pop()
        if indent != levels[-1]:
            begin = file.offset(lineno, 1)
            span = Span(file, begin, begin + indent)
            return error("E001", "unindent does not match any outer indentation level", span,
                         "this indentation", help="indent with the same spaces as the block it "
                         "belongs to")
    return error("E001", "inconsistent indentation", Span(file, 0, 0), "")


def _check_depth(file: SourceFile, tree: Tree) -> None:
    """E006 where the syntax tree is deeper than `MAX_DEPTH` (measured without recursion):
    every later stage (AST, lowering, evaluation, printing) recurses on it."""
    stack: list[tuple[Tree | Token, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, Tree):
            continue
        if depth > MAX_DEPTH:
            start = node.meta.start_pos if not node.meta.empty else 0
            line = file.position(start)[0]  # the whole line where it is too deep
            text = file.line_text(line)
            begin = file.offset(line, 1)
            span = Span(file, begin + len(text) - len(text.lstrip()), begin + len(text))
            raise DiagnosticError([error(
                "E006", f"the source is nested more than {MAX_DEPTH} levels deep", span,
                "too deep from here", notes=("an expression of more than about 120 terms, or "
                                             "more than about 60 nested blocks",),
                help="split the expression with a parameter or a helper loop, or flatten the "
                     "nesting (this limit is fixed)")])
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


# lark's layout post-lexer keeps state on the shared parser: one parse at a time
_LOCK = threading.Lock()


def parse_ast(file: SourceFile) -> A.ProtocolDecl:
    """Parse a whole `.cco` file; raise `DiagnosticError` with E001 on a syntax error.

    Thread-safe: parses are serialised (the cached parser's layout state is shared).
    """
    text = file.text if file.text.endswith("\n") else file.text + "\n"
    try:
        with _LOCK:
            tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise DiagnosticError([_syntax_error(file, exc)]) from None
    except DedentError as exc:
        raise DiagnosticError([_dedent_error(file, exc)]) from None
    _check_depth(file, tree)
    try:
        return ToAst(file).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, DiagnosticError):
            raise exc.orig_exc from None
        raise
