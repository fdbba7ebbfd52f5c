"""A loop guarded by a count loaded before it (`n = load(ntok[0])`, then `t < n` in the
body) is uniform in its variable: sampled on three iterations, with the findings of the
unrolled instance (moe_dispatch_ntok at prefill was unrolled, 4096 tokens x ranks)."""

from __future__ import annotations

from pathlib import Path

from ccogen.instantiate import instantiate
from ccogen.syntax import load_ir

NTOK = Path(__file__).parent / "torch" / "protocols" / "moe_dispatch_ntok.cco"
PARAMS = {"tokens": 16, "hidden": 4, "k": 2}


def _codes(diags: list) -> list[tuple[str, int]]:
    return sorted((d.code, d.span.line if d.span else 0) for d in diags)


def test_guard_loaded_before_the_loop_is_sampled() -> None:
    ir = load_ir(NTOK)
    inst, diags = instantiate(ir, 4, PARAMS, sample=True)
    assert inst is not None
    token_loops = [n for n in inst.loops if n.trips == PARAMS["tokens"]]
    assert token_loops and all(not n.reason for n in token_loops), inst.loops
    full, full_diags = instantiate(ir, 4, PARAMS)
    assert full is not None
    assert _codes(diags) == _codes(full_diags)
