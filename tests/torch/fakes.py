"""A fake engine for the binding's CPU tests: heaps are CPU tensors, launches are recorded
and, for the protocols a test gives an effect, executed in Python.

`FakeWorld(nranks)` holds the ranks of one fake job in this process.  A launch of an op's
kernel is recorded on its rank; once every rank has launched it (the collective is
complete) the world applies the protocol's effect to every rank's heap, the way the
kernels would: so an effect sees each rank's windows as they are when the last rank
launches, and a test can tell whether a caller's write reached a window before the launch
and whether a read of an output came after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ccogen.manifest import Manifest
from ccogen.rt.debug import RECORD_SIZE, DebugRecord
from ccogen.torch.comm import Communicator

Effect = Callable[["FakeWorld", int, list[Any]], None]


class FakeCudaError(RuntimeError):
    pass


class FakeRecord:
    def __init__(self) -> None:
        self.data = bytearray(RECORD_SIZE)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.data[offset:offset + size])

    def hit(self, record: DebugRecord) -> None:
        self.data[:] = record.pack()


@dataclass
class FakePlaced:
    heap_pointer: int
    heap_size: int
    launches: list[Any]
    record: Any
    tensor: torch.Tensor
    manifest: Manifest
    keep: list[Any] = field(default_factory=list)

    def record_hit(self) -> DebugRecord | None:
        if self.record is None:
            return None
        rec = DebugRecord.parse(self.record.read(0, RECORD_SIZE))
        return rec if rec.hit else None


class FakeLaunch:
    def __init__(self, engine: FakeEngine, index: int, name: str, slots: int) -> None:
        self.engine, self.index, self.name, self.slot_count = engine, index, name, slots

    def launch(self, stream: int, slots: Any = ()) -> None:
        if self.engine.fail_launch is not None:
            raise self.engine.fail_launch
        if len(slots) != self.slot_count:
            raise FakeCudaError(f"{self.name}: {self.slot_count} slots, got {len(slots)}")
        self.engine.calls.append((self.name, stream, tuple(slots)))
        self.engine.world.launched(self.engine.rank, self.index, self.name, list(slots))


class FakeWorld:
    """The ranks of one fake job; `effects[protocol]` runs once per complete collective."""

    def __init__(self, nranks: int, effects: dict[str, Effect] | None = None) -> None:
        self.nranks = nranks
        self.effects = effects or {}
        self.engines: list[FakeEngine] = []
        self.pending: dict[tuple[int, str], list[tuple[int, list[Any]]]] = {}

    def launched(self, rank: int, index: int, name: str, slots: list[Any]) -> None:
        key = (index, name)
        waiting = self.pending.setdefault(key, [])
        waiting.append((rank, slots))
        if len({r for r, _ in waiting}) == self.nranks:
            del self.pending[key]
            protocol = self.engines[rank].placed[index].manifest.protocol
            effect = self.effects.get(protocol)
            if effect is not None:
                effect(self, index, [s for _, s in sorted(waiting, key=lambda w: w[0])])

    def window(self, rank: int, index: int, name: str) -> torch.Tensor:
        """Rank `rank`'s bytes of window `name` of its `index`-th placed protocol."""
        placed = self.engines[rank].placed[index]
        w = placed.manifest.window(name)
        return placed.tensor[w.offset:w.offset + w.size]

    def communicators(self, target: str = "nvshmem", ranks_per_gpu: int = 1,
                      sms: int = 0) -> list[Communicator]:
        out = []
        for rank in range(self.nranks):
            engine = FakeEngine(self, rank)
            out.append(Communicator.with_engine(engine, target=target, rank=rank,
                                                nranks=self.nranks,
                                                device=torch.device("cpu"),
                                                ranks_per_gpu=ranks_per_gpu, sms=sms))
        return out


class FakeEngine:
    def __init__(self, world: FakeWorld, rank: int) -> None:
        self.world, self.rank = world, rank
        world.engines.append(self)
        self.placed: list[FakePlaced] = []
        self.calls: list[tuple[str, int, tuple[int, ...]]] = []
        self.builds: list[Path] = []
        self.fail_launch: Exception | None = None
        self.fail_query: Exception | None = None
        self.finalized = False

    def build(self, manifest: Manifest, debug: bool) -> Path:
        self.builds.append(manifest.directory)
        return manifest.kernel_path

    def place(self, manifest: Manifest, cubin: Path, debug: bool) -> FakePlaced:
        tensor = torch.zeros(manifest.heap_size, dtype=torch.uint8)
        index = len(self.placed)
        launches = [FakeLaunch(self, index, k.name,
                               sum(p.startswith("buffer:") for p in k.params))
                    for k in manifest.kernels]
        record = FakeRecord() if (debug or manifest.debug) else None
        placed = FakePlaced(tensor.data_ptr(), manifest.heap_size, launches, record, tensor,
                            manifest)
        self.placed.append(placed)
        return placed

    def query(self, stream: int) -> bool:
        if self.fail_query is not None:
            raise self.fail_query
        return True

    def is_cuda_error(self, exc: BaseException) -> bool:
        return isinstance(exc, FakeCudaError)

    def finalize(self) -> None:
        self.finalized = True


def alltoall_effect(world: FakeWorld, index: int, slots: list[Any]) -> None:
    """protocols/alltoall.cco: rank r's send block p lands in rank p's recv block r."""
    n = world.nranks
    block = world.window(0, index, "send").numel() // n
    sends = [world.window(r, index, "send").clone() for r in range(n)]
    for r in range(n):
        for p in range(n):
            if p != r:
                world.window(p, index, "recv")[r * block:(r + 1) * block] = \
                    sends[r][p * block:(p + 1) * block]
