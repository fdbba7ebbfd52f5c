"""Local buffers and typed data in `ccogen run`, without a GPU: the manifest the code
generator writes for a protocol with a buffer, where the runner places the buffers, the
kernel arguments it passes, and the typed fills `ensure` is checked against."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from ccogen.codegen.files import GeneratedFiles
from ccogen.compiler import compile_protocol
from ccogen.errors import RunError
from ccogen.ir.dtype import ELEMENT_SIZES, DType
from ccogen.manifest import load_manifest
from ccogen.rt.data import initial_bytes
from ccogen.rt.engines import Heap
from ccogen.rt.launch import buffer_layout
from ccogen.rt.session import RankSession
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def oneshot(tmp_path: Path) -> Path:
    path = ROOT / "protocols" / "allreduce_oneshot.cco"
    files = compile_protocol(load_ir(path), "nvshmem", source=path.name, ranks=2,
                             params={"n": 1000}).files
    GeneratedFiles(files).write(tmp_path)
    return tmp_path


def test_the_manifest_carries_buffers_and_typed_windows(oneshot: Path) -> None:
    m = load_manifest(oneshot)
    (b,) = m.buffers
    assert (b.name, b.dtype, b.shape, b.access, b.size) == ("out", "bf16", (1000,), "write", 2000)
    (w,) = m.windows
    assert (w.name, w.dtype, w.dims) == ("x", "bf16", (1000,))
    assert m.kernels[0].params[-1] == "buffer:out"


def test_buffers_follow_the_heap_aligned(oneshot: Path) -> None:
    m = load_manifest(oneshot)
    offsets, size = buffer_layout(m)
    assert offsets["out"] >= m.heap_size and offsets["out"] % 256 == 0
    assert size == offsets["out"] + 2000


def _session(heap: int) -> RankSession:
    s = RankSession(target="nvshmem", engine_path="", rank=0, nranks=2, device=0,
                    rendezvous=None, shared_dir="", init_timeout_s=1)
    s.heap = Heap(heap, 0)
    return s


def test_kernel_arguments_pass_each_buffer_pointer(oneshot: Path) -> None:
    m = load_manifest(oneshot)
    args = _session(0x1000).kernel_params(m.kernels[0], 3, None, {"out": 0xABCD00})
    assert [k for k, _ in args] == list(m.kernels[0].params)
    assert dict(args)["buffer:out"] == struct.pack("<Q", 0xABCD00)
    assert dict(args)["epoch"] == struct.pack("<Q", 3)


def test_a_missing_buffer_is_a_clear_error(oneshot: Path) -> None:
    m = load_manifest(oneshot)
    with pytest.raises(RunError, match="buffer:out"):
        _session(0x1000).kernel_params(m.kernels[0], 0, None)


@pytest.mark.parametrize("dtype", [d.value for d in DType])
def test_typed_fills_are_finite_values_of_the_dtype(dtype: str) -> None:
    data = initial_bytes(7, 1, 0, "x", 64 * ELEMENT_SIZES[dtype], dtype)
    assert data.size == 64 * ELEMENT_SIZES[dtype]
    if dtype == "f32":
        assert np.isfinite(data.view(np.float32)).all()
        assert (np.abs(data.view(np.float32)) >= 0.5).all()
    assert not np.array_equal(data, initial_bytes(7, 2, 0, "x", data.size, dtype))


def test_one_element_size_table() -> None:
    from ccogen import manifest

    assert manifest.ELEMENT_SIZES is ELEMENT_SIZES
    assert all(ELEMENT_SIZES[d.value] == d.size for d in DType)


def test_a_buffer_off_a_16_byte_boundary_is_refused_before_the_launch(oneshot: Path) -> None:
    """N7: `ccogen run` (and `bench`) pass each local buffer here; the generated kernels
    move it in 16-byte vectors, so a base off that boundary is a clear error naming it."""
    m = load_manifest(oneshot)
    with pytest.raises(RunError, match="local buffer `out` starts at 0xabcd08, 8 bytes past a "
                                       "16-byte boundary"):
        _session(0x1000).kernel_params(m.kernels[0], 0, None, {"out": 0xABCD08})
    offsets, _ = buffer_layout(m)
    assert all(off % 16 == 0 for off in offsets.values())  # what `run` places
