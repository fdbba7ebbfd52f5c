"""The custom op `ccogen::call` through which torch.compile sees a protocol launch.

Schema: `call(int handle, int[] windows, Tensor[] contents, Tensor[] buffers) -> Tensor[]`:
`handle` names the loaded `Op` (a process-wide registry), `windows` / `contents` the
windows given new contents and those contents, `buffers` all of its buffers in order.  It
is a pure function: it returns copies of the output windows, then the new contents of
the buffers the protocol writes (the kernels write into copies; the caller copies them
back into the user's tensors), so the compiler never sees a tensor aliasing the
symmetric heap nor a mutation it would have to functionalise, and orders the launch by
its data flow.  The fake implementation returns empty tensors of those dtypes and shapes
(a graph is specialised on the handle: the shapes depend on the op).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ccogen.torch.op import Op

_OPS: dict[int, Op] = {}
_HANDLES = itertools.count(1)


def new_handle() -> int:
    """A process-unique handle for an Op (registered with `bind`)."""
    return next(_HANDLES)


def bind(handle: int, op: Op) -> None:
    _OPS[handle] = op


def unbind(handle: int) -> None:
    _OPS.pop(handle, None)


def _op(handle: int) -> Op:
    try:
        return _OPS[handle]
    except KeyError:
        raise RuntimeError(f"ccogen::call: no loaded protocol has handle {handle} (its "
                           "communicator was closed?)") from None


@torch.library.custom_op("ccogen::call", mutates_args=())
def call_op(handle: int, windows: list[int], contents: list[torch.Tensor],
            buffers: list[torch.Tensor]) -> list[torch.Tensor]:
    """Launch the protocol registered under `handle` on the current stream."""
    return _op(handle)._run_functional(windows, contents, buffers)


@call_op.register_fake
def _call_fake(handle: int, windows: list[int], contents: list[torch.Tensor],
               buffers: list[torch.Tensor]) -> list[torch.Tensor]:
    # the same compiled code called with another Op recompiles with `handle` symbolic
    # (torch.compile's automatic dynamic integers): int() specialises the graph on it
    return _op(int(handle))._fake_outputs(buffers)


__all__ = ["bind", "call_op", "new_handle", "unbind"]
