"""The sim-bytes refusal of drawn contents decided on the sampled instance
(`ccogen/sim/runtime.py:_declared_too_big`) against the unrolled path it short-cuts (the
oracle): on every protocol with run-time values (the library's, the lint fixtures', the
simulator's fixtures), each limit below, both give the same diagnostics (codes, lines,
messages, notes, help), rendered in full; instances with errors fall back to the unrolled
path and report what it reports."""

from __future__ import annotations

from pathlib import Path

import pytest

import ccogen.sim.runtime as runtime
from ccogen.diag.render import render
from ccogen.instantiate import instantiate
from ccogen.instantiate.runtime import uses_runtime
from ccogen.ir.nodes import Protocol
from ccogen.limits import Limits
from ccogen.sim import simulate
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]


def _runtime_protocols() -> list[Path]:
    found = []
    for folder in ("protocols", "tests/lint", "tests/sim/fixtures"):
        for path in sorted((ROOT / folder).glob("*.cco")):
            try:
                proto = load_ir(path)
            except Exception:  # a syntax fixture: nothing to simulate
                continue
            if uses_runtime(proto):
                found.append(path)
    return found


CASES = _runtime_protocols()


def _params(path: Path) -> dict[str, int]:
    return library_params(path) if path.parent.name == "protocols" else {}


def _declared(proto: Protocol, n: int, params: dict[str, int]) -> int | None:
    inst, diags = instantiate(proto, n, params, sample=True)
    if inst is None or any(d.is_error for d in diags):
        return None
    return n * sum(size for _, size in inst.window_sizes + inst.buffer_sizes)


def _shown(proto: Protocol, path: Path, params: dict[str, int], limits: Limits) -> str:
    report = simulate(proto, ranks=2, params=params, seeds=1, epochs=1, limits=limits,
                      path=str(path))
    return render(report.diagnostics, "full")


def test_there_are_cases() -> None:
    names = {p.name for p in CASES}
    assert {"alltoallv.cco", "moe_dispatch.cco", "moe_combine.cco"} <= names
    assert len(CASES) >= 6, names


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_early_refusal_matches_the_unrolled_path(path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    proto = load_ir(path)
    params = _params(path)
    declared = _declared(proto, 2, params)
    limits = [1] if declared is None else [1, declared - 1]
    for limit in limits:
        chosen = Limits(sim_bytes=limit)
        early = _shown(proto, path, params, chosen)
        with monkeypatch.context() as m:
            m.setattr(runtime, "_declared_too_big", lambda *args, **kwargs: None)
            oracle = _shown(proto, path, params, chosen)
        assert early == oracle, (limit, early, oracle)
        if declared is not None:
            assert "E006" in early
    if declared is not None:  # at the limit it fits: the unrolled path runs, as before
        assert runtime._declared_too_big(proto, 2, params, Limits(sim_bytes=declared)) is None


def test_the_defaults_of_the_moe_protocols_are_refused_without_unrolling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """4096 tokens x 7168 x top-8 on 8 ranks: 4.2 and 8.0 GB of drawn contents, over the
    1 GiB default; decided without the unrolled instance (minutes and gigabytes)."""
    import ccogen.instantiate as instantiating

    real = instantiating.instantiate

    def only_sampled(*args: object, **kwargs: object) -> object:
        if not kwargs.get("sample"):
            raise AssertionError("built an unrolled instance")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(instantiating, "instantiate", only_sampled)
    monkeypatch.setattr(runtime, "instantiate", only_sampled)
    # moe_combine: 8 ranks x (expert_out + back: 2 x 8 x 4096 x 7168 x 2 B, topk_rank and
    # topk_weight: 2 x 4096 x 8 x 4 B, zeros 7168 x 2 B, y 4096 x 7168 x 2 B, peer_ntok
    # 8 x 4 B, ntok 4 B) = 7,988,166,944
    for name, total in (("moe_dispatch", "4,228,907,552"), ("moe_combine", "7,988,166,944")):
        report = simulate(ROOT / "protocols" / f"{name}.cco", ranks=8, seeds=3)
        [d] = report.diagnostics
        assert d.code == "E006" and f"would hold {total} bytes" in d.message, d.message
