"""`ccogen run` of a run-time protocol (ccogen.rt.drawn): each epoch's contents satisfy
`require`, differ from epoch to epoch, and the checks of those contents hold on the
memory the simulator leaves for them and fail on a corrupted one, through the same
reader the GPU run uses (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ccogen.instantiate import Contents, instantiate
from ccogen.ir.dtype import DType
from ccogen.ir.values import decode
from ccogen.rt.data import evaluate, make_reader
from ccogen.rt.drawn import DrawSpec, draw_epoch, which
from ccogen.sim.runtime import run_contents
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("alltoallv", "moe_dispatch", "moe_combine", "moe_dispatch_ll")


def _spec(name: str, nranks: int, seed: int = 0) -> DrawSpec:
    protocol = load_ir(ROOT / "protocols" / f"{name}.cco")
    instance, diags = instantiate(protocol, nranks, library_params(name) or {"cap": 8})
    assert instance is not None, diags
    spec = DrawSpec.of(instance, seed)
    assert spec is not None
    return spec


def test_the_draws_cycle_through_the_ends_and_fresh_random_ones() -> None:
    assert [which(e) for e in range(5)] == ["low", "high", "mixed-2", "interior-3", "mixed-4"]


def test_a_static_protocol_draws_nothing() -> None:
    instance, _ = instantiate(load_ir(ROOT / "protocols" / "alltoall.cco"), 2, {})
    assert instance is not None and DrawSpec.of(instance, 0) is None


def _counts(arrays: dict[tuple[int, str], np.ndarray], rank: int) -> list[int]:
    return [int(v) for v in decode(arrays[(rank, "counts")], DType.I32)]


def test_counts_stay_within_require_and_change_every_epoch() -> None:
    spec = _spec("alltoallv", 3)
    epochs = [draw_epoch(spec, e) for e in range(8)]
    assert [_counts(epochs[0].arrays, r) for r in range(3)] == [[0, 0, 0]] * 3
    assert [_counts(epochs[1].arrays, r) for r in range(3)] == [[8, 8, 8]] * 3
    seen = set()
    for d in epochs:
        for r in range(3):
            counts = _counts(d.arrays, r)
            assert all(0 <= c <= 8 for c in counts)
            seen.add(tuple(counts))
    assert len(seen) >= 6  # fresh routings, not one table replayed
    again = draw_epoch(spec, 5)  # every rank computes the same epoch alike
    assert all(np.array_equal(again.arrays[k], v) for k, v in epochs[5].arrays.items())


def test_dispatch_counts_follow_the_drawn_routing() -> None:
    spec = _spec("moe_dispatch", 2, seed=4)
    params = dict(spec.params)
    tokens, k = int(params["tokens"]), int(params["k"])
    for e in range(2, 6):
        d = draw_epoch(spec, e)
        for r in range(2):
            table = decode(d.arrays[(r, "topk_rank")], DType.I32).reshape(tokens, k)
            counts = decode(d.arrays[(r, "rank_counts")], DType.I32)
            live = int(decode(d.arrays[(r, "ntok")], DType.I32)[0])  # this call's tokens
            assert 0 <= live <= tokens
            assert [int((table[:live] == p).any(axis=1).sum()) for p in range(2)] == list(counts)


def _finals(memory: dict[tuple[int, str], bytes]) -> dict[tuple[str, int], np.ndarray]:
    return {(name, rank): np.frombuffer(data, dtype=np.uint8) for (rank, name), data in
            memory.items()}


@pytest.mark.parametrize("name", RUNTIME)
def test_the_epoch_checks_hold_on_the_right_memory_and_fail_on_a_wrong_one(name: str) -> None:
    spec = _spec(name, 2, seed=1)
    # the combine's output is its own first `ntok` rows of `y`: its epoch 2 (and 0) draws a
    # count of 0 on rank 0, nothing to check there; epoch 1 draws every token
    d = draw_epoch(spec, 1 if name == "moe_combine" else 2)
    assert d.checks
    contents = Contents({k: v.copy() for k, v in d.arrays.items()},
                        {n: DType(t) for n, t in _dtypes(spec).items()}, d.label)
    report = run_contents(spec.protocol, 2, dict(spec.params), contents, seeds=1)
    assert report.results and report.results[0].memory is not None
    finals = _finals(report.results[0].memory)
    initial = {(n, r): a for (r, n), a in d.arrays.items()}
    sizes = {n: a.size for (n, _), a in initial.items()}
    reader = make_reader(0, 2, sizes, finals, _dtypes(spec), initial)
    assert evaluate(d.checks, reader, 2) == []
    target = _output(name)
    wrong = dict(finals)
    wrong[(target, 0)] = finals[(target, 0)] ^ np.uint8(0xFF)
    failures = evaluate(d.checks, make_reader(0, 2, sizes, wrong, _dtypes(spec), initial), 2)
    assert failures and all(f.rank == 0 for f in failures)


def _output(name: str) -> str:
    return {"alltoallv": "got", "moe_dispatch": "got", "moe_combine": "y",
            "moe_dispatch_ll": "recv"}[name]


def _dtypes(spec: DrawSpec) -> dict[str, str]:
    protocol = spec.protocol
    instance, _ = instantiate(protocol, spec.nranks, dict(spec.params))
    assert instance is not None
    names = [w.name for w in protocol.windows] + [b.name for b in protocol.buffers]
    return {n: instance.dtype(n).value for n in names}


def test_the_launcher_draws_once_and_ranks_load_the_same_epochs(tmp_path: Path) -> None:
    from ccogen.rt.drawn import load_epoch, precompute

    spec = _spec("moe_dispatch", 2, seed=6)
    precompute(spec, 3, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"draw-{e}.pkl" for e in range(3)]
    for e in range(3):
        loaded, fresh = load_epoch(spec, e, str(tmp_path)), draw_epoch(spec, e)
        assert loaded.label == fresh.label and loaded.checks == fresh.checks
        assert all(np.array_equal(loaded.arrays[k], v) for k, v in fresh.arrays.items())
    assert load_epoch(spec, 4, str(tmp_path)).label == which(4)  # not drawn ahead: drawn here


def test_a_runtime_manifest_without_its_instance_is_refused(tmp_path: Path) -> None:
    """Random bytes would send counts past their regions: the launcher refuses them."""
    from ccogen.errors import RunError
    from ccogen.manifest import load_manifest
    from ccogen.rt.api import compile_for_run
    from ccogen.rt.launch import run as run_manifest

    path = ROOT / "protocols" / "alltoallv.cco"
    compile_for_run(load_ir(path), path.name, "nvshmem", 2, {"cap": 64}, tmp_path, debug=False)
    assert load_manifest(tmp_path).runtime_values
    with pytest.raises(RunError, match=r"run-time values.*require"):
        run_manifest(tmp_path, iters=1)
    static = tmp_path / "static"
    compile_for_run(load_ir(ROOT / "protocols" / "alltoall.cco"), "alltoall.cco", "nvshmem", 2,
                    {}, static, debug=False)
    assert not load_manifest(static).runtime_values
