"""`require` bounds' sums over a range evaluated at once (ccogen/instantiate/bounds_vector.py)
and `Bounds.materialize` over families with numpy, against the term-by-term evaluation on
`Rt` values (`VECTOR_SUMS = False`) and `Bounds.get` of each cell (the reference):
the same interval of every element, the same findings, on the library protocols, the
language reference's examples and random small sums."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ccogen.instantiate import precondition_state
from ccogen.instantiate import runtime as rt
from ccogen.instantiate.bounds_vector import SumBounds
from ccogen.ir import nodes as ir
from ccogen.syntax import parse_ir

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"tokens": 6, "hidden": 4, "k": 3}
FILES = sorted([*(ROOT / "protocols").glob("*.cco"),
                *(ROOT / "tests" / "torch" / "protocols").glob("*.cco"),
                ROOT / "tests" / "runtime" / "data" / "stall" / "moe_ll_dispatch_fp8.cco"])
SPEC = [b for b in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "reference" /
                                                      "language.md").read_text("utf-8"), re.S)
        if re.search(r"^\s*protocol \w+\(", b, re.M)]


def _bounds(protocol: ir.Protocol, nranks: int, vector: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[dict[Any, Any], list[str], int]:
    """Every element's interval, the findings' texts, and how many sums were vectorised."""
    monkeypatch.setattr(rt, "VECTOR_SUMS", vector)
    taken = 0
    original = SumBounds.sum_bound

    def counting(self: SumBounds, e: ir.GenExpr, env: Any) -> Any:
        nonlocal taken
        out = original(self, e, env)
        taken += out is not None
        return out

    monkeypatch.setattr(SumBounds, "sum_bound", counting)
    given = {k: v for k, v in SMALL.items() if any(p.name == k for p in protocol.params)}
    bounds, _, _, findings = precondition_state(protocol, nranks, given)
    # the reference asks every cell in order (`Bounds.get`), as `materialize` did before it
    # asked the cells between deferred ones together
    cells = bounds.materialize() if vector else {
        c: bounds.get(c, (None, None)) for c in sorted(bounds.cells())}
    texts = [repr(d)
             for d in findings.diagnostics()]
    monkeypatch.setattr(SumBounds, "sum_bound", original)
    return cells, texts, taken


def _same(protocol: ir.Protocol, nranks: int, monkeypatch: pytest.MonkeyPatch) -> int:
    vector = _bounds(protocol, nranks, True, monkeypatch)
    reference = _bounds(protocol, nranks, False, monkeypatch)
    assert vector[:2] == reference[:2]
    assert reference[2] == 0
    return vector[2]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
@pytest.mark.parametrize("nranks", [2, 3])
def test_library_bounds_are_the_reference(path: Path, nranks: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    protocol = parse_ir(path.read_text("utf-8"), path.name)
    taken = _same(protocol, nranks, monkeypatch)
    sums = "rank_counts[p] == sum(" in path.read_text("utf-8") or \
        "expert_counts[g] == sum(" in path.read_text("utf-8")
    assert (taken > 0) == sums  # the MoE counts' bounds are vectorised, nothing else is


@pytest.mark.parametrize("text", SPEC, ids=[re.search(r"protocol (\w+)", b).group(1)  # type: ignore[union-attr]
                                            for b in SPEC])
def test_reference_examples_bounds_are_the_reference(text: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _same(parse_ir(text, "spec.cco"), 2, monkeypatch)


# ----------------------------------------------------------------------------- random sums

LEAVES = ("t", "j", "p", "k", "0", "1", "2", "-1", "True", "me", "topk[t * k + j]",
          "topk[t]", "ntok[0]", "wide[j]", "n", "flags[t]")


def _expr(rng: random.Random, depth: int, inner: bool) -> str:
    """A random term over `t` (and `j` inside an inner sum, max or min)."""
    if depth == 0 or rng.random() < 0.25:
        leaf = rng.choice(LEAVES)
        return "t" if (leaf in ("j", "topk[t * k + j]", "wide[j]") and not inner) else leaf
    pick = rng.random()
    a, b = _expr(rng, depth - 1, inner), _expr(rng, depth - 1, inner)
    if pick < 0.4:
        op = rng.choice(("<", "<=", ">", ">=", "==", "!="))
        return f"({a} {op} {b})"
    if pick < 0.75:
        op = rng.choice(("+", "-", "*", "*", "//", "%"))
        if op in ("//", "%"):
            return f"({a} {op} {rng.choice(('2', '3', 'k', '-2'))})"
        return f"({a} {op} {b})"
    if pick < 0.9 and not inner:
        func = rng.choice(("max", "min", "sum"))
        return f"{func}({_expr(rng, depth - 1, True)} for j in range(k))"
    return f"{rng.choice(('max', 'min'))}({a}, {b})"


def _protocol(term: str) -> str:
    return (
        "protocol fuzzed(tokens: int = 5, k: int = 3):\n"
        "    team lsa\n"
        "    buffer topk: i32[tokens * k]\n"
        "    buffer flags: i32[tokens]\n"
        "    buffer wide: i32[k]\n"
        "    buffer ntok: i32[1]\n"
        "    buffer counts: i32[nranks]\n"
        "    window out: u8[64]\n"
        "    require:\n"
        "        0 <= ntok[0] <= tokens\n"
        "        for i in range(tokens * k):\n"
        "            0 <= topk[i] < nranks\n"
        "        for i in range(tokens):\n"
        "            flags[i] == 1\n"
        "        for i in range(k):\n"
        "            -3 <= wide[i] <= 40\n"
        "        n = ntok[0]\n"
        "        for p in ranks():\n"
        f"            counts[p] <= sum({term} for t in range(tokens))\n"
        f"            counts[p] >= sum({term} for t in range(tokens))\n"
        "    kernel go(threads=32):\n"
        "        m = load(counts[0])\n"
        "        copy(dst=out[0:m], src=out[8:8 + m])\n")


def _terms(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield _expr(rng, rng.randint(1, 4), False)


def test_random_sums_bound_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = 0
    for term in _terms(300, seed=26):
        protocol = parse_ir(_protocol(term), "fuzzed.cco")
        try:
            taken += _same(protocol, 2, monkeypatch) > 0
        except AssertionError as exc:
            raise AssertionError(f"term {term}: {exc}") from None
    assert taken >= 60, taken  # many random terms are in the vectorised subset (83 of 300)


def test_a_lone_element_sum_and_errors_go_term_by_term(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sum(x[t] for t in range(1))`-like forms and division by zero: the reference path
    (which bounds the element, or reports E004 at the line)."""
    for term in ("(flags[t] * (t == 0))", "(t // (t - t))", "(ntok[0] - ntok[0])",
                 "max(topk[t * k + j] for j in range(0))"):
        protocol = parse_ir(_protocol(term), "fuzzed.cco")
        assert _same(protocol, 2, monkeypatch) == 0, term
