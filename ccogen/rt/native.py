"""The one way into the native runtime extension `ccogen._ccogen_rt` (runtime/src).

Every other module gets the extension from `load()`, which says how to build it when it is
missing.  The extension loads the CUDA driver (libcuda.so.1) lazily, so importing it never
needs a GPU.  The driver queries below raise `GpuUnavailable` with a message that says why
(no driver, no device, extension not built); `driver_available()` never raises.  The rest
of the extension (Context, Module, Function, Stream, Event, HostMapped, launch, graphs) is
used through `load()` by the runtime (ccogen.rt.session, ccogen.rt.launch,
ccogen.bench.worker); its types are in ccogen/_ccogen_rt.pyi.
"""

from __future__ import annotations

from types import ModuleType

from ccogen.errors import NoGpuError

__all__ = [
    "GpuUnavailable",
    "compute_capability",
    "device_count",
    "device_name",
    "driver_available",
    "driver_version",
    "is_cuda_error",
    "load",
]


class GpuUnavailable(NoGpuError):
    """No usable NVIDIA GPU: the driver, a device or the native extension is missing."""


def load() -> ModuleType:
    """The native extension; `GpuUnavailable` (with the fix) when it was never built."""
    try:
        from ccogen import _ccogen_rt
    except ImportError as exc:  # a source tree that was never built
        raise GpuUnavailable(
            f"ccogen's native runtime (ccogen._ccogen_rt) is not built: {exc}; "
            "install ccogen with `python -m pip install -e .` to build it"
        ) from exc
    return _ccogen_rt


def is_cuda_error(exc: BaseException) -> bool:
    """True for the extension's CudaError / CudaUnavailable (False when it is missing)."""
    try:
        rt = load()
    except GpuUnavailable:
        return False
    return isinstance(exc, rt.CudaError | rt.CudaUnavailable)


def driver_available() -> bool:
    """True when the CUDA driver loads and initialises; never raises."""
    try:
        return bool(load().driver_available())
    except GpuUnavailable:
        return False


def driver_version() -> int:
    """The CUDA driver version as an int (e.g. 13000 for CUDA 13.0)."""
    rt = load()
    try:
        return int(rt.driver_version())
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def device_count() -> int:
    """Number of CUDA devices; 0 when the driver is present but reports none."""
    rt = load()
    try:
        return int(rt.device_count())
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def device_name(ordinal: int) -> str:
    """Name of CUDA device `ordinal` (IndexError when out of range)."""
    rt = load()
    try:
        return str(rt.device_name(ordinal))
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc


def compute_capability(ordinal: int) -> tuple[int, int]:
    """(major, minor) compute capability of CUDA device `ordinal`."""
    rt = load()
    try:
        major, minor = rt.compute_capability(ordinal)
    except rt.CudaUnavailable as exc:
        raise GpuUnavailable(str(exc)) from exc
    return int(major), int(minor)
