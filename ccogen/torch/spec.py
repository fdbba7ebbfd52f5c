"""What one loaded protocol looks like from PyTorch, read from its manifest (no torch here).

`OpSpec.from_manifest` turns a manifest (docs/runtime-abi.md) into the binding's view:
the windows as typed views of the symmetric heap (dtype and shape from the manifest:
`u8[size]` for v1 byte windows), which of them the protocol writes (the op's outputs), the
`buffer`s a call takes (language v2) with their dtype, shape and access, each kernel's
per-call pointer slots (`buffer:NAME` parameters), and whether launches may follow each
other without a barrier (`between_launches`, language v2 §6), and the per-call count with
the buffers it batches in rows (ccogen.torch.batch).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ccogen.manifest import ELEMENT_SIZES, BufferSpec, KernelSpec, Manifest, buffer_name
from ccogen.torch.batch import Batch, BatchShape

# ccogen element type -> the name of the torch dtype (torch.<name>).
TORCH_DTYPES = {"u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64",
                "u64": "uint64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
                "fp8e4m3": "float8_e4m3fn"}
assert set(TORCH_DTYPES) == set(ELEMENT_SIZES)


@dataclass(frozen=True)
class WindowView:
    """A window as a tensor: bytes [offset, offset + nbytes) of the heap as dtype[shape]."""

    name: str
    offset: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...]
    output: bool  # the protocol writes it (returned by a call)

    @property
    def torch_dtype(self) -> str:
        return TORCH_DTYPES[self.dtype]


@dataclass(frozen=True)
class KernelLaunch:
    """A kernel of the op and the buffers its per-call pointer slots take, in order."""

    spec: KernelSpec
    slots: tuple[int, ...]     # parameter indices of `buffer:NAME` parameters
    buffers: tuple[int, ...]   # for each slot, the index of its buffer in OpSpec.buffers


@dataclass(frozen=True)
class OpSpec:
    protocol: str
    source: str
    target: str
    nranks: int
    params: tuple[tuple[str, int], ...]
    debug: bool
    windows: tuple[WindowView, ...]
    buffers: tuple[BufferSpec, ...]
    kernels: tuple[KernelLaunch, ...]
    between_launches: str     # "host_sync": the binding orders launches with a barrier
    counters: tuple[str, ...]
    batch: Batch | None = None  # the per-call count and its row-batched buffers

    @classmethod
    def from_manifest(cls, manifest: Manifest, outputs: Collection[str] | None = None,
                      batch: BatchShape | None = None) -> OpSpec:
        """The binding's view of `manifest`; `outputs` are the windows the protocol writes
        (every window when None); `batch` its count, as the loader found it."""
        names = [w.name for w in manifest.windows]
        written = set(names if outputs is None else outputs)
        windows = tuple(WindowView(w.name, w.offset, w.size, w.dtype, w.dims, w.name in written)
                        for w in manifest.windows)
        index = {b.name: i for i, b in enumerate(manifest.buffers)}
        kernels = []
        for k in manifest.kernels:
            named = [(i, buffer_name(p)) for i, p in enumerate(k.params)]
            kernels.append(KernelLaunch(k, tuple(i for i, n in named if n is not None),
                                        tuple(index[n] for _, n in named if n is not None)))
        return cls(manifest.protocol, manifest.source, manifest.target, manifest.nranks,
                   manifest.params, manifest.debug, windows, manifest.buffers, tuple(kernels),
                   manifest.between_launches, tuple(c.name for c in manifest.counters),
                   None if batch is None else batch.resolve(manifest))

    @property
    def outputs(self) -> tuple[WindowView, ...]:
        return tuple(w for w in self.windows if w.output)

    @property
    def label(self) -> str:
        """`alltoall(block=4096) on 2 ranks` — the op in messages."""
        params = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.protocol}({params}) on {self.nranks} ranks"

    def window(self, name: str) -> WindowView:
        for w in self.windows:
            if w.name == name:
                return w
        raise KeyError(name)


def describe(dtype: str, shape: tuple[int, ...]) -> str:
    """`bf16[4096, 7168]`."""
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


__all__ = ["TORCH_DTYPES", "KernelLaunch", "OpSpec", "WindowView", "describe"]
