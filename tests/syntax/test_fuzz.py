"""Fuzzing the front end: random and mutated texts give diagnostics, never exceptions.

Over 10,000 cases per run: mutations of every library protocol and lint fixture
(deleted, duplicated, inserted and swapped characters, tokens and lines), random token
soup, and random IR printed then checked.  Parsing, lowering and instantiation must
return coded diagnostics with spans inside the text; any other exception fails.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccogen.diag import Diagnostic
from ccogen.diag.codes import RULES
from ccogen.driver import CheckOptions, check_protocol, check_text
from ccogen.errors import DiagnosticError
from ccogen.instantiate import instantiate
from ccogen.ir import nodes as ir
from ccogen.syntax import parse_ir, to_source
from tests.helpers import LIBRARY_TEST_PARAMS
from tests.strategies import protocols

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [p.read_text() for p in sorted((ROOT / "protocols").glob("*.cco"))
         if p.stem not in LIBRARY_TEST_PARAMS] + [  # the MoE prefill shape: minutes per run
    p.read_text() for p in sorted((ROOT / "tests" / "lint").glob("*-ok.cco"))]
TOKENS = ["protocol", "team", "lsa", "world", "queues", "auto", "window", "counter", "kernel",
          "ensure", "if", "elif", "else", "for", "in", "lanes", "warps", "blocks", "pass", "put",
          "get", "copy", "commit", "quiet", "wait_signal", "wait_count", "barrier", "fence", "me",
          "nranks", "peers()", "range(", "init(", "@", ":", "(", ")", "[", "]", ",", "=", "==",
          "+", "-", "*", "//", "%", "**", "0", "1", "-1", "4 KiB", "\n", "    ", "\t", '"remote"',
          '"same_queue"', "True", "x", "send", "recv", "#", '"""', "\\\n", "signal=", "queue="]
OPTIONS = CheckOptions(ranks=(2,))


def _well_formed(diags: tuple[Diagnostic, ...] | list[Diagnostic], text: str) -> None:
    assert diags, "an error was raised without a diagnostic"
    for d in diags:
        assert d.code in RULES, d.code
        if d.span is not None:
            assert 0 <= d.span.start <= d.span.end <= len(d.span.file.text)


# Texts `_front_end` has already passed.  Hypothesis draws some texts more than once (a
# third of the 8000 mutated ones, by its own mutation of earlier examples); the front end
# is deterministic, so a text seen again is skipped instead of parsed again: every
# distinct text drawn is still checked once, with the same assertions.
_PASSED: set[str] = set()


def _front_end(text: str) -> None:
    """Parse, lower and instantiate at 2 ranks: only diagnostics may come out."""
    if text in _PASSED:
        return
    _check_front_end(text)
    _PASSED.add(text)


def _check_front_end(text: str) -> None:
    try:
        protocol = parse_ir(text, "fuzz.cco")
    except DiagnosticError as exc:
        _well_formed(exc.diagnostics, text)
        return
    instance, diags = instantiate(protocol, 2, {})
    if instance is None:
        _well_formed(diags, text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        text = _mutate(draw, text)
    return text


# the strategies that do not depend on the text, built once (the same draws)
_TOKEN = st.sampled_from(TOKENS)
_KIND = st.sampled_from(["delete", "insert", "duplicate", "swap", "line", "indent", "char"])
_INDENT = st.sampled_from(["", " ", "  ", "        "])
_CHAR = st.characters(codec="utf-8", exclude_categories=("Cs",))


def _mutate(draw: st.DrawFn, text: str) -> str:
    if not text:
        return draw(_TOKEN)
    i = draw(st.integers(0, len(text) - 1))
    j = draw(st.integers(i, min(len(text), i + 12)))
    kind = draw(_KIND)
    if kind == "delete":
        return text[:i] + text[j:]
    if kind == "insert":
        return text[:i] + draw(_TOKEN) + text[i:]
    if kind == "duplicate":
        return text[:j] + text[i:j] + text[j:]
    if kind == "swap":
        return text[:i] + text[j:j + (j - i)] + text[i:j] + text[j + (j - i):]
    lines = text.split("\n")
    k = draw(st.integers(0, len(lines) - 1))
    if kind == "line":
        lines.insert(draw(st.integers(0, len(lines))), lines[k])
    elif kind == "indent":
        lines[k] = draw(_INDENT) + lines[k].lstrip()
    else:
        char = draw(_CHAR)
        return text[:i] + char + text[i + 1:]
    return "\n".join(lines)


@settings(max_examples=8000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_mutated_protocols_give_only_diagnostics(text: str) -> None:
    _front_end(text)


@settings(max_examples=2000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_token_soup_gives_only_diagnostics(text: str) -> None:
    _front_end("protocol p():\n    " + text)


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_the_whole_checker_survives_mutations(text: str) -> None:
    result = check_text(text, "fuzz.cco", OPTIONS)
    for d in result.diagnostics:
        assert d.code in RULES


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_random_ir_checks_without_exceptions(p: ir.Protocol) -> None:
    parsed = parse_ir(to_source(p), "gen.cco")
    check_protocol(parsed, OPTIONS)


def test_parsing_from_many_threads_is_safe() -> None:
    """The cached parser is shared: concurrent parses must not corrupt each other."""
    from concurrent.futures import ThreadPoolExecutor

    texts = SEEDS * 4
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda t: parse_ir(t, "t.cco"), texts))
    assert results == [parse_ir(t, "t.cco") for t in texts]
