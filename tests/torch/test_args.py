"""Buffer checks (no torch): anything tensor-like is checked; messages say the fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ccogen.torch.args import BufferBinder, dtype_name
from ccogen.torch.errors import ArgumentError
from ccogen.torch.spec import OpSpec

from .test_spec import buffered_manifest


@dataclass(frozen=True)
class Device:
    type: str
    index: int | None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


@dataclass(frozen=True)
class DType:
    name: str

    def __str__(self) -> str:
        return f"torch.{self.name}"


class Tensor:
    """Just what the binder reads of a torch.Tensor."""

    def __init__(self, dtype: str, shape: tuple[int, ...], device: Device = Device("cuda", 0),
                 contiguous: bool = True, ptr: int = 0x1000) -> None:
        self.dtype, self.shape, self.device = DType(dtype), shape, device
        self._contiguous, self._ptr = contiguous, ptr

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_contiguous(self) -> bool:
        return self._contiguous

    def data_ptr(self) -> int:
        return self._ptr

    def element_size(self) -> int:
        return {"bfloat16": 2, "float16": 2, "int32": 4, "uint8": 1}[self.dtype.name]


@pytest.fixture
def binder(tmp_path: Path) -> BufferBinder:
    return BufferBinder(OpSpec.from_manifest(buffered_manifest(tmp_path)), "cuda", 0)


def test_good_buffers_bind_in_protocol_order(binder: BufferBinder) -> None:
    x = Tensor("bfloat16", (4, 8), ptr=0xA000)
    counts = Tensor("int32", (2,), ptr=0xB000)
    tensors, pointers, inputs = binder.bind({"counts": counts, "x": x})
    assert tensors == (x, counts) and pointers == (0xA000, 0xB000) and inputs == ()
    assert binder.bind({"counts": counts, "x": x}, pointers=False)[1] == ()


@pytest.mark.parametrize(("x", "message"), [
    (Tensor("bfloat16", (32,), Device("cuda", 1)),
     "buffer `x` is on cuda:1, the communicator's device is cuda:0: move it with "
     ".to\\('cuda:0'\\)"),
    (Tensor("bfloat16", (32,), Device("cpu", None)), "buffer `x` is on cpu"),
    (Tensor("float16", (32,)), "buffer `x` is float16, the protocol declares bf16\\[32\\] "
     "\\(torch.bfloat16\\)"),
    (Tensor("bfloat16", (2, 8)), "buffer `x` has 16 elements \\(shape \\[2, 8\\]\\), the "
     "protocol declares 32 \\(bf16\\[32\\]\\)"),
    (Tensor("bfloat16", (32,), contiguous=False), "buffer `x` is not contiguous: pass "
     "x.contiguous\\(\\)"),
    (3.0, "buffer `x` must be a torch.Tensor \\(bf16\\[32\\]\\), not float"),
])
def test_bad_buffer(binder: BufferBinder, x: object, message: str) -> None:
    with pytest.raises(ArgumentError, match=message) as info:
        binder.bind({"x": x, "counts": Tensor("int32", (2,))})
    assert str(info.value).startswith("moe(tokens=4) on 1 ranks: ")
    assert str(info.value).endswith("; nothing was launched")


def test_names(binder: BufferBinder) -> None:
    counts = Tensor("int32", (2,))
    with pytest.raises(ArgumentError, match="missing buffer `x` \\(bf16\\[32\\]\\)"):
        binder.bind({"counts": counts})
    with pytest.raises(ArgumentError, match="no buffer or window `z` in protocol `moe`; it has "
                       "buffers `x`, `counts` and windows `recv`"):
        binder.bind({"counts": counts, "z": counts})
    with pytest.raises(ArgumentError, match="missing buffer `x`"):
        binder.bind({"recv": counts, "counts": counts})


def test_window_contents(binder: BufferBinder) -> None:
    x, counts = Tensor("bfloat16", (32,)), Tensor("int32", (2,))
    recv = Tensor("bfloat16", (32,))
    _, _, inputs = binder.bind({"x": x, "counts": counts, "recv": recv})
    assert inputs == ((0, recv),)
    for bad, message in [
        (Tensor("float16", (32,)), r"window `recv` are float16\[32\], the window is "
         r"bf16\[2, 16\] \(torch.bfloat16\)"),
        (Tensor("bfloat16", (31,)), r"are bfloat16\[31\]"),
        (Tensor("bfloat16", (32,), contiguous=False), "are not contiguous"),
        (Tensor("bfloat16", (32,), Device("cuda", 1)), "are on cuda:1"),
    ]:
        with pytest.raises(ArgumentError, match=message):
            binder.bind({"x": x, "counts": counts, "recv": bad})


def test_dtype_names() -> None:
    assert dtype_name(DType("bfloat16")) == "bfloat16"
    assert dtype_name("torch.int32") == "int32"


class View(Tensor):
    """A view into a larger storage (`t[1:]`): its base is `offset` elements in."""

    def __init__(self, dtype: str, shape: tuple[int, ...], offset: int) -> None:
        super().__init__(dtype, shape)
        self._offset = offset
        self._ptr = 0x1000 + offset * self.element_size()

    def storage_offset(self) -> int:
        return self._offset


def test_a_buffer_off_a_16_byte_boundary_is_refused_with_its_offset(
        binder: BufferBinder) -> None:
    """N7: the generated kernels move local buffers in 16-byte vectors (a CFT put stages
    them in 16-byte units: `ncclCft::put requires ... 16 bytes aligned`): a view such as
    `t[1:]` is refused by name and offset before anything is launched; a view on a
    16-byte boundary binds."""
    from ccogen.targets.base import BUFFER_ALIGN
    from tests.targets.headers import cite, nccl

    cite(nccl("nccl_device/impl/cft__funcs.h"), r"ncclCft::put requires 'smemSource' to be 16 "
                                                r"bytes aligned")
    assert BUFFER_ALIGN == 16
    counts = Tensor("int32", (2,))
    with pytest.raises(ArgumentError, match="buffer `x` starts 2 bytes past a 16-byte boundary "
                                            "\\(a view at byte offset 2 of its storage\\)"):
        binder.bind({"x": View("bfloat16", (32,), 1), "counts": counts})
    assert binder.bind({"x": View("bfloat16", (32,), 8), "counts": counts})[1][0] == 0x1010
    assert binder.bind({"x": View("bfloat16", (32,), 1), "counts": counts}, pointers=False)
