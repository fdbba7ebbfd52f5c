"""A loaded protocol, callable from PyTorch: `op(**arguments)` launches it on the current
stream and returns its output windows.

Arguments are the protocol's `buffer`s (ordinary tensors, passed by pointer) and,
optionally, new contents for windows (`op(send=x)` copies `x` into the window `send` on
the stream before the launch).  Eager calls check the arguments (ccogen.torch.args) and
issue the prepared launches directly — no dispatcher, no allocation, no host
synchronisation — and return the output windows themselves (views of the heap).

Inside `torch.compile` the call becomes the custom op `ccogen::call`
(ccogen.torch.library): a function of its tensor arguments that returns copies of the
output windows, so the compiler sees no aliasing of the heap and orders the launch by its
data flow.  Pass window contents as arguments there and use the returned tensors: a write
into `op.windows[...]` inside a compiled region is not ordered with the launch.

A protocol with a per-call count (`buffer ntok: i32[1]` bounded in `require` by a
parameter, the capacity: ccogen.torch.batch) takes its row-batched buffers sliced,
`op(x=x[:n], ...)`: the count is their rows, passed to the kernels as a pointer into a
table of counts the op keeps on the device (row n holds n), so a call writes nothing and
synchronises nothing.  `op(x=x_full, ..., ntok=count)`, with a one-element int32 device
tensor, passes the caller's count instead (the tensors whole): a CUDA graph captured so
moves, at each replay, the rows the count tensor says then.

Protocols whose manifest says `between_launches: host_sync` (they declare it, or their
manifest predates the field: their back-to-back safety is not proven; no library protocol
since issue 30) are preceded by a device-side barrier of all ranks on
the same stream, so a rank starts launch N+1 only once every rank's stream is done with
launch N and with what its caller did after it; a CUDA-graph capture records it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ccogen.torch.args import BufferBinder
from ccogen.torch.library import call_op

if TYPE_CHECKING:
    from ccogen.torch.comm import Communicator
    from ccogen.torch.device import Placed
    from ccogen.torch.spec import OpSpec

# a row of the table of counts: 16 bytes, so that every row starts where a buffer may
# (targets.base.BUFFER_ALIGN)
_COUNT_STRIDE = 4

_is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling",
                                            lambda: False)


class Op:
    """One protocol placed on a communicator (see the module docstring).

    `windows`: name -> tensor view of this rank's symmetric heap (dtype and shape of the
    window); `outputs`: the names of the windows the protocol writes, which a call returns
    (the tensor itself when there is one, else a tuple in declaration order);
    `buffers`: the names of the buffers a call takes; `batch`: the protocol's per-call
    count and its row-batched buffers (ccogen.torch.batch), None without one.
    """

    def __init__(self, comm: Communicator, spec: OpSpec, placed: Placed, handle: int,
                 before: Sequence[Any]) -> None:
        self.comm = comm
        self.spec = spec
        self.name = spec.protocol
        self.placed = placed
        self.handle = handle
        heap = comm._heap_tensor(placed)
        self.windows: dict[str, torch.Tensor] = {
            w.name: heap[w.offset:w.offset + w.nbytes].view(getattr(torch, w.torch_dtype))
                    .view(w.shape)
            for w in spec.windows}
        self.outputs = tuple(w.name for w in spec.outputs)
        self._output_index = [i for i, w in enumerate(spec.windows) if w.output]
        outs = tuple(self.windows[n] for n in self.outputs)
        self._result: Any = outs[0] if len(outs) == 1 else outs
        self.buffers = tuple(b.name for b in spec.buffers)
        self.batch = spec.batch
        self._counts: torch.Tensor | None = None
        self._count_rows: tuple[torch.Tensor, ...] = ()
        if spec.batch is not None:  # row n holds n: the count buffer of a call of n rows
            cap = spec.batch.cap
            self._counts = torch.arange(cap + 1, dtype=torch.int32, device=comm.device
                                        ).repeat_interleave(_COUNT_STRIDE).view(cap + 1, -1)
            self._count_rows = self._counts.unbind(0)  # eager calls: no indexing per call
        self._binder = BufferBinder(spec, comm.device.type, comm.device.index, self._count_row)
        self._flat = [self.windows[w.name].view(-1) for w in spec.windows]
        self._before = tuple(before)
        self._launches = tuple((placed.launches[i], k.buffers)
                               for i, k in enumerate(spec.kernels))
        self._debug = placed.record is not None
        self._written = tuple(i for i, b in enumerate(spec.buffers) if b.access != "read")

    def _count_row(self, n: int) -> torch.Tensor:
        """The table's row holding `n` (traced: indexed, `n` may be a symbolic size)."""
        assert self._counts is not None
        return self._counts[n] if _is_compiling() else self._count_rows[n]

    def __repr__(self) -> str:
        return f"<ccogen.torch.Op {self.spec.label} ({self.spec.target})>"

    # -- calls -------------------------------------------------------------------------------
    def __call__(self, **arguments: torch.Tensor) -> Any:
        """Launch on the current stream; returns the output windows (class docstring)."""
        if _is_compiling():
            return self._traced(arguments)
        if not arguments and not self.buffers:
            self._launch(self.comm._stream(), ())
            return self._result
        _, pointers, inputs = self._binder.bind(arguments)
        for index, tensor in inputs:
            self._fill(index, tensor)
        self._launch(self.comm._stream(), pointers)
        return self._result

    def _fill(self, index: int, tensor: torch.Tensor) -> None:
        flat = self._flat[index]
        source = tensor.reshape(-1)
        if source.dtype != flat.dtype:  # a byte window: any dtype of its size
            source = source.view(flat.dtype)
        flat.copy_(source)

    def _launch(self, stream: int, pointers: Sequence[int]) -> None:
        if self._debug:
            self.comm.raise_device_errors()
        try:
            for launch in self._before:
                launch.launch(stream)
            for launch, which in self._launches:
                launch.launch(stream, [pointers[i] for i in which] if which else ())
        except Exception as exc:
            if self.comm._engine.is_cuda_error(exc):
                raise self.comm._device_error(self, str(exc)) from None
            raise

    def _traced(self, arguments: dict[str, torch.Tensor]) -> Any:
        """Under torch.compile: check the arguments on their metadata, record ccogen::call."""
        tensors, _, inputs = self._binder.bind(arguments, pointers=False)
        outs = call_op(self.handle, [i for i, _ in inputs], [t for _, t in inputs],
                       list(tensors))
        windows = len(self._output_index)
        for i, new in zip(self._written, outs[windows:], strict=True):
            tensors[i].copy_(new.view(tensors[i].shape))
        outs = outs[:windows]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run_functional(self, indices: Sequence[int], inputs: Sequence[torch.Tensor],
                        buffers: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The body of ccogen::call: fill the windows, launch with copies of the written
        buffers, return copies of the output windows and the written buffers' copies."""
        for index, tensor in zip(indices, inputs, strict=True):
            self._fill(index, tensor)
        given = list(buffers)
        written = [given[i].clone() for i in self._written]
        for i, copy in zip(self._written, written, strict=True):
            given[i] = copy
        self._launch(self.comm._stream(), [int(t.data_ptr()) for t in given])
        windows = [self.windows[self.spec.windows[i].name].clone() for i in self._output_index]
        return windows + written

    def _fake_outputs(self, buffers: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        windows = [torch.empty(self.spec.windows[i].shape,
                               dtype=getattr(torch, self.spec.windows[i].torch_dtype),
                               device=self.comm.device) for i in self._output_index]
        return windows + [torch.empty_like(buffers[i]) for i in self._written]


__all__ = ["Op"]
