"""Roundings to f16/bf16 (#32): the simulator counts them (`ccogen.sim.rounding`), the
checker counts them symbolically (`ccogen.analysis.symbolic.roundings`), and the two
verdicts agree on every instance, whatever the draw (the rule itself:
tests/ir/test_rounding.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ccogen.driver import CheckOptions, check_text
from ccogen.ir.dtype import DType
from ccogen.ir.rounding import BF16, F16
from ccogen.sim import rounding as sim_rounding
from ccogen.sim import simulate
from tests.helpers import REPO_ROOT

LINT = REPO_ROOT / "tests" / "lint"
PER_HOP = (LINT / "E033-reduce-rounded-per-hop.cco").read_text(encoding="utf-8")
ONCE = (LINT / "E033-reduce-rounded-per-hop-ok.cco").read_text(encoding="utf-8")


def test_the_simulators_codes_per_element() -> None:
    codes = np.array([0, 0, 1 << 2 | BF16, 0, 2 << 2 | BF16, 1 << 2 | F16], dtype=np.uint8)
    per = sim_rounding.per_element(codes, 2)
    assert per.tolist() == [0, 1 << 2 | BF16, 2 << 2 | BF16 | F16]
    assert sim_rounding.allowed(per, DType.BF16).tolist() == [True, True, False]


def _lint_e033(text: str, nranks: int, chunk: int) -> bool:
    result = check_text(text, "ring.cco", CheckOptions(ranks=(nranks,),
                                                       params={"chunk": chunk}))
    return any(d.code == "E033" for d in result.diagnostics)


def _sim_e033(text: str, nranks: int, chunk: int) -> bool:
    report = simulate(text, ranks=[nranks], params={"chunk": chunk}, seeds=3)
    return any(d.code == "E033" for d in report.diagnostics)


@pytest.mark.parametrize("nranks", [2, 3, 4])
@pytest.mark.parametrize("chunk", [1, 64])
def test_lint_and_simulate_agree_on_rounding_per_hop(nranks: int, chunk: int) -> None:
    """bf16 partial sums: one rounding at 2 ranks (both accept), more from 3 on (both
    refuse, even at one element per chunk, where a draw may fall within the tolerance);
    f32 partial sums: one rounding at every size (both accept)."""
    per_hop = nranks >= 3
    assert _lint_e033(PER_HOP, nranks, chunk) is per_hop
    assert _sim_e033(PER_HOP, nranks, chunk) is per_hop
    assert not _lint_e033(ONCE, nranks, chunk)
    assert not _sim_e033(ONCE, nranks, chunk)


def test_both_say_how_many_roundings_and_why() -> None:
    lint = check_text(PER_HOP, "ring.cco", CheckOptions(ranks=(4,), params={"chunk": 8}))
    (d,) = [d for d in lint.diagnostics if d.code == "E033"]
    assert "rounded 3 times" in d.message and "bf16" in (d.help or "")
    assert any("`ensure` allows one rounding to bf16" in n for n in d.notes)
    report = simulate(PER_HOP, ranks=[4], params={"chunk": 8}, seeds=1)
    (s,) = [d for d in report.diagnostics if d.code == "E033"]
    assert any("rounded to bf16 3 times" in n for n in s.notes)
    assert "f32" in (s.help or "")


def test_an_f32_result_rounded_through_bf16_is_caught() -> None:
    """One rounding, but to a narrower type than the f32 result: not allowed."""
    text = '''protocol through_bf16(n: int = 16):
    team lsa(2)
    between_launches: host_sync
    window x: f32[n]
    window theirs: f32[n]
    window mid: bf16[n]
    window out: f32[n]

    kernel k(threads=32):
        put(1 - me, dst=theirs, src=x, queue=0, signal="remote")
        wait_signal(1 - me, queue=0)
        reduce(dst=mid, srcs=[x, theirs], op="sum")
        reduce(dst=out, srcs=[mid], op="sum")
        quiet()

    ensure:
        out == sum([init(x), init(x@(1 - me))])
'''
    lint = check_text(text, "t.cco", CheckOptions())
    assert [d.code for d in lint.diagnostics] == ["E033"]
    assert "no rounding to f16 or bf16" in " ".join(lint.diagnostics[0].notes)
    report = simulate(text, seeds=1)
    assert [d.code for d in report.diagnostics] == ["E033"]
