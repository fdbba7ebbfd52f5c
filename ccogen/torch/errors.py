"""The errors of the PyTorch binding; each message says what is wrong and what to do.

- `ArgumentError`: an op was called with arguments that do not fit the protocol (an unknown
  or missing buffer, a tensor on the wrong device, of the wrong dtype or size, not
  contiguous; row-batched tensors whose row counts disagree or exceed the capacity).
  Raised before anything is launched.
- `DeviceError`: the device reported a problem: a debug build's wait timed out (the
  protocol line, the rank and the values), a `require` does not hold on the device, a
  launch failed, or the kernels did not finish within the timeout of
  `Communicator.synchronize`.
"""

from __future__ import annotations

from ccogen.errors import RunError


class ArgumentError(RunError, ValueError):
    """The arguments of an op call do not fit its protocol; nothing was launched.

    `code` names the rule a call broke where it has one (the run-time count's, `TB001`...:
    docs/torch.md, "Run-time batch sizes"); None for the others."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class DeviceError(RunError):
    """The device reported a failure of a protocol's kernels (see the message)."""


__all__ = ["ArgumentError", "DeviceError"]
