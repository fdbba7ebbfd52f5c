"""examples/alltoall_step.py's exchange on the fake engine (CPU, needs torch): every rank's
received features are all_to_all_single's result (own block kept locally), eagerly and,
for the rank that completes the collective, compiled."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the example's test needs torch "
                            "(pip install 'ccogen[torch]')")

from .fakes import FakeWorld, alltoall_effect  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "alltoall_step.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("alltoall_step", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["alltoall_step"] = module  # torch.compile looks the module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("nranks", "compiled"), [(2, False), (4, False), (2, True)])
def test_exchange_is_all_to_all(nranks: int, compiled: bool) -> None:
    ex = _example()
    torch._dynamo.reset()
    world = FakeWorld(nranks, {"alltoall": alltoall_effect})
    exchanges = [ex.Exchange(c) for c in world.communicators()]
    models = [ex.Features(nranks, seed=r) for r in range(nranks)]
    tokens = [torch.randn(nranks, ex.TOKENS, ex.HIDDEN) for _ in range(nranks)]
    results = []
    for r in range(nranks):  # the last rank's launch completes the collective
        def fn(t: Any, r: int = r) -> Any:
            return ex.step(models[r], exchanges[r], t)

        if compiled and r == nranks - 1:
            fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
        results.append(fn(tokens[r]))
    features = [f for f, _, _ in results]
    for r, (_, received, summary) in enumerate(results):
        want = torch.stack([features[p][r] for p in range(nranks)])
        assert torch.equal(received, want), r
        if r == nranks - 1:  # the fake runs the collective at the last launch: only that
            # rank's later work sees the data in stream order, as every rank's does on a GPU
            assert torch.allclose(summary, want.float().sum(dim=1))
