"""DeviceEngine on a fake native extension and engine shim (no torch, no GPU): the unique
id goes through the given broadcast, each protocol gets its own zeroed heap, device
communicator and prepared launches with its buffer slots."""

from __future__ import annotations

import struct
import types
from pathlib import Path
from typing import Any

import pytest

from ccogen.rt.engines import Heap
from ccogen.torch import device as device_module

from .test_spec import buffered_manifest


class FakeShim:
    def __init__(self, target: str, path: Path, library: Any) -> None:
        self.log: list[Any] = []
        self.heaps = 0

    def unique_id(self) -> bytes:
        return b"U" * 128

    def init(self, rank: int, nranks: int, device: int, uid: bytes) -> None:
        self.log.append(("init", rank, nranks, device, uid))

    def heap_alloc(self, size: int) -> Heap:
        self.heaps += 1
        return Heap(0x1000_0000 * self.heaps, 0xAB)

    def devcomm(self, count: int) -> bytes:
        self.log.append(("devcomm", count))
        return b"D" * 200

    def barrier(self, timeout_s: float) -> None:
        self.log.append(("barrier",))

    def module_init(self, handle: int) -> None:
        self.log.append(("module_init", handle))

    def finalize(self) -> None:
        self.log.append(("finalize",))


def fake_rt() -> Any:
    rt = types.SimpleNamespace(memsets=[], prepared=[])

    class Context:
        handle = 0xC0
        def __init__(self, ordinal: int) -> None: ...
        def make_current(self) -> None: ...
        def synchronize(self) -> None: ...

    class Module:
        handle = 0x55
        def __init__(self, image: bytes) -> None: ...
        def function(self, name: str) -> str:
            return f"fn:{name}"

    class HostMapped:
        device_pointer = 0xDB
        def __init__(self, size: int) -> None: ...

    def prepared(*args: Any) -> Any:
        rt.prepared.append(args)
        return args

    rt.Context, rt.Module, rt.HostMapped, rt.PreparedLaunch = Context, Module, HostMapped, prepared
    rt.memset_d8 = lambda ptr, value, size: rt.memsets.append((ptr, value, size))
    return rt


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    import ccogen.rt.engines as engines

    rt = fake_rt()
    monkeypatch.setattr(device_module.native, "load", lambda: rt)
    monkeypatch.setattr(device_module.native, "compute_capability", lambda d: (9, 0))
    monkeypatch.setattr(engines, "build_engine", lambda target, arch: (
        Path("/fake.so"), types.SimpleNamespace(describe=lambda: "NVSHMEM 3.4.5")))
    monkeypatch.setattr(engines, "Engine", FakeShim)
    sent: list[Any] = []

    def broadcast(data: bytes | None) -> bytes:
        sent.append(data)
        return b"R" * 128

    eng = device_module.DeviceEngine("nvshmem", 1, 2, 0, broadcast)
    eng.sent, eng.fake_rt = sent, rt  # type: ignore[attr-defined]
    return eng


def test_bootstrap_takes_the_unique_id_from_the_broadcast(engine: Any) -> None:
    assert engine.sent == [None]  # rank 1 sends nothing, receives rank 0's id
    assert engine.engine.log[0] == ("init", 1, 2, 0, b"R" * 128)
    assert engine.arch == "sm_90"


def test_place_gives_each_protocol_a_zeroed_heap_and_slots(engine: Any, tmp_path: Path) -> None:
    manifest = buffered_manifest(tmp_path)
    first = engine.place(manifest, manifest.kernel_path, True)
    second = engine.place(manifest, manifest.kernel_path, False)
    assert first.heap_pointer != second.heap_pointer
    assert engine.fake_rt.memsets == [(first.heap_pointer, 0, 512), (second.heap_pointer, 0, 512)]
    fn, grid, _, _, params, slots, _, context = engine.fake_rt.prepared[0]
    assert fn == "fn:exchange" and grid == [1, 1, 1] and slots == [1, 3] and context == 0xC0
    assert [k for k, _ in params] == ["heap", "buffer:counts", "epoch", "buffer:x", "debug"]
    assert params[0][1] == struct.pack("<Q", first.heap_pointer)
    assert params[4][1] == struct.pack("<Q", 0xDB)  # the debug record
    assert engine.fake_rt.prepared[1][4][4][1] == struct.pack("<Q", 0)
    assert ("barrier",) in engine.engine.log and first.record is not None
