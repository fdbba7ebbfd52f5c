"""Loops checked on three iterations find what the unrolled instance finds.

The unrolled instance is the oracle (`CheckOptions(sample_loops=False)`, the switch
`CCOGEN_EXACT_LOOPS=1`): on every library protocol (at small shapes, where unrolling is
cheap), every example of the language reference, every lint fixture with a loop, and
random protocols with long loops (`tests.differential.loops`) and of the differential
generator, the two give the same findings (codes and lines).
`benchmarks/sampling_differential.py` runs thousands; docs/checker.md has the figure.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.differential.gen import generate
from tests.differential.loops import disagreement, loop_protocol
from tests.test_spec_examples import NAMES, PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = sorted((ROOT / "protocols").glob("*.cco"))
SMALL = {"tokens": 8, "hidden": 16}  # the MoE protocols, unrolled in a second
FIXTURES = sorted(p for p in (ROOT / "tests" / "lint").glob("*.cco")
                  if "for " in p.read_text(encoding="utf-8"))


def _params(text: str) -> dict[str, int]:
    return {k: v for k, v in SMALL.items() if f"{k}: int" in text}


@pytest.mark.parametrize("path", LIBRARY, ids=[p.stem for p in LIBRARY])
def test_library_protocols_agree(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not disagreement(text, str(path), ranks=(2, 4), params=_params(text))


@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_reference_examples_agree(text: str) -> None:
    assert not disagreement(text, "language.md", ranks=(2, 3))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_lint_fixtures_agree(path: Path) -> None:
    assert not disagreement(path.read_text(encoding="utf-8"), str(path), ranks=(2, 3))


@pytest.mark.parametrize("i", range(40))
def test_random_loop_protocols_agree(i: int) -> None:
    text, label = loop_protocol(random.Random(5000 + i))
    why = disagreement(text, f"loops{i}.cco", ranks=(2, 3))
    assert not why, f"{label}: {why}\n{text}"


@pytest.mark.parametrize("i", range(20))
def test_random_differential_protocols_agree(i: int) -> None:
    p = generate(random.Random(7000 + i))
    assert not disagreement(p.text, f"gen{i}.cco", ranks=(p.ranks,))


def test_the_sample_runs_loops_on_three_iterations_and_unrolls_others() -> None:
    """The random loops exercise both paths: sampled loops, and loops a condition
    sends back to unrolling (else the agreement above would prove nothing)."""
    from ccogen.driver import CheckOptions, check_text

    sampled = unrolled = 0
    for i in range(40):
        text, _ = loop_protocol(random.Random(5000 + i))
        result = check_text(text, "x.cco", CheckOptions(ranks=(2,), sample_loops=True))
        for inst in result.instances:
            sampled += sum(n.sampled for n in inst.loops)
            unrolled += sum(not n.sampled for n in inst.loops)
    assert sampled >= 10 and unrolled >= 3, (sampled, unrolled)
