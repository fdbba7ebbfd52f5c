"""A loaded protocol, callable from PyTorch: `op(**buffers)` launches it on the current
stream and returns its output windows.

Eager calls check the buffers (ccogen.torch.args) and issue the prepared launches
directly: no dispatcher, no allocation, no host synchronisation.  Inside `torch.compile`
the call becomes the custom op `ccogen::launch` (ccogen.torch.library), which declares the
windows and the written buffers as mutated, so the compiler orders every write into an
input window before the launch and every read of an output window after it.  Protocols
whose manifest says `between_launches: host_sync` (every v1 protocol: back-to-back safety
is not proven for them) are preceded by a device-side barrier of all ranks on the same
stream, so a rank starts launch N+1 only once every rank's stream is done with launch N
and what its caller did after it; graph capture records that barrier too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ccogen.torch.args import BufferBinder

if TYPE_CHECKING:
    from ccogen.torch.comm import Communicator
    from ccogen.torch.device import Placed
    from ccogen.torch.spec import OpSpec

_is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling",
                                            lambda: False)


class Op:
    """One protocol placed on a communicator (see the module docstring).

    `windows`: name -> tensor view of this rank's symmetric heap (dtype and shape of the
    window); `outputs`: the names of the windows the protocol writes, which a call returns
    (the tensor itself when there is one, else a tuple in declaration order);
    `buffers`: the names of the buffers a call takes.
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
        outs = tuple(self.windows[n] for n in self.outputs)
        self._result: Any = outs[0] if len(outs) == 1 else outs
        self.buffers = tuple(b.name for b in spec.buffers)
        self._binder = BufferBinder(spec, comm.device.type, comm.device.index)
        self._before = tuple(before)
        self._launches = tuple((placed.launches[i], k.buffers)
                               for i, k in enumerate(spec.kernels))
        self._debug = placed.record is not None
        self._read = tuple(i for i, b in enumerate(spec.buffers) if b.access == "read")
        self._written = tuple(i for i, b in enumerate(spec.buffers) if b.access != "read")

    def __repr__(self) -> str:
        return f"<ccogen.torch.Op {self.spec.label} ({self.spec.target})>"

    # -- calls -------------------------------------------------------------------------------
    def __call__(self, **buffers: torch.Tensor) -> Any:
        """Launch on the current stream; returns the output windows (class docstring)."""
        if _is_compiling():
            return self._traced(buffers)
        if buffers or self.buffers:
            _, pointers = self._binder.bind(buffers)
        else:
            pointers = ()
        self._launch(self.comm._stream(), pointers)
        return self._result

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

    def _traced(self, buffers: dict[str, torch.Tensor]) -> Any:
        """Under torch.compile: check the buffers on their metadata, record the custom op."""
        from ccogen.torch.library import launch_op

        tensors, _ = self._binder.bind(buffers, pointers=False)
        launch_op(self.handle, [self.windows[w.name] for w in self.spec.windows],
                  [tensors[i] for i in self._read], [tensors[i] for i in self._written])
        return self._result

    def _run_graph(self, windows: Sequence[torch.Tensor], read: Sequence[torch.Tensor],
                   written: Sequence[torch.Tensor]) -> None:
        """The custom op's body.  A window the compiler handed over as a copy (a
        functionalised graph that was not re-inplaced) is copied into the heap before the
        launch and, for outputs, back after it, so the result is the same either way."""
        copies = [(given, self.windows[w.name], w.output)
                  for given, w in zip(windows, self.spec.windows, strict=True)
                  if given.data_ptr() != self.windows[w.name].data_ptr()]
        for given, view, _ in copies:
            view.copy_(given)
        ordered: list[Any] = [None] * len(self.buffers)
        for i, t in zip(self._read, read, strict=True):
            ordered[i] = t
        for i, t in zip(self._written, written, strict=True):
            ordered[i] = t
        self._launch(self.comm._stream(), [int(t.data_ptr()) for t in ordered])
        for given, view, output in copies:
            if output:
                given.copy_(view)


__all__ = ["Op"]
