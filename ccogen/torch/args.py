"""Checking the buffers of an op call (no torch here: anything tensor-like is checked).

A call passes each `buffer` of the protocol by name as an ordinary tensor.  Every one is
checked before anything is launched — a tensor (has `data_ptr`), on the communicator's
device, of the declared dtype, with the declared number of elements (any shape: a
`bf16[4096 * 7168]` buffer takes a `[4096, 7168]` tensor), contiguous — and every problem
is an `ArgumentError` that says what was expected and how to fix it.  Windows are not
arguments: they live in the symmetric heap, and the message says so when one is passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccogen.rt.manifest import BufferSpec
from ccogen.torch.errors import ArgumentError
from ccogen.torch.spec import TORCH_DTYPES, OpSpec, describe

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
    """Checks the buffers of calls to one op on one device; `bind` returns them in the
    protocol's order and (for launches) their device pointers."""

    def __init__(self, spec: OpSpec, device_type: str, device_index: int | None) -> None:
        self.spec = spec
        self.device_type = device_type
        self.device_index = device_index
        self.buffers = spec.buffers
        self.names = tuple(b.name for b in spec.buffers)
        self._expected = tuple((TORCH_DTYPES[b.dtype], _count(b.shape)) for b in spec.buffers)

    @property
    def device_text(self) -> str:
        if self.device_index is None:
            return self.device_type
        return f"{self.device_type}:{self.device_index}"

    def bind(self, given: Mapping[str, Any], pointers: bool = True
             ) -> tuple[tuple[Any, ...], tuple[int, ...]]:
        """(tensors in buffer order, their data pointers — () unless `pointers`)."""
        if len(given) != len(self.names) or any(n not in given for n in self.names):
            raise self._names_error(given)
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
            return tensors, ()
        return tensors, tuple(int(t.data_ptr()) for t in tensors)

    # -- messages ----------------------------------------------------------------------------
    def _fail(self, text: str) -> ArgumentError:
        return ArgumentError(f"{self.spec.label}: {text}; nothing was launched")

    def _names_error(self, given: Mapping[str, Any]) -> ArgumentError:
        windows = {w.name for w in self.spec.windows}
        for name in given:
            if name in windows:
                return self._fail(
                    f"`{name}` is a window, not an argument: it lives in the symmetric heap; "
                    f"write into op.windows[{name!r}] (a tensor view of it) before the call")
            if name not in self.names:
                known = (f"its buffers are {', '.join(f'`{n}`' for n in self.names)}"
                         if self.names else "it takes no buffers")
                return self._fail(f"no buffer `{name}` in protocol `{self.spec.protocol}`; "
                                  f"{known}")
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


__all__ = ["BufferBinder", "dtype_name"]
