"""A fast sample of the differential run (benchmarks/differential.py runs thousands).

Random well-formed protocols, judged by the checker and by the simulator: they must
agree, with the same codes or codes that differ in a way the table of explained
differences (docs/checker.md, "Differential testing") accounts for.
"""

from __future__ import annotations

import random

import pytest

from tests.differential.gen import MUTATIONS, SHAPES, generate
from tests.differential.judge import EXPLAINED, explain, judge

SAMPLE = 80


def _sample() -> list[tuple[int, random.Random]]:
    return [(i, random.Random(1000 + i)) for i in range(SAMPLE)]



@pytest.mark.parametrize("i", range(SAMPLE))
def test_checker_and_simulator_agree(i: int) -> None:
    p = generate(random.Random(1000 + i))
    v = judge(p, exhaustive=0)
    assert v.agree, (f"protocol {i} ({p.shape}, mutation {p.mutation}): checker "
                     f"{sorted(v.lint)}, simulator {sorted(v.sim)}\n{p.text}")


LOADS = 16  # protocols of run-time lengths read with `load` (the `header` shape)


@pytest.mark.parametrize("i", range(LOADS))
def test_checker_and_simulator_agree_on_loads(i: int) -> None:
    """Count headers, loads and puts of loaded lengths, with and without their bugs: every
    launch of the simulator has its own counts, so a stale one is a wrong value too."""
    p = generate(random.Random(3000 + i), shapes=frozenset({"header"}))
    assert "loads" in p.features
    v = judge(p, exhaustive=0)
    assert v.agree, (f"protocol {i} (mutation {p.mutation}): checker {sorted(v.lint)}, "
                     f"simulator {sorted(v.sim)}\n{p.text}")


def test_the_load_sample_holds_correct_and_broken_protocols() -> None:
    muts = {generate(random.Random(3000 + i), shapes=frozenset({"header"})).mutation
            for i in range(LOADS)}
    assert "none" in muts and len(muts) >= 4, muts


def test_the_sample_holds_correct_and_broken_protocols() -> None:
    verdicts = [bool(judge(generate(rng), exhaustive=0).lint) for _, rng in _sample()[:30]]
    assert 5 < sum(verdicts) < 25, verdicts


def test_the_generator_writes_every_shape_and_mutation() -> None:
    rng = random.Random(7)
    seen = {(p.shape, p.mutation) for p in (generate(rng, mutate=0.9) for _ in range(1500))}
    shapes = {s for s, _ in seen}
    assert shapes == set(SHAPES)
    missing = {(s, m) for s in SHAPES for m in MUTATIONS[s] if (s, m) not in seen}
    assert not missing, missing


def test_a_code_only_one_judge_reports_needs_a_row() -> None:
    f = frozenset
    assert explain(f({"E032"}), f({"E032"})) == ""  # the same: nothing to explain
    assert explain(f({"E032"}), f()) == ""  # a race only the checker sees: no row
    assert explain(f(), f({"E030"})) == ""  # a hang only the simulator sees: no row
    assert explain(f({"E024"}), f({"E032"}))  # the checker names the cause
    assert explain(f({"E024"}), f({"E031"})) == ""  # not an alternative of E024
    assert explain(f({"E026", "E032"}), f({"E026"}))  # E032 folded into E026
    assert explain(f({"E032"}), f({"E026"})) == ""  # ... only given E026


def test_every_row_gives_its_reason() -> None:
    for row in EXPLAINED:
        assert row.why and row.code not in row.alternatives, row
