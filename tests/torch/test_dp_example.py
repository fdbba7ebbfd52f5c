"""examples/dp_allreduce_step.py on the CPU (needs torch): its arguments, its reference
computation and tolerances (data-parallel training simulated in one process, with an
allreduce that rounds like the worst a device could), and its allreduce on the fake engine
(eager and, for the rank that completes the collective, compiled)."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the example's test needs torch "
                            "(pip install 'ccogen[torch]')")

from .fakes import FakeWorld  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "dp_allreduce_step.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("dp_allreduce_step", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dp_allreduce_step"] = module  # torch.compile looks the module up
    spec.loader.exec_module(module)
    return module


ex = _example()


# -- arguments --------------------------------------------------------------------------------
def test_defaults() -> None:
    args = ex.parse_args([])
    assert (args.protocol, args.dtype, args.steps, args.graph, args.compile,
            args.shared_gpu, args.target) == ("oneshot", "f32", 10, False, False, False, None)


def test_options() -> None:
    args = ex.parse_args(["--shared-gpu", "--graph", "--steps", "3", "--dtype", "bf16",
                          "--protocol", "twoshot"])
    assert args.graph and args.shared_gpu and args.steps == 3
    assert (args.dtype, args.protocol) == ("bf16", "twoshot")
    assert ex.parse_args(["--compile"]).compile


@pytest.mark.parametrize(("argv", "message"), [
    (["--graph", "--compile"], "not allowed with argument"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--dtype", "f64"], "invalid choice"),
    (["--protocol", "ring"], "invalid choice"),
])
def test_bad_arguments_are_refused(argv: list[str], message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        ex.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


# -- the reference computation ----------------------------------------------------------------
def _rounding_allreduce(dtype: str) -> Callable[[list[Any]], Any]:
    """The sum of the ranks' buckets, each rounded to `dtype`, added one by one in it."""
    def allreduce(grads: list[Any]) -> Any:
        terms = [g.to(ex.DTYPES[dtype]) for g in grads]
        total = terms[0].clone()
        for t in terms[1:]:
            total = total + t
        return total
    return allreduce


def _simulate(nranks: int, dtype: str, steps: int = 10,
              allreduce: Callable[[list[Any]], Any] | None = None) -> tuple[float, float]:
    """Data-parallel training of the example's model, every rank in this process; returns
    (worst sum error relative to the bound, the trained parameters' error vs the replica)."""
    allreduce = allreduce or _rounding_allreduce(dtype)
    models = [ex.make_model(0) for _ in range(nranks)]
    optimizers = [ex.make_optimizer(m) for m in models]
    replica = ex.make_model(0)
    reference = ex.make_optimizer(replica)
    worst = 0.0
    for step in range(steps):
        inputs, targets = ex.global_batch(step, nranks, 0)
        grads = [ex.gradient(models[r], ex.shard(inputs, r), ex.shard(targets, r))
                 for r in range(nranks)]
        total = allreduce(grads)
        buckets = [g.to(ex.DTYPES[dtype]).double() for g in grads]
        exact = torch.stack(buckets).sum(0)
        magnitude = torch.stack(buckets).abs().sum(0)
        ratio, _ = ex.sum_error(total, exact, magnitude, nranks, dtype)
        worst = max(worst, ratio)
        for m, o in zip(models, optimizers, strict=True):
            ex.apply(m, o, total.float() / nranks)
        ex.apply(replica, reference, ex.gradient(replica, inputs, targets))
    for m in models[1:]:  # the ranks stay replicas of each other
        assert all(torch.equal(p, q) for p, q in zip(m.parameters(), models[0].parameters(),
                                                      strict=True))
    return worst, ex.trained_error(models[0], replica)


def test_the_shards_mean_gradient_is_the_whole_batch_gradient() -> None:
    model = ex.make_model(3)
    inputs, targets = ex.global_batch(0, 4, 3)
    shards = [ex.gradient(model, ex.shard(inputs, r), ex.shard(targets, r)) for r in range(4)]
    whole = ex.gradient(model, inputs, targets)
    assert torch.allclose(torch.stack(shards).mean(0), whole, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_data_parallel_training_is_within_the_tolerances(nranks: int, dtype: str) -> None:
    worst, error = _simulate(nranks, dtype)
    assert worst <= 1.0
    assert error <= ex.TRAINED_RTOL[dtype] / 4  # margin for a device's other rounding
    assert error > 0 or dtype == "f32"           # bf16 buckets do round


@pytest.mark.parametrize("wrong", ["no rank 1", "no average", "twice"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_a_wrong_allreduce_fails_the_training_check(wrong: str, dtype: str) -> None:
    right = _rounding_allreduce(dtype)
    broken = {
        "no rank 1": lambda gs: right([g if r != 1 else torch.zeros_like(g)
                                       for r, g in enumerate(gs)]),
        "no average": lambda gs: right(gs) * len(gs),
        "twice": lambda gs: right(gs + gs[:1]),
    }[wrong]
    worst, error = _simulate(2, dtype, allreduce=broken)
    assert worst > 1.0 and error > ex.TRAINED_RTOL[dtype]


def test_the_sum_bound_fires_on_one_wrong_element() -> None:
    exact = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float64)
    magnitude = exact.abs() * 2
    good = exact.to(torch.bfloat16)
    assert ex.sum_error(good, exact, magnitude, 2, "bf16")[1] == 0
    bad = good.clone()
    bad[1] += 0.25
    ratio, count = ex.sum_error(bad, exact, magnitude, 2, "bf16")
    assert count == 1 and ratio > 1


def test_padding() -> None:
    assert ex.padded(1) == ex.ALIGN and ex.padded(ex.ALIGN) == ex.ALIGN
    assert ex.padded(ex.ALIGN + 1) == 2 * ex.ALIGN


# -- the allreduce on the fake engine ---------------------------------------------------------
def _view(pointer: int, count: int, dtype: Any) -> Any:
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(pointer), dtype=dtype)


def _oneshot(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """allreduce_oneshot: every rank's buffer `out` (its slot) := the sum of every `x`."""
    xs = [_x(world, r, index) for r in range(world.nranks)]
    total = _sum(xs)
    for (pointer,) in slots:
        _view(pointer, total.numel(), total.dtype).copy_(total)


def _twoshot(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """allreduce_twoshot: every rank's window `out` := the sum of every `x`."""
    total = _sum([_x(world, r, index) for r in range(world.nranks)])
    for r in range(world.nranks):
        world.window(r, index, "out").view(total.dtype).copy_(total)


def _x(world: FakeWorld, rank: int, index: int) -> Any:
    dtype = ex.DTYPES[world.engines[rank].placed[index].manifest.window("x").dtype]
    return world.window(rank, index, "x").view(dtype)


def _sum(xs: list[Any]) -> Any:
    total = xs[0].clone()
    for x in xs[1:]:
        total = total + x
    return total


@pytest.mark.parametrize(("nranks", "protocol", "dtype", "compiled"), [
    (2, "oneshot", "f32", False), (3, "oneshot", "bf16", False), (2, "twoshot", "f32", False),
    (4, "twoshot", "bf16", False), (2, "oneshot", "f32", True), (2, "twoshot", "bf16", True)])
def test_the_allreduce_sums_every_rank_s_gradient(nranks: int, protocol: str, dtype: str,
                                                  compiled: bool) -> None:
    torch._dynamo.reset()
    world = FakeWorld(nranks, {"allreduce_oneshot": _oneshot, "allreduce_twoshot": _twoshot})
    numel = 1000  # not a multiple of the padding: the padding must stay out of the sums
    reducers = [ex.GradAllreduce(c, numel, protocol, dtype) for c in world.communicators()]
    assert all(r.size % ex.ALIGN == 0 and r.size >= numel for r in reducers)
    grads = [torch.randn(numel, generator=torch.Generator().manual_seed(r))
             for r in range(nranks)]
    means = []
    for r in range(nranks):  # the last rank's launch completes the collective
        fn = ex.make_mean(reducers[r], nranks, r, "eager")
        if compiled and r == nranks - 1:
            def functional(g: Any, r: int = r) -> Any:
                total = reducers[r].functional(g)
                return total, total.float() / nranks

            fn = torch.compile(functional, backend="aot_eager", fullgraph=True)
        total, mean = fn(grads[r])
        means.append((total, mean))
    want = _sum([g.to(ex.DTYPES[dtype]) for g in grads])
    for r in (range(nranks) if not compiled else [nranks - 1]):
        total, mean = means[r]
        assert total.dtype == ex.DTYPES[dtype] and total.shape == (numel,)
        assert torch.equal(total, want), r
        if r == nranks - 1:  # only that rank's later work sees the data on the fake engine
            assert torch.equal(mean, want.float() / nranks)
    if protocol == "oneshot":  # the window holds the bucket, its padding untouched
        x = reducers[0].x
        assert torch.equal(x[:numel], grads[0].to(x.dtype)) or compiled
        assert not x[numel:].any()


# -- the whole training loop, one rank, on the fake engine ----------------------------------------
@pytest.fixture
def one_rank_group() -> Any:
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize(("argv", "effect"), [
    ([], None), (["--protocol", "twoshot", "--dtype", "bf16"], None),
    (["--compile", "--steps", "3"], None),
    ([], "wrong")])
def test_train_end_to_end_on_one_rank(one_rank_group: Any, argv: list[str], effect: Any,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """train() as main() calls it, on a one-rank fake job: the checks pass, and fail when
    the allreduce delivers a wrong sum."""
    torch._dynamo.reset()

    def wrong(world: FakeWorld, index: int, slots: list[Any]) -> None:
        _oneshot(world, index, slots)
        for (pointer,) in slots:
            out = _view(pointer, _x(world, 0, index).numel(), _x(world, 0, index).dtype)
            out[7] += 1.0

    effects = {"allreduce_oneshot": wrong if effect == "wrong" else _oneshot,
               "allreduce_twoshot": _twoshot}
    (comm,) = FakeWorld(1, effects).communicators()
    args = ex.parse_args(argv)
    ok = ex.train(comm, args, "gloo")
    out = capsys.readouterr().out
    mode = "compile" if args.compile else "eager"
    if effect == "wrong":
        assert not ok and "MISMATCH: 1 of 10384 summed elements" in out
        assert "parameters differ from the replica" in out
    else:
        assert ok, out
        assert out.startswith(f"{mode}: {args.steps} steps on 1 ranks ({args.protocol}, "
                              f"{args.dtype} bucket of 10384 elements")
        assert out.rstrip().endswith(": ok")
