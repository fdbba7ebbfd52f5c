"""The binding on a fake engine (CPU, needs torch): loading, caching, windows as tensors,
launch order, buffers, errors, and torch.compile tracing through the custom op."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch binding's tests need torch "
                            "(pip install 'ccogen[torch]'); the torch-free parts are tested "
                            "in test_spec.py, test_args.py and test_loader.py")

from ccogen.rt.debug import DebugRecord  # noqa: E402
from ccogen.torch import ArgumentError, DeviceError, library  # noqa: E402
from ccogen.torch.op import Op  # noqa: E402
from ccogen.torch.spec import OpSpec  # noqa: E402

from .fakes import FakeCudaError, FakeWorld, alltoall_effect  # noqa: E402
from .test_spec import buffered_manifest  # noqa: E402

BLOCK = 64


def _pair() -> tuple[FakeWorld, list]:
    world = FakeWorld(2, {"alltoall": alltoall_effect})
    return world, world.communicators()


def _load_all(comms: list, **params: int) -> list[Op]:
    return [c.load("alltoall.cco", block=BLOCK, **params) for c in comms]


def test_windows_are_typed_views_of_the_heap() -> None:
    world, comms = _pair()
    ops = _load_all(comms)
    op = ops[0]
    assert set(op.windows) == {"send", "recv", "credit"}  # credit: its back-to-back credits
    send = op.windows["send"]
    assert send.dtype == torch.uint8 and tuple(send.shape) == (2 * BLOCK,)
    heap = world.engines[0].placed[-1].tensor
    assert send.data_ptr() == heap.data_ptr() + world.engines[0].placed[-1].manifest.window(
        "send").offset
    assert op.outputs == ("recv",)
    assert op.buffers == ()


def test_eager_alltoall_matches_torch() -> None:
    _, comms = _pair()
    ops = _load_all(comms)
    inputs = [torch.randint(0, 255, (2 * BLOCK,), dtype=torch.uint8) for _ in range(2)]
    for op, x in zip(ops, inputs, strict=True):
        op.windows["send"].copy_(x)
    outs = [op() for op in ops]
    for r, out in enumerate(outs):
        assert out is ops[r].windows["recv"]
        other = 1 - r
        # all_to_all: block `other` of my recv is block `r` of the other's send
        assert torch.equal(out[other * BLOCK:(other + 1) * BLOCK],
                           inputs[other][r * BLOCK:(r + 1) * BLOCK])


def test_window_contents_as_arguments_any_dtype_of_the_size() -> None:
    _, comms = _pair()
    ops = _load_all(comms)
    xs = [torch.randn(BLOCK, dtype=torch.float16) for _ in range(2)]  # 2 * BLOCK bytes
    outs = [op(send=x) for op, x in zip(ops, xs, strict=True)]
    assert torch.equal(ops[0].windows["send"], xs[0].view(torch.uint8))
    got = outs[0][BLOCK:].view(torch.float16)  # rank 1's block 0
    assert torch.equal(got, xs[1].view(torch.uint8)[:BLOCK].view(torch.float16))
    with pytest.raises(ArgumentError, match=r"the contents of window `send` are 254 bytes "
                       r"\(float16\[127\]\), the window holds 128"):
        ops[0](send=torch.zeros(127, dtype=torch.float16))


# The library's `alltoall` before issue 30 (benchmarks/b2b/alltoall_host_sync.cco): a host
# barrier between launches, declared.
HOST_SYNC_ALLTOALL = """\
protocol alltoall_host_sync(block: bytes = 1 MiB):
    team lsa
    between_launches: host_sync
    window send: nranks * block
    window recv: nranks * block

    kernel exchange(threads=64):
        lanes p in peers():
            put(p, dst=recv[me*block : (me+1)*block], src=send[p*block : (p+1)*block],
                queue=0, signal="remote")
            quiet(p)
            wait_signal(p, queue=0)

    ensure:
        for p in peers():
            recv[p*block : (p+1)*block] == init(send@p)[me*block : (me+1)*block]
"""


def test_host_sync_protocols_launch_behind_a_barrier_on_the_current_stream() -> None:
    world, comms = _pair()
    ops = [c.load(HOST_SYNC_ALLTOALL, block=BLOCK) for c in comms]
    assert ops[0].spec.between_launches == "host_sync"
    ops[0]()
    assert [name for name, _, _ in world.engines[0].calls] == ["meet", "exchange"]


def test_every_library_protocol_is_one_launch_per_call() -> None:
    """Issue 30: no library protocol declares `host_sync` any more; `alltoall` (a leading
    barrier inside its kernel) is one kernel launch per call, with no launch-barrier
    kernel before it."""
    world, comms = _pair()
    ops = _load_all(comms)
    assert ops[0].spec.between_launches == "free" and ops[0]._before == ()
    for _ in range(3):
        ops[0]()
    assert [name for name, _, _ in world.engines[0].calls] == ["exchange"] * 3


H200_SMS = 132


@pytest.mark.parametrize("name", ["counted_broadcast.cco", "counted_gather.cco",
                                  "allreduce_oneshot.cco"])
def test_ranks_sharing_a_gpu_get_kernels_that_are_resident_together(name: str) -> None:
    """Issue 30: 8 NVSHMEM ranks on one H200 under MPS.  `counted_broadcast` was generated
    at the default budget (32 CTAs of 512 threads; 74 registers, so one CTA per SM): 8 x 32
    CTAs do not fit on 132 SMs, and the ranks' leading barrier waited for CTAs that could
    not start.  The binding now gives ranks sharing a GPU `ccogen run`'s budget, so the
    residency rule holds at any occupancy (one CTA per SM)."""
    from ccogen.rt.placement import Footprint, residency_problem

    world = FakeWorld(8)
    comms = world.communicators(ranks_per_gpu=8, sms=H200_SMS)
    assert comms[0].max_ctas == 15
    op = comms[0].load(name)
    kernels = [Footprint(k.name, math.prod(k.grid), math.prod(k.block), 0, True, 1)
               for k in op.placed.manifest.kernels]
    assert max(k.grid for k in kernels) <= 15
    assert residency_problem(kernels, H200_SMS, 8) is None
    assert op.placed.manifest.max_ctas == 15


def test_one_rank_a_gpu_keeps_the_default_budget() -> None:
    world = FakeWorld(8)
    comms = world.communicators()
    assert comms[0].max_ctas is None
    assert comms[0].load("counted_broadcast.cco").placed.manifest.max_ctas == 32


def test_back_to_back_safe_protocols_are_one_launch_per_call() -> None:
    """A protocol the checker proved safe back to back (`launch % 2` landing slots, no
    `host_sync`) gets no launch-barrier kernel: each call is its one kernel launch."""
    world, comms = _pair()
    ops = [c.load("alltoall_rotating.cco", block=BLOCK) for c in comms]
    assert ops[0].spec.between_launches == "free"
    send = torch.zeros(2 * BLOCK, dtype=torch.uint8)
    recv = torch.zeros(2 * BLOCK, dtype=torch.uint8)
    for _ in range(3):
        ops[0](send=send, recv=recv)
    assert [name for name, _, _ in world.engines[0].calls] == ["exchange"] * 3


def test_loading_again_returns_the_same_op_and_builds_nothing() -> None:
    world, comms = _pair()
    first = comms[0].load("alltoall.cco", block=BLOCK)
    builds = len(world.engines[0].builds)
    assert comms[0].load("alltoall.cco", block=BLOCK) is first
    assert comms[0].load("alltoall.cco", params={"block": BLOCK}) is first
    assert len(world.engines[0].builds) == builds
    other = comms[0].load("alltoall.cco", block=2 * BLOCK)
    assert other is not first and len(world.engines[0].builds) == builds + 1


def test_a_second_communicator_runs_no_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    import ccogen.rt.api as api

    _, comms = _pair()
    comms[0].load("alltoall.cco", block=3 * BLOCK)
    calls = []
    real = api.generate_for_run

    def counting(*a: object, **k: object) -> object:
        calls.append(a)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "generate_for_run", counting)
    _, again = _pair()
    again[0].load("alltoall.cco", block=3 * BLOCK)
    assert calls == []
    again[0].load("alltoall.cco", block=5 * BLOCK)
    assert len(calls) == 1


def test_target_must_be_the_communicators() -> None:
    _, comms = _pair()
    with pytest.raises(ArgumentError, match="Communicator\\(target='nccl-lsa'\\)"):
        comms[0].load("alltoall.cco", target="nccl-lsa", block=BLOCK)


# -- buffers (language v2 manifests, written by hand until the code generator emits them) --

def _buffered_op(tmp_path, comm, engine) -> Op:  # type: ignore[no-untyped-def]
    manifest = buffered_manifest(tmp_path)
    spec = OpSpec.from_manifest(manifest, ["recv"])
    placed = engine.place(manifest, manifest.kernel_path, False)
    op = Op(comm, spec, placed, library.new_handle(), ())
    library.bind(op.handle, op)
    return op


def test_buffers_are_passed_as_pointer_slots(tmp_path) -> None:  # type: ignore[no-untyped-def]
    world = FakeWorld(1)
    comm = world.communicators()[0]
    op = _buffered_op(tmp_path, comm, world.engines[0])
    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    counts = torch.zeros(2, dtype=torch.int32)
    recv = op(x=x, counts=counts)
    assert recv.dtype == torch.bfloat16 and tuple(recv.shape) == (2, 16)
    name, _, slots = world.engines[0].calls[-1]
    assert name == "exchange" and slots == (counts.data_ptr(), x.data_ptr())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"counts": "I32"}, "missing buffer `x` \\(bf16\\[32\\]\\)"),
    ({"x": "BF16", "counts": "I32", "y": "I32"}, "no buffer or window `y` in protocol `moe`"),
    ({"x": "BF16", "counts": "I32", "recv": "I32"}, r"the contents of window `recv` are "
     r"int32\[2\], the window is bf16\[2, 16\]"),
    ({"x": "F32", "counts": "I32"}, "buffer `x` is float32, the protocol declares bf16\\[32\\]"),
    ({"x": "BF16_SHORT", "counts": "I32"}, "buffer `x` has 31 elements"),
    ({"x": "BF16_STRIDED", "counts": "I32"}, "buffer `x` is not contiguous"),
    ({"x": [1, 2], "counts": "I32"}, "buffer `x` must be a torch.Tensor"),
])
def test_bad_buffers_launch_nothing(tmp_path, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    tensors = {
        "I32": torch.zeros(2, dtype=torch.int32),
        "BF16": torch.zeros(32, dtype=torch.bfloat16),
        "F32": torch.zeros(32, dtype=torch.float32),
        "BF16_SHORT": torch.zeros(31, dtype=torch.bfloat16),
        "BF16_STRIDED": torch.zeros(64, dtype=torch.bfloat16)[::2],
    }
    world = FakeWorld(1)
    op = _buffered_op(tmp_path, world.communicators()[0], world.engines[0])
    args = {k: tensors.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ArgumentError, match=message):
        op(**args)
    assert world.engines[0].calls == []


def test_a_buffer_on_another_device_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    world = FakeWorld(1)
    op = _buffered_op(tmp_path, world.communicators()[0], world.engines[0])
    x = torch.zeros(32, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ArgumentError, match="buffer `x` is on meta, the communicator's device "
                       "is cpu"):
        op(x=x, counts=torch.zeros(2, dtype=torch.int32))


# -- errors from the device --------------------------------------------------------------------

def test_a_hung_wait_in_a_debug_build_is_a_python_exception() -> None:
    world, comms = _pair()
    ops = [c.load("alltoall.cco", block=BLOCK, debug=True) for c in comms]
    ops[0]()
    placed = world.engines[0].placed[-1]
    placed.record.hit(DebugRecord(1, 0, 13, 1, 0, 1, 2, 1, 1))
    world.engines[0].fail_query = FakeCudaError("CUDA_ERROR_LAUNCH_FAILED")
    with pytest.raises(DeviceError, match=r"alltoall\(block=64\) on 2 ranks: rank 0: wait at "
                       r"alltoall.cco:13 for \(src 1, queue 0\) expected 2, observed 1"):
        comms[0].synchronize(timeout_s=1)
    calls = len(world.engines[0].calls)
    with pytest.raises(DeviceError, match=r"wait at alltoall\.cco:13"):
        ops[0]()  # a debug build checks the record before launching again
    assert len(world.engines[0].calls) == calls


def test_a_failed_launch_names_the_rank_and_protocol() -> None:
    world, comms = _pair()
    op = comms[0].load("alltoall.cco", block=BLOCK)
    world.engines[0].fail_launch = FakeCudaError("CUDA_ERROR_ILLEGAL_ADDRESS")
    with pytest.raises(DeviceError, match=r"rank 0: alltoall\(block=64\) on 2 ranks: "
                       "CUDA_ERROR_ILLEGAL_ADDRESS"):
        op()


def test_closing_unregisters_and_finalizes() -> None:
    world, comms = _pair()
    op = comms[0].load("alltoall.cco", block=BLOCK)
    assert library._OPS[op.handle] is op
    comms[0].close()
    assert op.handle not in library._OPS and world.engines[0].finalized
    with pytest.raises(Exception, match="closed"):
        comms[0].load("alltoall.cco", block=BLOCK)


# -- torch.compile -----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_step_orders_writes_and_reads_around_the_launch(backend: str) -> None:
    """Rank 1 launches first (eagerly); rank 0's compiled step passes its input for `send`,
    launches (completing the collective) and reads `recv`: any reordering shows."""
    torch._dynamo.reset()
    _, comms = _pair()
    ops = _load_all(comms)
    x1 = torch.randint(0, 255, (2 * BLOCK,), dtype=torch.uint8)
    ops[1].windows["send"].copy_(x1)
    op0 = ops[0]

    def step(x: Any) -> Any:
        recv = op0(send=x)
        return recv.to(torch.int32) * 2

    compiled = torch.compile(step, backend=backend, fullgraph=True)
    for _ in range(3):
        x0 = torch.randint(0, 255, (2 * BLOCK,), dtype=torch.uint8)
        ops[1]()  # pending until rank 0 launches
        got = compiled(x0)
        expected = x1[:BLOCK].to(torch.int32) * 2
        assert torch.equal(got[BLOCK:], expected)        # read after the launch
        assert torch.equal(ops[1].windows["recv"][:BLOCK], x0[BLOCK:])  # written before it


def _stamp_counts(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """The `moe` manifest's kernel on the CPU: counts (slot 0, i32[2]) := 7, 7, through the
    pointer it was given, as the device would."""
    import ctypes

    (pointers,) = slots
    (ctypes.c_int32 * 2).from_address(pointers[0])[:] = [7, 7]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_call_writes_written_buffers_back(tmp_path, backend: str) -> None:  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    world = FakeWorld(1, {"moe": _stamp_counts})
    comm = world.communicators()[0]
    op = _buffered_op(tmp_path, comm, world.engines[0])
    x = torch.ones(32, dtype=torch.bfloat16)

    def step(counts: Any) -> Any:
        recv = op(x=x, counts=counts)
        return recv.float().sum() + counts.sum()

    counts = torch.zeros(2, dtype=torch.int32)
    out = torch.compile(step, backend=backend, fullgraph=True)(counts)
    assert counts.tolist() == [7, 7]                   # the kernel's write reached the caller
    assert float(out) == 14.0                          # and was read after the launch
    assert world.engines[0].calls[-1][0] == "exchange"


def test_one_compiled_function_serves_several_ops() -> None:
    """The same compiled code called with different ops (as a model with several layers
    does, or one process driving fake ranks): the op's handle changes between calls, which
    torch.compile turns into a symbolic integer on a recompile; each call still launches
    its own op (the fake implementation specialises on the handle)."""
    torch._dynamo.reset()
    pairs = [_pair() for _ in range(3)]
    ops = [_load_all(comms) for _, comms in pairs]

    def step(op: Op, x: Any) -> Any:
        return op(send=x).to(torch.int32) + 1

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for _ in range(2):
        for pair in ops:
            x1 = torch.randint(0, 255, (2 * BLOCK,), dtype=torch.uint8)
            pair[1].windows["send"].copy_(x1)
            pair[1]()  # pending until rank 0 launches
            x0 = torch.randint(0, 255, (2 * BLOCK,), dtype=torch.uint8)
            got = compiled(pair[0], x0)
            assert torch.equal(got[BLOCK:], x1[:BLOCK].to(torch.int32) + 1)
            assert torch.equal(pair[1].windows["recv"][:BLOCK], x0[BLOCK:])
