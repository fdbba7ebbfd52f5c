"""Run-time batch sizes on the fake engine (CPU, needs torch): the fixture protocol
tests/torch/protocols/gather_rows.cco (a count `ntok` bounded by `tokens`, rows of `x`
moved while `t < n`) loaded through the binding; its effect reads the count through the
pointer the binding passed, as the kernels do.  Eager calls with sliced tensors, the count
given as a device tensor (the CUDA-graph form: whole tensors, the count read at each
launch), and torch.compile with sliced inputs."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch binding's tests need torch "
                            "(pip install 'ccogen[torch]')")

from ccogen.manifest import buffer_name  # noqa: E402
from ccogen.torch import ArgumentError  # noqa: E402
from ccogen.torch.batch import Batch, RowBuffer  # noqa: E402

from .fakes import FakeWorld  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "protocols" / "gather_rows.cco"
TOKENS, HIDDEN = 8, 4


def _view(pointer: int, count: int, dtype: Any) -> Any:
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    if nbytes == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(pointer), dtype=dtype)


def _gather(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """gather_rows: rank s's first ntok[0] rows land in rows s * tokens + t of every rank's
    `recv`; `got[s]` := that count.  The count is read through its pointer."""
    manifest = world.engines[0].placed[index].manifest
    names = [buffer_name(p) for p in manifest.kernels[0].params]
    names = [n for n in names if n is not None]
    for s, pointers in enumerate(slots):
        at = dict(zip(names, pointers, strict=True))
        n = int(_view(at["ntok"], 1, torch.int32)[0])
        assert 0 <= n <= TOKENS, n  # the require
        rows = _view(at["x"], n * HIDDEN, torch.float32).view(n, HIDDEN).clone()
        for r in range(world.nranks):
            recv = world.window(r, index, "recv").view(torch.float32).view(-1, HIDDEN)
            recv[s * TOKENS:s * TOKENS + n] = rows
            world.window(r, index, "got").view(torch.int32)[s] = n


def _ops(nranks: int = 2) -> list[Any]:
    world = FakeWorld(nranks, {"gather_rows": _gather})
    return [c.load(FIXTURE, tokens=TOKENS, hidden=HIDDEN) for c in world.communicators()]


def _x(rank: int, step: int) -> Any:
    return torch.arange(TOKENS * HIDDEN, dtype=torch.float32).view(TOKENS, HIDDEN) \
        + 1000 * rank + 100 * (step + 1)


def test_the_op_knows_its_count() -> None:
    op = _ops()[0]
    assert op.batch == Batch("ntok", "tokens", TOKENS, (RowBuffer("x", HIDDEN),))
    assert op.buffers == ("x", "ntok")


@pytest.mark.parametrize("counts", [(0, 0), (TOKENS, TOKENS), (3, 5), (0, TOKENS), (1, 7)])
def test_eager_calls_move_the_rows_given(counts: tuple[int, int]) -> None:
    ops = _ops()
    # a first call at the capacity, so rows beyond a later count are seen "left as they were"
    # (the fake runs the exchange when the last rank launches: the inputs must live until then)
    full = [_x(r, 0) for r in range(2)]
    firsts = [op(x=x)[0] for op, x in zip(ops, full, strict=True)]
    before = [recv.clone() for recv in firsts]
    xs = [_x(r, 1)[:n] for r, n in enumerate(counts)]
    outs = [op(x=x) for op, x in zip(ops, xs, strict=True)]
    for r in range(2):
        recv, got = outs[r]
        assert got.tolist() == list(counts)
        rows = recv.view(2, TOKENS, HIDDEN)
        for s, n in enumerate(counts):
            assert torch.equal(rows[s, :n], _x(s, 1)[:n])
            assert torch.equal(rows[s, n:], before[r].view(2, TOKENS, HIDDEN)[s, n:])


def test_the_count_given_as_a_tensor_is_read_at_each_launch() -> None:
    """The CUDA-graph form: whole tensors and a count tensor whose contents change between
    launches (a replayed graph passes the same pointers)."""
    ops = _ops()
    xs = [_x(r, 0) for r in range(2)]
    ntoks = [torch.zeros(1, dtype=torch.int32) for _ in range(2)]
    for counts in [(2, 6), (TOKENS, 0), (0, 0), (5, 5)]:
        for ntok, n in zip(ntoks, counts, strict=True):
            ntok.fill_(n)
        outs = [op(x=x, ntok=ntok) for op, x, ntok in zip(ops, xs, ntoks, strict=True)]
        for recv, got in outs:
            assert got.tolist() == list(counts)
            for s, n in enumerate(counts):
                assert torch.equal(recv.view(2, TOKENS, HIDDEN)[s, :n], xs[s][:n])
    with pytest.raises(ArgumentError, match="\\[TB003\\] buffer `x` has 3 rows"):
        ops[0](x=xs[0][:3], ntok=ntoks[0])


def test_errors_name_the_argument_and_the_counts() -> None:
    op = _ops()[0]
    with pytest.raises(ArgumentError, match="\\[TB002\\] buffer `x` has 9 rows, more than "
                       "the capacity tokens=8") as info:
        op(x=torch.zeros(9, HIDDEN))
    assert info.value.code == "TB002"
    with pytest.raises(ArgumentError, match="\\[TB006\\]"):
        op(x=torch.zeros(3 * HIDDEN + 1))


def test_compiled_calls_take_sliced_inputs() -> None:
    """torch.compile (aot_eager): the custom op's fake outputs are the whole windows for
    any count, and each launch carries its own count."""
    torch._dynamo.reset()
    ops = _ops(1)
    op = ops[0]

    def step(x: Any) -> Any:
        recv, got = op(x=x * 2)
        return recv + 0, got + 0

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for n in (TOKENS, 3, 0, 5):
        recv, got = compiled(_x(0, n)[:n])
        assert got.tolist() == [n]
        assert torch.equal(recv.view(TOKENS, HIDDEN)[:n], 2 * _x(0, n)[:n])


def test_compiled_calls_take_the_count_as_a_tensor() -> None:
    """torch.compile with `ntok=` a tensor and `x` whole: one compiled graph, the count
    read at each launch."""
    torch._dynamo.reset()
    op = _ops(1)[0]
    ntok = torch.zeros(1, dtype=torch.int32)

    def step(x: Any, count: Any) -> Any:
        recv, got = op(x=x + 1, ntok=count)
        return recv + 0, got + 0

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for n in (2, 0, TOKENS):
        ntok.fill_(n)
        recv, got = compiled(_x(0, n), ntok)
        assert got.tolist() == [n]
        assert torch.equal(recv.view(TOKENS, HIDDEN)[:n], _x(0, n)[:n] + 1)
