"""Thin facade over the native runtime extension `ccogen._ccogen_rt`.

The extension loads the CUDA driver (libcuda.so.1) lazily, so importing ccogen never needs a
GPU.  Every function here that needs the driver raises `GpuUnavailable` with a message that
says why (no driver, no device, extension not built); `driver_available()` never raises.

Building, launching and checking generated code lives in `ccogen.rt` (which uses the
extension's Context / Module / Function / Stream / Event / HostMapped / launch directly).
"""

from __future__ import annotations

from types import ModuleType

__all__ = [
    "GpuUnavailable",
    "compute_capability",
    "device_count",
    "device_name",
    "driver_available",
    "driver_version",
]


class GpuUnavailable(RuntimeError):
    """No usable NVIDIA GPU: the driver, a device or the native extension is missing."""


def _native() -> ModuleType:
    try:
        from ccogen import _ccogen_rt
    except ImportError as exc:  # pragma: no cover - only in a source tree that was never built
        raise GpuUnavailable(
            f"ccogen's native runtime (ccogen._ccogen_rt) is not built: {exc}; "
            "install ccogen with `python -m pip install -e .` to build it"
        ) from exc
    return _ccogen_rt


def driver_available() -> bool:
    """True when the CUDA driver loads and initialises; never raises."""
    try:
        return bool(_native().driver_available())
    except GpuUnavailable:
        return False


def driver_version() -> int:
    """The CUDA driver version as an int (e.g. 13000 for CUDA 13.0)."""
    rt = _native()
    try:
        return int(rt.driver_version())
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def device_count() -> int:
    """Number of CUDA devices; 0 when the driver is present but reports none."""
    rt = _native()
    try:
        return int(rt.device_count())
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def device_name(ordinal: int) -> str:
    """Name of CUDA device `ordinal` (IndexError when out of range)."""
    rt = _native()
    try:
        return str(rt.device_name(ordinal))
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def compute_capability(ordinal: int) -> tuple[int, int]:
    """(major, minor) compute capability of CUDA device `ordinal`."""
    rt = _native()
    try:
        major, minor = rt.compute_capability(ordinal)
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc
    return int(major), int(minor)
