"""examples/moe_layer.py on the CPU (needs torch): its arguments, its reference computation
(against ccogen.reference.moe, the numpy model of the two protocols), and the layer on
the fake engine — the ranks of a fake job run in lockstep, phase by phase, eager and
compiled — checked against the communication-free layer; a wrong exchange fails it."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the example's test needs torch "
                            "(pip install 'ccogen[torch]')")

from ccogen.manifest import buffer_name  # noqa: E402
from ccogen.reference import moe  # noqa: E402

from .fakes import FakeWorld  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "moe_layer.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("moe_layer", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["moe_layer"] = module  # torch.compile looks the module up
    spec.loader.exec_module(module)
    return module


ex = _example()


# -- arguments --------------------------------------------------------------------------------
def test_defaults() -> None:
    args = ex.parse_args([])
    assert (args.dtype, args.tokens, args.hidden, args.ffn, args.k, args.steps, args.graph,
            args.compile, args.shared_gpu, args.target) == (
        "f32", 64, 128, 256, 2, 10, False, False, False, None)
    assert ex.mode_of(args) == "eager"


def test_options() -> None:
    args = ex.parse_args(["--shared-gpu", "--graph", "--steps", "3", "--dtype", "bf16",
                          "--tokens", "8", "--hidden", "32", "--k", "1"])
    assert args.graph and args.shared_gpu and ex.mode_of(args) == "graph"
    assert (args.steps, args.dtype, args.tokens, args.hidden, args.k) == (3, "bf16", 8, 32, 1)
    assert ex.mode_of(ex.parse_args(["--compile"])) == "compile"


@pytest.mark.parametrize(("argv", "message"), [
    (["--graph", "--compile"], "not allowed with argument"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--tokens", "0"], "--tokens must be at least 1"),
    (["--k", "0"], "--k must be at least 1"),
    (["--dtype", "f64"], "invalid choice"),
])
def test_bad_arguments_are_refused(argv: list[str], message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        ex.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_k_beyond_the_rank_count_is_refused() -> None:
    comms = FakeWorld(2).communicators()
    with pytest.raises(ValueError, match="at most 2 \\(the rank count\\)"):
        ex.MoELayer(comms[0], ex.parse_args(["--k", "3"]))
    assert comms[0]._ops == {}  # refused before anything was loaded


def test_one_rank_is_a_layer_of_one_expert() -> None:
    assert ex.rank_problem(ex.parse_args(["--k", "1"]), 1) is None
    assert "at most 1 (the rank count)" in (ex.rank_problem(ex.parse_args([]), 1) or "")


# -- the gate and the reference -----------------------------------------------------------------
def test_the_gate_picks_k_distinct_experts_with_weights_summing_to_one() -> None:
    x = ex.tokens_of(0, 0, 32, 16, 0)
    chosen, weights = ex.gate(x, ex.make_gate(16, 4, 0), 3)
    assert chosen.dtype == torch.int32 and chosen.shape == (32, 3)
    assert all(len(set(row.tolist())) == 3 for row in chosen)
    assert torch.allclose(weights.sum(-1), torch.ones(32))
    counts = ex.rank_counts(chosen, 4)
    assert counts.tolist() == moe.rank_counts(chosen.numpy(), 4).tolist()


@pytest.mark.parametrize(("nranks", "k"), [(2, 1), (3, 2), (4, 2)])
def test_the_reference_is_dispatch_experts_combine(nranks: int, k: int) -> None:
    """The example's communication-free layer equals ccogen.reference.moe's model of the
    two protocols with each rank's expert applied to the rows it received."""
    tokens, hidden, ffn = 16, 8, 12
    gw = ex.make_gate(hidden, nranks, 1)
    experts = [ex.make_expert(e, hidden, ffn, 1) for e in range(nranks)]
    xs = [ex.tokens_of(r, 2, tokens, hidden, 1) for r in range(nranks)]
    routes = [ex.gate(x, gw, k) for x in xs]
    tables = [c.numpy() for c, _ in routes]
    rows, _, _ = moe.dispatch([x.numpy() for x in xs], tables)
    with torch.no_grad():
        outs = [experts[r](torch.from_numpy(rows[r])).numpy() for r in range(nranks)]
    want = moe.combine(outs, tables, [w.numpy() for _, w in routes])
    got = ex.reference(xs, gw, experts, k, torch.float32)
    for r in range(nranks):
        np.testing.assert_allclose(got[r].numpy(), want[r], rtol=1e-5, atol=1e-6)


# -- the layer on the fake engine ----------------------------------------------------------
def _view(pointer: int, count: int, dtype: Any) -> Any:
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    if nbytes == 0:  # a step of no tokens: its tensors may have no storage
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(pointer), dtype=dtype)


def _window(world: FakeWorld, rank: int, index: int, name: str) -> Any:
    w = world.engines[rank].placed[index].manifest.window(name)
    dtype = getattr(torch, {"f32": "float32", "bf16": "bfloat16", "i32": "int32"}[w.dtype])
    return world.window(rank, index, name).view(dtype)


def _sizes(world: FakeWorld, index: int) -> tuple[int, int, int]:
    params = dict(world.engines[0].placed[index].manifest.params)
    return params["tokens"], params["hidden"], params["k"]


def _named(world: FakeWorld, index: int, slots: list[Any]) -> list[tuple[dict[str, int], int]]:
    """Each rank's buffer pointers by name, and its count: `ntok[0]` read through its
    pointer (as the kernels read it) where the protocol has one, else `tokens`."""
    manifest = world.engines[0].placed[index].manifest
    names = [n for n in (buffer_name(p) for p in manifest.kernels[0].params) if n is not None]
    out = []
    for pointers in slots:
        at = dict(zip(names, pointers, strict=True))
        n = (int(_view(at["ntok"], 1, torch.int32)[0]) if "ntok" in at
             else _sizes(world, index)[0])
        out.append((at, n))
    return out


def _dispatch(world: FakeWorld, index: int, slots: list[Any], drop: bool = False) -> None:
    """moe_dispatch: token t < n of rank s goes to row s * tokens + t of the `recv` of
    every rank among its top-k (the other rows are left as they were); `got[s]` := rank
    s's count for the receiver.  `drop`: the last token of rank 0 is lost (a wrong
    exchange)."""
    n_ranks = world.nranks
    tokens, hidden, k = _sizes(world, index)
    dtype = _window(world, 0, index, "recv").dtype
    named = _named(world, index, slots)
    xs = [_view(at["x"], n * hidden, dtype).view(n, hidden).clone() for at, n in named]
    tables = [_view(at["topk_rank"], n * k, torch.int32).view(n, k).numpy().copy()
              for at, n in named]
    counts = [_view(at["rank_counts"], n_ranks, torch.int32).clone() for at, _ in named]
    for r in range(n_ranks):
        recv = _window(world, r, index, "recv").view(n_ranks, tokens, hidden)
        for s in range(n_ranks):
            goes = torch.from_numpy(moe.routed(tables[s], n_ranks)[:, r])
            if drop and s == 0 and len(goes):
                goes[-1] = False
            rows = recv[s][:len(goes)]
            rows[goes] = xs[s][goes]
            _window(world, r, index, "got")[s] = counts[s][r]


def _combine(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """moe_combine: rank s's `y` (its first n rows) := ccogen.reference.moe.combine of
    every rank's `expert_out`, rounded to the element type."""
    n_ranks = world.nranks
    tokens, hidden, k = _sizes(world, index)
    dtype = _window(world, 0, index, "expert_out").dtype
    named = _named(world, index, slots)
    outs = [_window(world, r, index, "expert_out").view(n_ranks, tokens, hidden).float().numpy()
            for r in range(n_ranks)]
    tables = [_window(world, r, index, "topk_rank").view(tokens, k).numpy()
              for r in range(n_ranks)]
    weights = [np.zeros((tokens, k), dtype=np.float32) for _ in range(n_ranks)]
    for w, (at, n) in zip(weights, named, strict=True):
        w[:n] = _view(at["topk_weight"], n * k, torch.float32).view(n, k).numpy()
    ys = moe.combine(outs, tables, weights)
    for s, (at, n) in enumerate(named):
        _view(at["y"], n * hidden, dtype).copy_(torch.from_numpy(ys[s][:n]).reshape(-1))


def _effects(drop: bool = False) -> dict[str, Any]:
    dispatch = lambda w, i, s: _dispatch(w, i, s, drop)  # noqa: E731
    return {"moe_dispatch": dispatch, "moe_combine": _combine,
            "moe_dispatch_ntok": dispatch, "moe_combine_ntok": _combine}


def _world(nranks: int, drop: bool = False) -> FakeWorld:
    return FakeWorld(nranks, _effects(drop))


@pytest.mark.parametrize(("nranks", "k", "dtype"), [(1, 1, "f32"), (2, 1, "f32"), (2, 2, "bf16"),
                                                    (3, 2, "f32"), (4, 3, "bf16")])
def test_the_layer_in_lockstep_matches_the_reference(nranks: int, k: int, dtype: str) -> None:
    args = ex.parse_args(["--tokens", "16", "--hidden", "32", "--ffn", "24", "--k", str(k),
                          "--dtype", dtype])
    layers = [ex.MoELayer(c, args) for c in _world(nranks).communicators()]
    experts = [ex.make_expert(e, 32, 24, 0) for e in range(nranks)]
    for step in range(2):  # the second step's rows overwrite the first's in `recv`
        xs = [ex.tokens_of(r, step, 16, 32, 0) for r in range(nranks)]
        held = [x.to(ex.DTYPES[dtype]) for x in xs]
        routes = [layer.route(x) for layer, x in zip(layers, held, strict=True)]
        rows = [layer.dispatch(x, t, c) for layer, x, (t, _, c) in
                zip(layers, held, routes, strict=True)]
        for layer, r in zip(layers, rows, strict=True):
            layer.expert(r)
        ys = [layer.combine(t, w) for layer, (t, w, _) in zip(layers, routes, strict=True)]
        want = ex.reference(xs, layers[0].gate_weights, experts, k, ex.DTYPES[dtype])
        for r in range(nranks):
            assert ys[r].dtype == ex.DTYPES[dtype] and ys[r].shape == (16, 32)
            error = ex.relative_error(ys[r], want[r])
            assert error <= ex.RTOL[dtype] / 4, (step, r, error)  # margin for a device


def test_a_lost_token_fails_the_check() -> None:
    args = ex.parse_args(["--tokens", "16", "--hidden", "32", "--ffn", "24", "--k", "2"])
    layers = [ex.MoELayer(c, args) for c in _world(2, drop=True).communicators()]
    experts = [ex.make_expert(e, 32, 24, 0) for e in range(2)]
    xs = [ex.tokens_of(r, 0, 16, 32, 0) for r in range(2)]
    routes = [layer.route(x) for layer, x in zip(layers, xs, strict=True)]
    rows = [layer.dispatch(x, t, c) for layer, x, (t, _, c) in zip(layers, xs, routes,
                                                                     strict=True)]
    for layer, r in zip(layers, rows, strict=True):
        layer.expert(r)
    # views of each rank's `y`: on the fake engine rank 0's is written when rank 1 launches
    ys = [layer.combine(t, w) for layer, (t, w, _) in zip(layers, routes, strict=True)]
    want = ex.reference(xs, layers[0].gate_weights, experts, 2, torch.float32)
    error = ex.relative_error(ys[0], want[0])
    assert ex.RTOL["f32"] < error < 1.0  # wrong, though not all zeros: one token is missing
    assert ex.relative_error(ys[1], want[1]) <= ex.RTOL["f32"] / 4


# -- the whole program, two ranks in threads, on the fake engine ---------------------------
class ThreadedWorld(FakeWorld):
    """A fake job whose ranks run in threads: a launch returns once every rank launched the
    same kernel and its effect ran (a collective as a synchronous call), so a rank's next
    phase reads what the exchange delivered."""

    def __init__(self, nranks: int, effects: dict[str, Any]) -> None:
        super().__init__(nranks, effects)
        self.lock = threading.Condition()
        self.done: dict[tuple[int, str], int] = {}

    def launched(self, rank: int, index: int, name: str, slots: list[Any]) -> None:
        key = (index, name)
        with self.lock:
            generation = self.done.get(key, 0)
            super().launched(rank, index, name, slots)
            if key not in self.pending:  # this launch completed the collective
                self.done[key] = generation + 1
                self.lock.notify_all()
            elif not self.lock.wait_for(lambda: self.done.get(key, 0) > generation,
                                        timeout=120):
                raise TimeoutError(f"rank {rank}: {name}: the other ranks never launched")


def _run_ranks(nranks: int, argv: list[str], drop: bool) -> list[Any]:
    """ex.run on every rank of a threaded fake job; each rank's result (or exception)."""
    world = ThreadedWorld(nranks, _effects(drop))
    comms = world.communicators()
    args = ex.parse_args(["--tokens", "16", "--hidden", "32", "--ffn", "24", *argv])
    results: list[Any] = [None] * nranks

    def rank(r: int) -> None:
        try:
            results[r] = ex.run(comms[r], args, "gloo")
        except Exception as exc:  # reported by the test
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


@pytest.mark.parametrize(("argv", "drop"), [
    (["--steps", "3"], False),
    (["--steps", "2", "--dtype", "bf16", "--k", "1"], False),
    (["--steps", "2"], True)])
def test_run_end_to_end_on_two_ranks(argv: list[str], drop: bool,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """run() as main() calls it on every rank of a two-rank fake job: the check passes,
    and fails (rank 0's tokens) when the dispatch loses one of rank 0's tokens."""
    results = _run_ranks(2, argv, drop)
    out = capsys.readouterr().out
    args = ex.parse_args(argv)
    if drop:
        assert results == [False, True], (results, out)
        assert "rank 0: step 0: MISMATCH: y differs from the communication-free" in out
        assert out.rstrip().endswith(": FAILED")
    else:
        assert results == [True, True], (results, out)
        assert out.startswith(f"eager: {args.steps} steps on 2 ranks ({args.dtype}, "
                              f"16 tokens x 32, top-{args.k}")
        assert out.rstrip().endswith(": ok")


def test_run_compiled_on_two_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    """--compile: the layer's functional form through ccogen::call, on both ranks."""
    torch._dynamo.reset()
    results = _run_ranks(2, ["--steps", "2", "--compile"], False)
    out = capsys.readouterr().out
    assert results == [True, True], (results, out)
    assert out.startswith("compile: 2 steps on 2 ranks (f32") and out.rstrip().endswith(": ok")


# -- a run-time token count: the fixtures moe_dispatch_ntok / moe_combine_ntok ----------------
FIXTURES = tuple(str(Path(__file__).resolve().parent / "protocols" / name)
                 for name in ("moe_dispatch_ntok.cco", "moe_combine_ntok.cco"))


def test_counts_cover_zero_the_capacity_and_between() -> None:
    drawn = [[ex.count_of(r, step, 16, 0) for r in range(2)] for step in range(10)]
    assert drawn[:3] == [[16, 16], [0, 0], [0, 16]]
    assert all(0 <= n <= 16 for row in drawn for n in row)
    assert any(0 < n < 16 for row in drawn for n in row)
    assert drawn == [[ex.count_of(r, step, 16, 0) for r in range(2)] for step in range(10)]


def test_rank_counts_on_the_device_count_only_the_first_tokens() -> None:
    chosen = torch.tensor([[0, 1], [1, 2], [2, 0]], dtype=torch.int32)
    assert ex.rank_counts(chosen, 3).tolist() == [2, 2, 2]
    assert ex.rank_counts(chosen, 3, torch.tensor([1], dtype=torch.int32)).tolist() == [1, 1, 0]


@pytest.mark.parametrize(("nranks", "k"), [(2, 1), (3, 2)])
def test_varying_counts_in_lockstep(monkeypatch: pytest.MonkeyPatch, nranks: int, k: int
                                    ) -> None:
    """With protocols that take a count, every rank passes its first n tokens, n drawn per
    rank and step (0 and the capacity included); y matches the communication-free layer."""
    monkeypatch.setattr(ex, "PROTOCOLS", FIXTURES)
    args = ex.parse_args(["--tokens", "16", "--hidden", "32", "--ffn", "24", "--k", str(k)])
    layers = [ex.MoELayer(c, args) for c in _world(nranks).communicators()]
    assert all(layer.batched for layer in layers)
    experts = [ex.make_expert(e, 32, 24, 0) for e in range(nranks)]
    for step in range(6):
        counts = [ex.count_of(r, step, 16, 0) for r in range(nranks)]
        xs = [ex.tokens_of(r, step, 16, 32, 0)[:n] for r, n in enumerate(counts)]
        routes = [layer.route(x) for layer, x in zip(layers, xs, strict=True)]
        rows = [layer.dispatch(x, t, c) for layer, x, (t, _, c) in
                zip(layers, xs, routes, strict=True)]
        for layer, r in zip(layers, rows, strict=True):
            layer.expert(r)
        ys = [layer.combine(t, w) for layer, (t, w, _) in zip(layers, routes, strict=True)]
        want = ex.reference(xs, layers[0].gate_weights, experts, k, torch.float32)
        for r in range(nranks):
            assert ys[r].shape == (counts[r], 32)
            assert ex.relative_error(ys[r], want[r]) <= ex.RTOL["f32"] / 4, (step, r, counts)


@pytest.mark.parametrize(("argv", "drop"), [(["--steps", "5"], False),
                                            (["--steps", "5", "--compile"], False),
                                            (["--steps", "1"], True)])
def test_run_with_varying_counts_on_two_ranks(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              argv: list[str], drop: bool) -> None:
    """run() with the count drawn every step, eager and compiled (sliced inputs through
    ccogen::call); a lost token still fails the check (step 0: every rank at the cap)."""
    monkeypatch.setattr(ex, "PROTOCOLS", FIXTURES)
    torch._dynamo.reset()
    results = _run_ranks(2, argv, drop)
    out = capsys.readouterr().out
    if drop:
        assert results == [False, True], (results, out)
        assert "rank 0: step 0: MISMATCH" in out and "; 16 tokens)" in out
        return
    assert results == [True, True], (results, out)
    mode = "compile" if "--compile" in argv else "eager"
    # rank 0's counts: 16, 0, 0 (steps 0-2), then two drawn from 0..16
    assert out.startswith(f"{mode}: 5 steps on 2 ranks (f32, 0..16 tokens (4 counts on rank "
                          "0) x 32, top-2"), out
    assert out.rstrip().endswith(": ok")


def test_the_graph_body_with_a_count_tensor_in_lockstep(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """What --graph captures, without the graph: whole-capacity tensors, the count in a
    tensor (`ntok=`) rewritten every step, rows beyond it stale; y[:n] matches."""
    monkeypatch.setattr(ex, "PROTOCOLS", FIXTURES)
    args = ex.parse_args(["--tokens", "16", "--hidden", "32", "--ffn", "24", "--k", "2"])
    layers = [ex.MoELayer(c, args) for c in _world(2).communicators()]
    experts = [ex.make_expert(e, 32, 24, 0) for e in range(2)]
    statics = [torch.randn(16, 32) for _ in range(2)]   # stale rows beyond every count
    counts_t = [torch.zeros(1, dtype=torch.int32) for _ in range(2)]
    for step in range(5):
        counts = [ex.count_of(r, step, 16, 0) for r in range(2)]
        xs = [ex.tokens_of(r, step, 16, 32, 0)[:n] for r, n in enumerate(counts)]
        for x, static, count, n in zip(xs, statics, counts_t, counts, strict=True):
            static[:n] = x
            count.fill_(n)
        routes = [layer.route(x, c) for layer, x, c in zip(layers, statics, counts_t,
                                                          strict=True)]
        assert [int(c.sum()) for _, _, c in routes] == [2 * n for n in counts]  # top-2
        rows = [layer.dispatch(x, t, c, n) for layer, x, (t, _, c), n in
                zip(layers, statics, routes, counts_t, strict=True)]
        for layer, r in zip(layers, rows, strict=True):
            layer.expert(r)
        ys = [layer.combine(t, w, n) for layer, (t, w, _), n in
              zip(layers, routes, counts_t, strict=True)]
        want = ex.reference(xs, layers[0].gate_weights, experts, 2, torch.float32)
        for r in range(2):
            assert ys[r].shape == (16, 32)
            error = ex.relative_error(ys[r][:counts[r]], want[r])
            assert error <= ex.RTOL["f32"] / 4, (step, r, counts)
