"""A fake native extension and engine: the per-rank code runs on the CPU against them.

`fake_runtime(heap_size)` stands in for `ccogen._ccogen_rt`: launches are recorded
(executed, or captured into a graph and executed when the graph is replayed), device
memory is a bytearray at `BASE`.  `FakeEngine` stands in for a bootstrapped engine shim.
`install` puts both in place of the real ones for one test.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

import ccogen
from ccogen.rt import session as session_module
from ccogen.rt.engines import Heap

BASE = 0x7000_0000


def fake_runtime(heap_size: int, *, capture_fails: bool = False,
                 hang_after: int | None = None, timer_offset: int | None = None) -> Any:
    rt = types.SimpleNamespace(executed=[], arguments=[], captured=None, clock=[0], waits=[0])
    memory = bytearray(heap_size)

    class CudaError(RuntimeError):
        pass

    class CudaUnavailable(RuntimeError):
        pass

    def run(fn: str) -> None:
        rt.executed.append(fn)
        rt.clock[0] += 1
        if timer_offset is not None:
            words = memory[timer_offset:timer_offset + 16]
            total = int.from_bytes(words[:8], "little") + 1000
            trips = int.from_bytes(words[8:], "little") + 4
            memory[timer_offset:timer_offset + 16] = (total.to_bytes(8, "little")
                                                      + trips.to_bytes(8, "little"))

    class Context:
        def __init__(self, ordinal: int) -> None:
            self.ordinal = ordinal

        def synchronize(self) -> None: ...
        def make_current(self) -> None: ...

    class Stream:
        def __init__(self, non_blocking: bool = False) -> None: ...
        def synchronize(self) -> None: ...

        def wait(self, timeout_s: float) -> bool:
            rt.waits[0] += 1
            return hang_after is None or rt.waits[0] <= hang_after

    class Event:
        def record(self, stream: Any = None) -> None:
            self.t = rt.clock[0]

        def elapsed_ms_since(self, start: Any) -> float:
            return (self.t - start.t) * 1e-3

        def query(self) -> bool:  # a hung stream's events never fire
            return hang_after is None or rt.waits[0] <= hang_after

    class Module:
        def __init__(self, image: bytes) -> None:
            self.handle = 1

        def function(self, name: str) -> str:
            return name

        def unload(self) -> None: ...

    class Graph:
        def __init__(self, launches: list[str]) -> None:
            self.launches = launches

        def launch(self, stream: Any = None) -> None:
            for fn in self.launches:
                run(fn)

    def launch_kernel(fn: str, grid: Any, block: Any, shared_mem: int, params: list[Any],
                      stream: Any = None, cooperative: bool = False) -> None:
        assert all(isinstance(kind, str) and isinstance(value, bytes) for kind, value in params)
        rt.arguments.append(list(params))
        if rt.captured is not None:
            rt.captured.append(fn)
        else:
            run(fn)

    def begin_capture(stream: Any) -> None:
        if capture_fails:
            raise CudaError("cuStreamBeginCapture_v2: CUDA_ERROR_NOT_SUPPORTED")
        rt.captured = []

    def end_capture(stream: Any) -> Graph:
        graph, rt.captured = Graph(rt.captured), None
        return graph

    def memcpy_htod(dst: int, data: Any) -> None:
        raw = bytes(memoryview(data).cast("B"))
        memory[dst - BASE:dst - BASE + len(raw)] = raw

    def memcpy_dtoh(src: int, size: int) -> bytes:
        return bytes(memory[src - BASE:src - BASE + size])

    def memset_d8(dst: int, value: int, size: int) -> None:
        memory[dst - BASE:dst - BASE + size] = bytes([value]) * size

    rt.__dict__.update(
        CudaError=CudaError, CudaUnavailable=CudaUnavailable, Context=Context, Stream=Stream,
        Event=Event, Module=Module, Graph=Graph, launch=launch_kernel,
        begin_capture=begin_capture, end_capture=end_capture, memcpy_htod=memcpy_htod,
        memcpy_dtoh=memcpy_dtoh, memset_d8=memset_d8, device_name=lambda i: "Fake GPU",
        memory=memory)
    return rt


class FakeEngine:
    def __init__(self) -> None:
        self.barriers = 0
        self.modules = 0
        self.devcomm_barriers: list[int] = []
        self.finalized = False
        self.library = types.SimpleNamespace(describe=lambda: "NCCL 0.0 (fake)")

    def heap_alloc(self, size: int) -> Heap:
        return Heap(BASE, 7)

    def barrier(self, timeout_s: float) -> None:
        self.barriers += 1

    def devcomm(self, count: int) -> bytes:
        self.devcomm_barriers.append(count)
        return bytes(200)

    def module_init(self, handle: int) -> None:
        self.modules += 1

    def module_finalize(self, handle: int) -> None:
        self.modules -= 1

    def finalize(self) -> None:
        self.finalized = True


def install(monkeypatch: pytest.MonkeyPatch, rt: Any, engine: FakeEngine) -> None:
    """`rt` as the native extension, `engine` as what every session bootstraps."""
    monkeypatch.setattr(ccogen, "_ccogen_rt", rt, raising=False)
    monkeypatch.setitem(sys.modules, "ccogen._ccogen_rt", rt)

    def bootstrap(session: Any, report: Any) -> FakeEngine:  # the shim loaded, init done
        report.library = engine.library.describe()
        return engine

    monkeypatch.setattr(session_module.RankSession, "_bootstrap", bootstrap)
