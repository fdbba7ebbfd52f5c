"""Errors of the runtime: each one is a user-facing message, printed without a traceback.

`RunError` is the base; the CLI prints `error: <message>` and exits 2 for set-up problems
(no GPU, too few GPUs, missing or too old library, compile failure) and 1 when the protocol
ran but an `ensure` failed or a wait timed out (those are results, not exceptions: see
`RunReport`).
"""

from __future__ import annotations


class RunError(Exception):
    """Something prevented building or running; the message says what and how to fix it."""


class NoGpuError(RunError):
    """No usable NVIDIA GPU (no driver, no device)."""


class NotEnoughGpusError(RunError):
    """The protocol needs more GPUs than this machine has."""


class ToolchainError(RunError):
    """nvcc, or the NCCL / NVSHMEM headers and libraries, are missing or unusable."""


class LibraryVersionError(ToolchainError):
    """The NCCL / NVSHMEM found is too old, or headers and library disagree."""


class CompileError(RunError):
    """nvcc failed; the message carries the log, the file and the protocol line."""

    def __init__(self, message: str, log: str = "", source: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.source = source


class ManifestError(RunError):
    """manifest.json is missing, malformed or inconsistent with docs/runtime-abi.md."""


class EngineError(RunError):
    """The engine (NCCL / NVSHMEM) failed to bootstrap, allocate or synchronize."""


__all__ = [
    "CompileError",
    "EngineError",
    "LibraryVersionError",
    "ManifestError",
    "NoGpuError",
    "NotEnoughGpusError",
    "RunError",
    "ToolchainError",
]
