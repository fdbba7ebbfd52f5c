"""Exceptions that cross module boundaries.

`DiagnosticError` carries user-facing diagnostics (the user's mistake);
`InternalError` is a bug in ccogen and is rendered with a request to report it.

`RunError` and its subclasses are what prevented building or running generated code
(the toolchains, the build cache, the manifest, the GPU runtime): each one is a
user-facing message, printed without a traceback.  The CLI prints `error: <message>` and
exits 2 for set-up problems (no GPU, too few GPUs, missing or too old library, compile
failure) and 1 when the protocol ran but an `ensure` failed or a wait timed out (those
are results, not exceptions: see `ccogen.rt.RunReport`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ccogen.diag import Diagnostic


class DiagnosticError(Exception):
    """Raised when user input cannot be processed further; carries the reasons."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(f"{d.code}: {d.message}" for d in self.diagnostics))


class InternalError(Exception):
    """An invariant of ccogen itself was broken: this is a bug in ccogen."""


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
