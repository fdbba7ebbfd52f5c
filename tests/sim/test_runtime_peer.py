"""Run-time peers in the simulator (language reference §14, "Run-time peers"): a put to
`load(topk_rank[...])` lands on the rank each launch's draw names, and a protocol that
routes to another rank than `ensure` says fails on drawn contents."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ccogen.ir.dtype import DType
from ccogen.ir.values import decode, encode
from ccogen.sim import simulate
from ccogen.sim.runtime import contents_with, run_contents
from ccogen.syntax import load_ir, parse_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "protocols" / "moe_dispatch_ll.cco"
LL = load_ir(SOURCE)
SMALL = library_params("moe_dispatch_ll")  # tokens 8, hidden 8, k 2
BF16 = DType.BF16


def test_the_library_dispatch_simulates_clean_on_every_draw() -> None:
    report = simulate(LL, ranks=[2, 3], params=SMALL, seeds=2)
    assert report.instances and all(i.passed for i in report.instances), report.diagnostics
    labels = [i.label for i in report.instances]
    assert any("contents low" in x for x in labels) and any("contents high" in x for x in labels)


def test_a_put_lands_on_the_rank_the_routing_table_names() -> None:
    tokens, hidden, k, n = SMALL["tokens"], SMALL["hidden"], SMALL["k"], 3
    rng = np.random.default_rng(7)
    tables = [rng.integers(0, n, tokens * k).astype(np.int32) for _ in range(n)]
    xs = [decode(encode(rng.uniform(-2, 2, tokens * hidden).astype(np.float32), BF16), BF16)
          for _ in range(n)]
    contents = contents_with(LL, n, SMALL, {"topk_rank": tables, "x": xs})
    report = run_contents(LL, n, SMALL, contents, seeds=2)
    assert report.passed, report.results[0].failures if report.results else report.setup
    for result in report.results:
        assert result.memory is not None
        recv = [decode(np.frombuffer(result.memory[(r, "recv")], dtype=np.uint8), BF16)
                .reshape(n * tokens * k, hidden) for r in range(n)]
        for src in range(n):
            for i, dest in enumerate(tables[src]):  # slot j of token t: i = t * k + j
                t, j = divmod(i, k)
                row = (src * k + j) * tokens + t
                assert np.array_equal(recv[int(dest)][row], xs[src][t * hidden:(t + 1) * hidden])


def test_a_put_to_the_wrong_rank_is_caught() -> None:
    text = SOURCE.read_text(encoding="utf-8").replace(
        "put(load(topk_rank[t * k + j]),", "put((load(topk_rank[t * k + j]) + 1) % nranks,")
    assert "+ 1) % nranks" in text
    report = simulate(parse_ir(text, "bad.cco"), ranks=[3], params=SMALL, seeds=1)
    assert "E033" in {d.code for d in report.diagnostics}
    assert not any(i.passed for i in report.instances)
