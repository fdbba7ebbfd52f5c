"""ccogen.torch: call ccogen protocols on PyTorch tensors (optional: `pip install
'ccogen[torch]'`).  `import ccogen` never imports torch; this package imports it only
when one of its torch-facing names is used.

    import ccogen.torch as cct
    comm = cct.Communicator(target="nvshmem")      # after dist.init_process_group()
    op = comm.load("alltoall.cco", block=4096)
    op.windows["send"].copy_(x)
    recv = op()                                    # launched on the current stream

`Communicator`, `Op`: need torch.  `ArgumentError`, `DeviceError`: importable without it.
The guide: docs/torch.md.
"""

from __future__ import annotations

from typing import Any

from ccogen.torch.errors import ArgumentError, DeviceError

_TORCH_NAMES = {"Communicator": "ccogen.torch.comm", "Op": "ccogen.torch.op"}


def __getattr__(name: str) -> Any:
    module = _TORCH_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'ccogen.torch' has no attribute {name!r}")
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"ccogen.torch.{name} needs PyTorch, which is not installed "
                          f"({exc}); install it with `pip install 'ccogen[torch]'`") from None
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["ArgumentError", "Communicator", "DeviceError", "Op"]
