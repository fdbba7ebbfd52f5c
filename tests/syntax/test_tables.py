"""The shipped LALR tables (`ccogen.syntax.tables`): up to date with grammar.lark, used
only when they fit, and parsing every `.cco` of the repository exactly as the parser
built from the grammar does (trees, positions, syntax errors)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from lark import Lark, Token, Tree

from ccogen.errors import DiagnosticError
from ccogen.source import SourceFile
from ccogen.syntax import _grammar_tables, parser, tables
from tests.helpers import REPO_ROOT
from tests.syntax.test_fuzz import mutated

SOURCES = sorted(p for d in ("protocols", "tests", "examples", "docs")
                 for p in (REPO_ROOT / d).rglob("*.cco"))
SAME_LARK = lark.__version__ == _grammar_tables.LARK_VERSION


def _built() -> Lark:
    return Lark(tables.grammar_text(), postlex=tables.Layout(), **tables.OPTIONS)


def test_the_shipped_tables_are_this_grammars() -> None:
    assert tables.digest(tables.grammar_text()) == _grammar_tables.GRAMMAR_SHA256, (
        "grammar.lark changed: run `python -m ccogen.syntax.tables`")


@pytest.mark.skipif(not SAME_LARK, reason="tables written by another lark version: the "
                    "parser is built from the grammar (test_another_lark_builds)")
def test_the_shipped_module_is_what_the_generator_writes() -> None:
    # in a new interpreter, under another hash seed: the text does not depend on set order
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", "from ccogen.syntax import tables; print(tables.source("
         "tables.grammar_text(), tables.Layout()), end='')"],
        capture_output=True, text=True, check=True, env=env, cwd=REPO_ROOT).stdout
    shipped = Path(_grammar_tables.__file__).read_text(encoding="utf-8")
    assert out == shipped, "run `python -m ccogen.syntax.tables`"


def test_the_cli_parser_comes_from_the_tables() -> None:
    p = parser._parser()
    assert (p.source_path == "<deserialized>") == SAME_LARK


def test_another_grammar_or_lark_builds_from_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    edited = tables.grammar_text() + "\n// an edit\n"
    assert tables.build(edited, tables.Layout()).source_path != "<deserialized>"
    monkeypatch.setattr(_grammar_tables, "LARK_VERSION", "0.0.0")
    assert tables.build(tables.grammar_text(), tables.Layout()).source_path != "<deserialized>"


def _shape(node: Tree | Token) -> object:
    """The tree with every token's type, text and position, and every node's span."""
    if isinstance(node, Token):
        return (node.type, str(node), node.line, node.column, node.end_line, node.end_column,
                node.start_pos, node.end_pos)
    meta = None if node.meta.empty else (node.meta.line, node.meta.column, node.meta.end_line,
                                         node.meta.end_column)
    return (str(node.data), meta, [_shape(c) for c in node.children if c is not None],
            [c is None for c in node.children])


def _outcome(p: Lark, text: str) -> object:
    text = text if text.endswith("\n") else text + "\n"
    try:
        return _shape(p.parse(text))
    except lark.exceptions.UnexpectedToken as exc:
        return ("token", exc.token.type, exc.token.start_pos, sorted(exc.accepts or exc.expected))
    except lark.exceptions.UnexpectedInput as exc:
        return (type(exc).__name__, getattr(exc, "pos_in_stream", None),
                sorted(getattr(exc, "allowed", None) or getattr(exc, "expected", None) or []))
    except lark.indenter.DedentError as exc:
        return ("dedent", str(exc))


@pytest.mark.skipif(not SAME_LARK, reason="no shipped tables for this lark version")
def test_both_parsers_give_the_same_trees_and_errors() -> None:
    assert len(SOURCES) > 100
    shipped, built = parser._parser(), _built()
    assert shipped.source_path == "<deserialized>"
    broken = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        a, b = _outcome(shipped, text), _outcome(built, text)
        assert a == b, path
        broken += isinstance(a, tuple) and isinstance(a[0], str)
    assert broken > 0  # the syntax-error fixtures were among them


@pytest.mark.skipif(not SAME_LARK, reason="no shipped tables for this lark version")
def test_syntax_diagnostics_name_the_same_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [p.read_text(encoding="utf-8") for p in SOURCES if p.name.startswith("E001")]
    assert texts

    def messages() -> list[str]:
        out = []
        for text in texts:
            try:
                parser.parse_ast(SourceFile("x.cco", text))
            except DiagnosticError as exc:
                out.extend(f"{d.message} | {d.labels}" for d in exc.diagnostics)
        return out

    shipped = messages()
    built = _built()
    monkeypatch.setattr(parser, "_parser", lambda: built)
    monkeypatch.setattr(parser, "_terminal_names",
                        lambda: frozenset(t.name for t in built.terminals))
    assert messages() == shipped


_BUILT: list[Lark] = []


@pytest.mark.skipif(not SAME_LARK, reason="no shipped tables for this lark version")
@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_both_parsers_agree_on_mutated_protocols(text: str) -> None:
    if not _BUILT:
        _BUILT.append(_built())
    assert _outcome(parser._parser(), text) == _outcome(_BUILT[0], text)
