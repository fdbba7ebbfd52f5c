"""Where each window, signal slot and counter lives in an instance's symmetric heap.

One symmetric allocation per rank holds everything (docs/runtime-abi.md).  Windows
come first in declaration order (local `buffer`s are not in the heap: kernels take them
as parameters, `HeapLayout.address`), then the signal slots (`nranks * queues` 64-bit
counters, slot `src * queues + q`), then the counters, then per-kernel scratch words
for the CTA-group barriers.  Every offset is 256-byte aligned, or the window's
`align=` if larger.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccogen.codegen.steps import LOCAL, buffer_peer
from ccogen.ir.instance import Instance, RegionInst

ALIGN = 256


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


@dataclass(frozen=True, slots=True)
class Placed:
    name: str
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class HeapLayout:
    windows: tuple[Placed, ...]
    signals: Placed
    counters: tuple[Placed, ...]
    scratch: Placed
    size: int
    queues: int
    buffers: tuple[str, ...] = ()  # local buffers: kernel parameters, not in the heap

    def address(self, region: RegionInst, me: int) -> tuple[int, int]:
        """(peer, offset) of a region as steps name it: a heap offset on `LOCAL` or a
        peer rank, or an offset into a local buffer (`model.buffer_peer`)."""
        if region.window in self.buffers:
            return buffer_peer(self.buffers.index(region.window)), region.start
        peer = LOCAL if region.rank == me else region.rank
        return peer, self.window(region.window).offset + region.start

    def window(self, name: str) -> Placed:
        for w in self.windows:  # a handful of windows: a scan, no index to keep
            if w.name == name:
                return w
        raise KeyError(f"no window {name!r} in the heap layout")

    def counter(self, name: str) -> Placed:
        return next(c for c in self.counters if c.name == name)

    def windows_manifest(self, instance: Instance | None = None) -> list[dict[str, object]]:
        """The `windows` list of manifest.json; a typed window (language v2) also carries
        its `dtype` and `shape` (docs/runtime-abi.md)."""
        out: list[dict[str, object]] = []
        for w in self.windows:
            entry: dict[str, object] = {"name": w.name, "offset": w.offset, "size": w.size}
            dtype = instance.dtype(w.name) if instance is not None else None
            if dtype is not None and dtype.value != "u8":
                entry |= {"dtype": dtype.value, "shape": [w.size // dtype.size]}
            out.append(entry)
        return out

    def slot(self, src: int, queue: int) -> int:
        """Heap offset of the signal slot counting what `src` sent me on `queue`."""
        return self.signals.offset + 8 * (src * self.queues + queue)


def plan_heap(instance: Instance, scratch_words: int) -> HeapLayout:
    """Lay out windows, slots, counters and `scratch_words` 64-bit barrier words."""
    offset = 0
    windows = []
    aligns = _alignments(instance)
    for name, size in instance.window_sizes:
        offset = _round_up(offset, max(ALIGN, aligns.get(name, 1)))
        windows.append(Placed(name, offset, size))
        offset += size
    offset = _round_up(offset, ALIGN)
    signals = Placed("<signals>", offset, 8 * instance.nranks * instance.queues)
    offset = _round_up(offset + signals.size, ALIGN)
    counters = []
    for c in instance.protocol.counters:
        counters.append(Placed(c.name, offset, 8))
        offset += ALIGN
    scratch = Placed("<scratch>", offset, 8 * max(1, scratch_words))
    size = _round_up(offset + scratch.size, 4096)
    return HeapLayout(tuple(windows), signals, tuple(counters), scratch, size, instance.queues,
                      tuple(name for name, _ in instance.buffer_sizes))


def _alignments(instance: Instance) -> dict[str, int]:
    from ccogen.ir.evaluate import Compiler, Env

    out: dict[str, int] = {}
    env = Env(instance.nranks, None, instance.param_dict)
    for w in instance.protocol.windows:
        if w.align is not None:
            out[w.name] = int(Compiler().eval(w.align, env))  # type: ignore[arg-type]
    return out
