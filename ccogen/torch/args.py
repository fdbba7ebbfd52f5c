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

A protocol with a per-call count (ccogen.torch.batch) takes its row-batched buffers with
any whole number of rows up to the capacity (`x[:n]`): the count is their rows, which
must agree, and the binder hands the count buffer a tensor holding it (`count_of(n)`);
or the count is given (`ntok=` an int or a one-element int32 tensor on the device) with
every row-batched buffer whole.  The count's errors carry a code (`TB001`...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ccogen.manifest import BufferSpec
from ccogen.targets.base import BUFFER_ALIGN
from ccogen.torch.errors import ArgumentError
from ccogen.torch.spec import TORCH_DTYPES, OpSpec, WindowView, describe

_DTYPE_NAMES: dict[Any, str] = {}
_ABSENT = object()  # no count given


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

    def __init__(self, spec: OpSpec, device_type: str, device_index: int | None,
                 count_of: Callable[[int], Any] | None = None) -> None:
        """`count_of(n)`: a tensor holding the count `n` for the count buffer (batched
        protocols: ccogen.torch.batch; the Op's table of counts on the device)."""
        self.spec = spec
        self.device_type = device_type
        self.device_index = device_index
        batch = spec.batch
        self._batch = batch
        self._count_of = count_of
        count = None if batch is None else batch.count
        # the buffers a call must pass (the count is optional), and for each its dtype,
        # its declared elements and its row (elements; 0: not row-batched)
        self.buffers = tuple(b for b in spec.buffers if b.name != count)
        self.names = tuple(b.name for b in self.buffers)
        rows = {} if batch is None else {r.name: r.row for r in batch.rows}
        self._expected = tuple((TORCH_DTYPES[b.dtype], _count(b.shape), rows.get(b.name, 0))
                               for b in self.buffers)
        self._count_at = next((i for i, b in enumerate(spec.buffers) if b.name == count), -1)
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
        count_arg: Any = _ABSENT
        if self._batch is not None and self._batch.count in given:
            given = dict(given)
            count_arg = given.pop(self._batch.count)
        if len(given) != len(self.names) or any(n not in given for n in self.names):
            extra = {k: v for k, v in given.items() if k not in self.names}
            if any(k not in self._windows for k in extra) or len(given) - len(extra) != len(
                    self.names):
                raise self._names_error(given)
            inputs = tuple(self._window_input(name, t) for name, t in extra.items())
            given = {k: v for k, v in given.items() if k in self.names}
        tensors = tuple(given[n] for n in self.names)
        for tensor, spec, (dtype, count, row) in zip(tensors, self.buffers, self._expected,
                                                     strict=True):
            try:
                numel = tensor.numel()
                ok = (self._in_place(tensor) and dtype_name(tensor.dtype) == dtype
                      and (numel == count if row == 0 else numel % row == 0))
            except AttributeError:
                ok = False
            if not ok:
                raise self._tensor_error(spec, tensor, row)
        if self._batch is not None:
            full = list(tensors)
            full.insert(self._count_at, self._count(tensors, count_arg))
            tensors = tuple(full)
        if not pointers:
            return tensors, (), inputs
        addresses = tuple(int(t.data_ptr()) for t in tensors)
        for tensor, spec, address in zip(tensors, self.spec.buffers, addresses, strict=True):
            if address % BUFFER_ALIGN:
                raise self._alignment_error(spec, tensor, address)
        return tensors, addresses, inputs

    def _count(self, tensors: tuple[Any, ...], given: Any) -> Any:
        """The tensor for the count buffer: the one given (`ntok=`, with full-capacity
        tensors), else the count of rows of the row-batched tensors (which must agree)."""
        batch = self._batch
        assert batch is not None and self._count_of is not None
        rows = [(spec.name, tensor.numel() // row)
                for tensor, spec, (_, _, row) in zip(tensors, self.buffers, self._expected,
                                                     strict=True) if row]
        if given is not _ABSENT:
            for name, n in rows:
                if n != batch.cap:
                    raise self._fail(
                        f"buffer `{name}` has {n} rows, but the count `{batch.count}` is "
                        f"given: with `{batch.count}=` every row-batched buffer is passed "
                        f"whole ({batch.param}={batch.cap} rows) and the kernels read the "
                        f"count on the device; pass `{name}` whole, or leave out "
                        f"`{batch.count}` to take the count from the rows", "TB003")
            if isinstance(given, int) and not isinstance(given, bool):
                if not 0 <= given <= batch.cap:
                    raise self._fail(f"the count `{batch.count}={given}` is outside 0..."
                                     f"{batch.param}={batch.cap}", "TB002")
                return self._count_of(given)
            return self._count_tensor(given)
        if not rows:
            raise self._fail(f"protocol `{self.spec.protocol}` has no row-batched buffer to "
                             f"take the count from: pass `{batch.count}=` (an int, or a "
                             f"one-element int32 tensor on the device)", "TB004")
        first, n = rows[0]
        for name, other in rows[1:]:
            if other != n:
                raise self._fail(
                    f"row-batched buffers disagree on the count: `{first}` has {n} rows, "
                    f"`{name}` has {other}; pass the same number of rows (tokens) of every "
                    f"one of {', '.join(f'`{r}`' for r, _ in rows)}", "TB001")
        if n > batch.cap:
            raise self._fail(f"buffer `{first}` has {n} rows, more than the capacity "
                             f"{batch.param}={batch.cap} it was loaded with; load with a "
                             f"larger `{batch.param}`, or split the batch", "TB002")
        return self._count_of(n)

    def _count_tensor(self, tensor: Any) -> Any:
        batch = self._batch
        assert batch is not None
        try:
            ok = (self._in_place(tensor) and dtype_name(tensor.dtype) == "int32"
                  and tensor.numel() == 1)
        except AttributeError:
            ok = False
        if not ok:
            what = (f"{dtype_name(getattr(tensor, 'dtype', '?'))}"
                    f"{list(getattr(tensor, 'shape', ()))} on {getattr(tensor, 'device', '?')}"
                    if hasattr(tensor, "numel") else type(tensor).__name__)
            raise self._fail(f"the count `{batch.count}` is an int or a one-element "
                             f"contiguous int32 tensor on {self.device_text} (the kernels read "
                             f"it on the device), not {what}", "TB005")
        return tensor

    def _in_place(self, tensor: Any) -> bool:
        """On this op's device and contiguous (AttributeError: not a tensor)."""
        device = tensor.device
        return (device.type == self.device_type and device.index == self.device_index
                and tensor.is_contiguous())

    def _window_input(self, name: str, tensor: Any) -> tuple[int, Any]:
        index, w = self._windows[name]
        try:
            same_place = self._in_place(tensor)
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
    def _fail(self, text: str, code: str | None = None) -> ArgumentError:
        tag = f"[{code}] " if code else ""
        return ArgumentError(f"{self.spec.label}: {tag}{text}; nothing was launched", code)

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

    def _tensor_error(self, spec: BufferSpec, tensor: Any, row: int = 0) -> ArgumentError:
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
        if row and tensor.numel() % row:
            shape = list(getattr(tensor, "shape", ()))
            batch = self._batch
            assert batch is not None
            return self._fail(f"{what} has {tensor.numel()} elements (shape {shape}), not a "
                              f"whole number of rows of {row} ({declared}: {batch.param} "
                              f"rows of {row}); pass its first n rows, `{spec.name}[:n]`",
                              "TB006")
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
