"""`Communicator`: one rank's engine and protocols, built from a torch process group.

    import torch.distributed as dist, ccogen.torch as cct
    dist.init_process_group("nccl")                   # torchrun: env:// variables
    comm = cct.Communicator(target="nvshmem")         # engine + heaps on this rank's GPU
    a2a = comm.load("alltoall.cco", block=4096)       # compiled, built, cached, placed
    a2a.windows["send"].copy_(x); out = a2a()         # launched on the current stream

The process group gives the rank, the team size and the unique-id exchange (a broadcast
from rank 0 of the group, any backend: gloo works, and is the one to use when several
ranks share a GPU under MPS).  The device is `device=`, else `LOCAL_RANK` modulo the
visible GPUs, else the current CUDA device; it becomes the current device.
Ranks that share a GPU (found through the group: host and device) get kernels of at most
`ccogen.rt.placement.shared_budget` CTAs, as `ccogen run` gives them: every rank's kernel
spins on the others', so all of them must be resident together (8 ranks on one H200:
15 CTAs each, not the default 32, which left a 512-thread kernel of 74 registers, one CTA
per SM, waiting for SMs its peers' spinning CTAs held).
`load` is collective: every rank loads the same protocols in the same order (checked:
the ranks compare what they load through the group).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ccogen.errors import RunError
from ccogen.rt.debug import describe_wait
from ccogen.rt.placement import sharing_budget
from ccogen.torch import library
from ccogen.torch.device import DEFAULT_INIT_TIMEOUT_S, DeviceEngine, Placed
from ccogen.torch.errors import ArgumentError, DeviceError
from ccogen.torch.loader import LAUNCH_BARRIER, generate
from ccogen.torch.op import Op
from ccogen.torch.spec import OpSpec


class _CudaMemory:
    """Device memory as a `__cuda_array_interface__` (torch.as_tensor views it)."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (pointer, False), "version": 3,
                                         "strides": None}


def _group_broadcast(group: Any) -> Callable[[bytes | None], bytes]:
    import torch.distributed as dist

    src = 0 if group is None else dist.get_global_rank(group, 0)

    def broadcast(data: bytes | None) -> bytes:
        box = [data]
        dist.broadcast_object_list(box, src=src, group=group)
        if not isinstance(box[0], bytes):
            raise RunError("the process group delivered no unique id from rank 0")
        return box[0]

    return broadcast


def _pick_device(device: Any) -> torch.device:
    if device is not None:
        d = torch.device(device)
        return d if d.index is not None else torch.device(d.type, torch.cuda.current_device())
    count = torch.cuda.device_count()
    if count == 0:
        raise RunError("no CUDA device visible to PyTorch (torch.cuda.device_count() is 0)")
    local = os.environ.get("LOCAL_RANK")
    if local is not None and local.isdigit():
        return torch.device("cuda", int(local) % count)  # ranks beyond the GPUs share them
    return torch.device("cuda", torch.cuda.current_device())


def _ranks_sharing(device: torch.device, nranks: int, group: Any) -> tuple[int, int]:
    """The most ranks of the group on one GPU (same host, same device: every rank gets the
    same budget, so every rank generates the same instance), and the fewest SMs of their
    GPUs.  Collective."""
    import socket
    from collections import Counter

    import torch.distributed as dist

    props = torch.cuda.get_device_properties(device)
    mine = (socket.gethostname(), str(getattr(props, "uuid", device.index)),
            int(props.multi_processor_count))
    every: list[Any] = [None] * nranks
    dist.all_gather_object(every, mine, group=group)
    per_gpu = Counter((host, gpu) for host, gpu, _ in every)
    return max(per_gpu.values()), min(sms for _, _, sms in every)


class Communicator:
    """One rank's engine (NCCL device communicator or NVSHMEM), its symmetric heaps and
    the protocols loaded on it (module docstring)."""

    def __init__(self, group: Any = None, *, target: str = "nccl-lsa", device: Any = None,
                 heap_bytes: int | None = None,
                 init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S) -> None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RunError("ccogen.torch.Communicator needs an initialised torch.distributed "
                           "process group: call torch.distributed.init_process_group() first "
                           "(under torchrun the env:// variables are set)")
        rank, nranks = dist.get_rank(group), dist.get_world_size(group)
        where = _pick_device(device)
        torch.cuda.set_device(where)
        sharing, sms = _ranks_sharing(where, nranks, group)
        engine = DeviceEngine(target, rank, nranks, where.index or 0, _group_broadcast(group),
                              heap_bytes=heap_bytes, init_timeout_s=init_timeout_s)
        self._setup(engine, target, rank, nranks, where, group, collective=True,
                    max_ctas=sharing_budget(sharing, sms))

    @classmethod
    def with_engine(cls, engine: Any, *, target: str, rank: int, nranks: int,
                    device: torch.device, group: Any = None, ranks_per_gpu: int = 1,
                    sms: int = 0) -> Communicator:
        """A communicator over a given engine (the CPU tests' fake engine); `ranks_per_gpu`
        ranks sharing a GPU of `sms` SMs, as `__init__` finds them."""
        self = cls.__new__(cls)
        self._setup(engine, target, rank, nranks, device, group, collective=group is not None,
                    max_ctas=sharing_budget(ranks_per_gpu, sms))
        return self

    def _setup(self, engine: Any, target: str, rank: int, nranks: int, device: torch.device,
               group: Any, *, collective: bool, max_ctas: int | None = None) -> None:
        self._engine = engine
        self._collective = collective
        self.target, self.rank, self.nranks, self.device = target, rank, nranks, device
        self.max_ctas = max_ctas  # the SM budget of every kernel loaded (None: the default)
        self.group = group
        self._ops: dict[str, Op] = {}
        self._barrier: Op | None = None
        self._closed = False
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        index = device.index if device.index is not None else 0
        if device.type != "cuda":
            self._stream: Callable[[], int] = lambda: 0
        elif raw is not None:
            self._stream = lambda: int(raw(index))
        else:  # pragma: no cover - older torch
            self._stream = lambda: int(torch.cuda.current_stream(device).cuda_stream)

    # -- loading -----------------------------------------------------------------------------
    def load(self, protocol: Any, target: str | None = None, *, debug: bool = False,
             force: bool = False, params: Mapping[str, Any] | None = None,
             **kwargs: Any) -> Op:
        """Compile (cached), build (cached) and place `protocol` on every rank; the `Op`.

        `protocol`: a .cco path (a bare name is also looked up in ccogen's protocol
        library), .cco text or a Protocol; parameters as keywords (or `params=` for names
        that clash with these arguments): integers, and for a `dtype` parameter the
        element type's name (`T="f32"`) or a torch dtype (`T=torch.float32`).  `debug`:
        waits give up after ~2 s and report (DeviceError); `force`: load a protocol the
        checker refuses (with `debug`, to see which wait hangs).  Loading the same protocol
        with the same parameters again returns the same Op.  Collective.
        """
        self._check_open()
        if target is not None and target != self.target:
            raise ArgumentError(f"this communicator runs {self.target}; `{target}` needs a "
                                f"Communicator(target={target!r})")
        values = {**dict(params or {}), **kwargs}
        generated = generate(protocol, self.target, self.nranks, values, debug=debug,
                             force=force, max_ctas=self.max_ctas)
        self._agree(generated.key, generated.manifest.protocol)
        if generated.key in self._ops:
            return self._ops[generated.key]
        spec = OpSpec.from_manifest(generated.manifest, generated.outputs, generated.batch)
        before: tuple[Any, ...] = ()
        if spec.between_launches == "host_sync" or force:  # (`force`: nothing is proven)
            before = tuple(self._launch_barrier().placed.launches)
        placed = self._place(generated.manifest, debug)
        op = Op(self, spec, placed, library.new_handle(), before)
        library.bind(op.handle, op)
        self._ops[generated.key] = op
        return op

    def _place(self, manifest: Any, debug: bool) -> Placed:
        cubin = self._engine.build(manifest, debug)
        return self._engine.place(manifest, cubin, debug)

    def _launch_barrier(self) -> Op:
        """The barrier that orders launches of protocols not proven back-to-back safe."""
        if self._barrier is None:
            generated = generate(LAUNCH_BARRIER, self.target, self.nranks, {},
                                 max_ctas=self.max_ctas)
            spec = OpSpec.from_manifest(generated.manifest, ())
            placed = self._place(generated.manifest, False)
            self._barrier = Op(self, spec, placed, library.new_handle(), ())
        return self._barrier

    def _agree(self, key: str, name: str) -> None:
        """Every rank loads the same instance now (else the heap allocations would pair
        up wrongly and hang)."""
        if not self._collective:
            return  # a fake engine without a process group
        import torch.distributed as dist

        keys: list[Any] = [None] * self.nranks
        dist.all_gather_object(keys, (key, name), group=self.group)
        if any(k[0] != key for k in keys):
            loaded = ", ".join(f"rank {r}: {k[1]}" for r, k in enumerate(keys))
            raise ArgumentError(f"Communicator.load is collective: every rank must load the "
                                f"same protocol with the same parameters, in the same order "
                                f"({loaded}; parameters or debug differ where names agree)")

    # -- tensors and streams -----------------------------------------------------------------
    def _heap_tensor(self, placed: Placed) -> torch.Tensor:
        tensor = getattr(placed, "tensor", None)  # a fake engine's heap
        if tensor is not None:
            return tensor
        return torch.as_tensor(_CudaMemory(placed.heap_pointer, placed.heap_size),
                               device=self.device)

    # -- errors and synchronisation ------------------------------------------------------------
    def raise_device_errors(self) -> None:
        """DeviceError when a debug build's wait timed out or a `require` failed on this
        rank (read from the debug records: no device synchronisation)."""
        for op in self._all_ops():
            rec = op.placed.record_hit()
            if rec is not None:
                raise DeviceError(f"{op.spec.label}: " + describe_wait(
                    rec, op.spec.source, op.spec.counters))

    def _device_error(self, op: Op, text: str) -> DeviceError:
        try:
            self.raise_device_errors()
        except DeviceError as exc:
            return exc
        return DeviceError(f"rank {self.rank}: {op.spec.label}: {text}")

    def synchronize(self, timeout_s: float = 30.0) -> None:
        """Wait until the current stream is idle; DeviceError naming the wait (debug
        builds) when a kernel failed or did not finish within `timeout_s`.  Not inside a
        CUDA-graph capture."""
        self._check_open()
        stream = self._stream()
        deadline = time.monotonic() + timeout_s
        pause = 20e-6
        while True:
            try:
                if self._engine.query(stream):
                    break
            except Exception as exc:
                if not self._engine.is_cuda_error(exc):
                    raise
                self.raise_device_errors()
                raise DeviceError(f"rank {self.rank}: a kernel on the current stream "
                                  f"failed: {exc}") from None
            if time.monotonic() > deadline:
                self.raise_device_errors()
                names = ", ".join(op.spec.label for op in self._ops.values()) or "nothing"
                raise DeviceError(
                    f"rank {self.rank}: the current stream did not finish within "
                    f"{timeout_s:g} s (loaded: {names}); load with debug=True to name the "
                    "wait that hangs")
            time.sleep(pause)
            pause = min(pause * 2, 2e-3)
        self.raise_device_errors()

    def _all_ops(self) -> list[Op]:
        ops = list(self._ops.values())
        return [*ops, self._barrier] if self._barrier is not None else ops

    # -- teardown ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RunError("this ccogen.torch.Communicator is closed")

    def close(self) -> None:
        """Finalize the engine; the window tensors of its ops become invalid."""
        if self._closed:
            return
        self._closed = True
        for op in self._all_ops():
            library.unbind(op.handle)
        self._engine.finalize()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Communicator"]
