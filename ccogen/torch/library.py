"""The custom op `ccogen::launch` through which torch.compile sees a protocol launch.

Schema: `launch(int handle, Tensor(a!)[] windows, Tensor[] read, Tensor(b!)[] written)`:
`handle` names the loaded `Op` (a process-wide registry), `windows` are all of its
windows (declared mutated: peers and kernels write them), `read` / `written` its
buffers by access.  It returns nothing: the caller returns the mutated windows, so the
compiler orders everything around the launch by those mutations.  The fake (meta)
implementation does nothing, which is exactly the op's effect on shapes.
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


@torch.library.custom_op("ccogen::launch", mutates_args=("windows", "written"))
def launch_op(handle: int, windows: list[torch.Tensor], read: list[torch.Tensor],
              written: list[torch.Tensor]) -> None:
    """Launch the protocol registered under `handle` on the current stream."""
    try:
        op = _OPS[handle]
    except KeyError:
        raise RuntimeError(f"ccogen::launch: no loaded protocol has handle {handle} (its "
                           "communicator was closed?)") from None
    op._run_graph(windows, read, written)


@launch_op.register_fake
def _launch_fake(handle: int, windows: list[torch.Tensor], read: list[torch.Tensor],
                 written: list[torch.Tensor]) -> None:
    return None


__all__ = ["bind", "launch_op", "new_handle", "unbind"]
