"""One rank's engine for the PyTorch binding (no torch here): context, engine, heaps.

`DeviceEngine` is what a `ccogen.torch.Communicator` owns: the device's primary context
(the one PyTorch's CUDA runtime uses), the engine shim of the target (ccogen.rt.engines)
bootstrapped with a unique id that `broadcast` carries from rank 0 (the torch process
group), and, per loaded protocol, `place(...)`: its own symmetric heap (zeroed), its device
communicator (nccl-lsa), its module (registered with NVSHMEM on nvshmem) and one
`PreparedLaunch` per kernel.  Placing is collective: every rank loads the same protocols
in the same order.  A fake with the same methods runs the binding's CPU tests
(tests/torch/fakes.py).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccogen.manifest import Manifest, buffer_name
from ccogen.rt import native
from ccogen.rt.debug import RECORD_SIZE, DebugRecord
from ccogen.rt.watchdog import bounded

DEFAULT_INIT_TIMEOUT_S = 180.0


@dataclass
class Placed:
    """A protocol placed on one rank: its heap and prepared launches."""

    heap_pointer: int
    heap_size: int
    launches: list[Any]          # native PreparedLaunch per kernel, in manifest order
    record: Any = None           # native HostMapped debug record (debug builds)
    keep: list[Any] = field(default_factory=list)  # module etc.: alive as long as this

    def record_hit(self) -> DebugRecord | None:
        """The debug record when a wait timed out (or a `require` failed), else None."""
        if self.record is None:
            return None
        rec = DebugRecord.parse(self.record.read(0, RECORD_SIZE))
        return rec if rec.hit else None


def device_arch(device: int) -> str:
    major, minor = native.compute_capability(device)
    return f"sm_{major}{minor}"


class DeviceEngine:
    """The engine of one rank (module docstring)."""

    def __init__(self, target: str, rank: int, nranks: int, device: int,
                 broadcast: Callable[[bytes | None], bytes], *, heap_bytes: int | None = None,
                 init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S) -> None:
        from ccogen.rt.engines import Engine, build_engine
        from ccogen.toolchains.libraries import engine_spec

        self.target, self.rank, self.nranks, self.device = target, rank, nranks, device
        self.init_timeout_s = init_timeout_s
        self.rt = native.load()
        self.ctx = self.rt.Context(device)
        self.arch = device_arch(device)
        if heap_bytes is not None:
            for key, value in engine_spec(target).heap.environment(heap_bytes).items():
                os.environ.setdefault(key, value)
        path, library = build_engine(target, self.arch)
        self.engine = Engine(target, path, library)
        uid = broadcast(self.engine.unique_id() if rank == 0 else None)
        # collective: bounded (a peer that never comes would block it for ever)
        bounded(lambda: self.engine.init(rank, nranks, device, uid), init_timeout_s,
                f"rank {rank}: the {target} engine bootstrap")
        self.ctx.make_current()
        self.library = library.describe()

    def build(self, manifest: Manifest, debug: bool) -> Path:
        """The cubin of a generated instance for this GPU (cached: ccogen.toolchains.cubin)."""
        from ccogen.toolchains.cubin import build_cubin

        return build_cubin(manifest.directory, manifest.target, self.arch,
                           debug or manifest.debug)

    def place(self, manifest: Manifest, cubin: Path, debug: bool) -> Placed:
        """Heap (zeroed, every rank's ready: host barrier), device communicator, module,
        prepared launches (module docstring).  Collective."""
        rt, engine = self.rt, self.engine
        self.ctx.make_current()

        def alloc() -> Any:
            self.ctx.make_current()  # the helper thread's context
            return engine.heap_alloc(manifest.heap_size)

        heap = bounded(alloc, self.init_timeout_s,
                       f"rank {self.rank}: the heap allocation of `{manifest.protocol}` "
                       "(collective: does every rank load the same protocols in order?)")
        rt.memset_d8(heap.pointer, 0, manifest.heap_size)
        self.ctx.synchronize()
        devcomm = b""
        if any("devcomm" in k.params for k in manifest.kernels):
            devcomm = engine.devcomm(manifest.lsa_barrier_count)
        engine.barrier(self.init_timeout_s)
        module = rt.Module(cubin.read_bytes())
        engine.module_init(module.handle)
        record = rt.HostMapped(RECORD_SIZE) if (debug or manifest.debug) else None
        values = {
            "devcomm": devcomm,
            "window": struct.pack("<Q", heap.window),
            "heap": struct.pack("<Q", heap.pointer),
            "epoch": struct.pack("<Q", 0),  # ignored: the kernels count epochs on the device
            "debug": struct.pack("<Q", record.device_pointer if record is not None else 0),
        }
        launches = []
        for k in manifest.kernels:
            slots = [i for i, p in enumerate(k.params) if buffer_name(p) is not None]
            params = [(p, struct.pack("<Q", 0) if i in slots else values[p])
                      for i, p in enumerate(k.params)]
            launches.append(rt.PreparedLaunch(module.function(k.symbol), list(k.grid),
                                              list(k.block), k.shared_mem, params, slots,
                                              k.cooperative, self.ctx.handle))
        return Placed(heap.pointer, manifest.heap_size, launches, record, [module])

    def query(self, stream: int) -> bool:
        """True when `stream` is idle; CudaError when its work failed."""
        return bool(self.rt.stream_query(stream))

    def is_cuda_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self.rt.CudaError | self.rt.CudaUnavailable)

    def finalize(self) -> None:
        self.ctx.synchronize()
        self.engine.finalize()


__all__ = ["DEFAULT_INIT_TIMEOUT_S", "DeviceEngine", "Placed", "device_arch"]
