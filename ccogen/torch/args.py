"""Checking the arguments of an op call (no torch here: anything tensor-like is checked).

A call passes each `buffer` of the protocol by name as an ordinary tensor, and may pass
the new contents of any window by name (copied into the window on the stream before the
launch: the way to feed windows inside torch.compile).  Every argument is checked before
anything is launched — a tensor (has `data_ptr`), on the communicator's device,
contiguous, of the declared dtype with the declared number of elements (any shape: a
`bf16[4096 * 7168]` buffer takes a `[4096, 7168]` tensor; a byte window (`u8`, language
v1) takes any dtype of the window's byte size), a buffer starting on a 16-byte boundary
(`targets.base.BUFFER_ALIGN`; a view such as `t[1:]` does not) — and every problem is an
`ArgumentError` that says what was expected and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccogen.manifest import BufferSpec
from ccogen.targets.base import BUFFER_ALIGN
from ccogen.torch.errors import ArgumentError
from ccogen.torch.spec import TORCH_DTYPES, OpSpec, WindowView, describe

_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """`bfloat16` for torch.bfloat16 (memoised: called on every buffer of every call)."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        name = str(dtype).removeprefix("torch.")
        _DTYPE_NAMES[dtype] = name
        return name
    except TypeError:  # unhashable: not a dtype
        return str(dtype)


def _count(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


class BufferBinder:
    """Checks the arguments of calls to one op on one device; `bind` returns the buffers
    in the protocol's order, (for launches) their device pointers, and the window inputs
    as (window index, tensor) pairs."""

    def __init__(self, spec: OpSpec, device_type: str, device_index: int | None) -> None:
        self.spec = spec
        self.device_type = device_type
        self.device_index = device_index
        self.buffers = spec.buffers
        self.names = tuple(b.name for b in spec.buffers)
        self._expected = tuple((TORCH_DTYPES[b.dtype], _count(b.shape)) for b in spec.buffers)
        self._windows = {w.name: (i, w) for i, w in enumerate(spec.windows)}

    @property
    def device_text(self) -> str:
        if self.device_index is None:
            return self.device_type
        return f"{self.device_type}:{self.device_index}"

    def bind(self, given: Mapping[str, Any], pointers: bool = True
             ) -> tuple[tuple[Any, ...], tuple[int, ...], tuple[tuple[int, Any], ...]]:
        """(buffers in protocol order, their data pointers — () unless `pointers`,
        (window index, tensor) for each window given)."""
        inputs: tuple[tuple[int, Any], ...] = ()
        if len(given) != len(self.names) or any(n not in given for n in self.names):
            extra = {k: v for k, v in given.items() if k not in self.names}
            if any(k not in self._windows for k in extra) or len(given) - len(extra) != len(
                    self.names):
                raise self._names_error(given)
            inputs = tuple(self._window_input(name, t) for name, t in extra.items())
            given = {k: v for k, v in given.items() if k in self.names}
        tensors = tuple(given[n] for n in self.names)
        for tensor, spec, (dtype, count) in zip(tensors, self.buffers, self._expected,
                                                strict=True):
            try:
                device = tensor.device
                ok = (device.type == self.device_type and device.index == self.device_index
                      and dtype_name(tensor.dtype) == dtype and tensor.numel() == count
                      and tensor.is_contiguous())
            except AttributeError:
                ok = False
            if not ok:
                raise self._tensor_error(spec, tensor)
        if not pointers:
            return tensors, (), inputs
        addresses = tuple(int(t.data_ptr()) for t in tensors)
        for tensor, spec, address in zip(tensors, self.buffers, addresses, strict=True):
            if address % BUFFER_ALIGN:
                raise self._alignment_error(spec, tensor, address)
        return tensors, addresses, inputs

    def _window_input(self, name: str, tensor: Any) -> tuple[int, Any]:
        index, w = self._windows[name]
        try:
            device = tensor.device
            same_place = (device.type == self.device_type and device.index == self.device_index
                          and tensor.is_contiguous())
            if w.dtype == "u8":  # a byte window takes any dtype of its size
                fits = tensor.numel() * tensor.element_size() == w.nbytes
            else:
                fits = (dtype_name(tensor.dtype) == w.torch_dtype
                        and tensor.numel() == _count(w.shape))
        except AttributeError:
            same_place = fits = False
        if not (same_place and fits):
            raise self._window_error(w, tensor)
        return index, tensor

    # -- messages ----------------------------------------------------------------------------
    def _fail(self, text: str) -> ArgumentError:
        return ArgumentError(f"{self.spec.label}: {text}; nothing was launched")

    def _names_error(self, given: Mapping[str, Any]) -> ArgumentError:
        for name in given:
            if name not in self.names and name not in self._windows:
                known = [f"buffers {', '.join(f'`{n}`' for n in self.names)}" if self.names
                         else "no buffers"]
                known.append("windows " + ", ".join(f"`{n}`" for n in self._windows))
                return self._fail(f"no buffer or window `{name}` in protocol "
                                  f"`{self.spec.protocol}`; it has {' and '.join(known)}")
        missing = [b for b in self.buffers if b.name not in given]
        return self._fail("missing " + ", ".join(
            f"buffer `{b.name}` ({describe(b.dtype, b.shape)})" for b in missing))

    def _tensor_error(self, spec: BufferSpec, tensor: Any) -> ArgumentError:
        what = f"buffer `{spec.name}`"
        declared = describe(spec.dtype, spec.shape)
        if not all(hasattr(tensor, a) for a in ("data_ptr", "dtype", "device", "numel",
                                                 "is_contiguous")):
            return self._fail(f"{what} must be a torch.Tensor ({declared}), not "
                              f"{type(tensor).__name__}")
        device = tensor.device
        if device.type != self.device_type or device.index != self.device_index:
            return self._fail(f"{what} is on {device}, the communicator's device is "
                              f"{self.device_text}: move it with .to({self.device_text!r})")
        expected = TORCH_DTYPES[spec.dtype]
        if dtype_name(tensor.dtype) != expected:
            return self._fail(f"{what} is {dtype_name(tensor.dtype)}, the protocol declares "
                              f"{declared} (torch.{expected})")
        count = _count(spec.shape)
        if tensor.numel() != count:
            shape = list(getattr(tensor, "shape", ()))
            return self._fail(f"{what} has {tensor.numel()} elements (shape {shape}), the "
                              f"protocol declares {count} ({declared})")
        return self._fail(f"{what} is not contiguous: pass {spec.name}.contiguous()")

    def _alignment_error(self, spec: BufferSpec, tensor: Any, address: int) -> ArgumentError:
        offset = int(getattr(tensor, "storage_offset", lambda: 0)()) * int(
            getattr(tensor, "element_size", lambda: 1)())
        return self._fail(
            f"buffer `{spec.name}` starts {address % BUFFER_ALIGN} bytes past a "
            f"{BUFFER_ALIGN}-byte boundary (a view at byte offset {offset} of its storage); "
            f"the generated kernels move local buffers in {BUFFER_ALIGN}-byte vectors: pass "
            f"{spec.name}.clone(), or a view that starts on a {BUFFER_ALIGN}-byte boundary")

    def _window_error(self, w: WindowView, tensor: Any) -> ArgumentError:
        what = f"the contents of window `{w.name}`"
        declared = describe(w.dtype, w.shape)
        if not all(hasattr(tensor, a) for a in ("data_ptr", "dtype", "device", "numel",
                                                 "is_contiguous", "element_size")):
            return self._fail(f"{what} must be a torch.Tensor ({declared}), not "
                              f"{type(tensor).__name__}")
        device = tensor.device
        if device.type != self.device_type or device.index != self.device_index:
            return self._fail(f"{what} are on {device}, the communicator's device is "
                              f"{self.device_text}: move them with .to({self.device_text!r})")
        if not tensor.is_contiguous():
            return self._fail(f"{what} are not contiguous: pass {w.name}.contiguous()")
        shape = list(getattr(tensor, "shape", ()))
        if w.dtype == "u8":
            return self._fail(f"{what} are {tensor.numel() * tensor.element_size()} bytes "
                              f"({dtype_name(tensor.dtype)}{shape}), the window holds "
                              f"{w.nbytes} ({declared})")
        return self._fail(f"{what} are {dtype_name(tensor.dtype)}{shape}, the window is "
                          f"{declared} (torch.{w.torch_dtype})")


__all__ = ["BufferBinder", "dtype_name"]
