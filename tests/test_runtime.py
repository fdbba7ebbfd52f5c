"""The native runtime extension: builds, imports without a GPU, and finds GPUs where present."""

from __future__ import annotations

import importlib

import pytest

from ccogen import runtime


def test_extension_imports() -> None:
    rt = importlib.import_module("ccogen._ccogen_rt")
    assert issubclass(rt.CudaUnavailable, RuntimeError)
    assert issubclass(rt.CudaError, RuntimeError)
    for name in ("driver_available", "driver_version", "device_count", "device_name"):
        assert callable(getattr(rt, name))


def test_driver_available_never_raises() -> None:
    assert isinstance(runtime.driver_available(), bool)


def test_without_driver_calls_raise_gpu_unavailable() -> None:
    if runtime.driver_available():
        pytest.skip("a CUDA driver is usable here; this test covers machines without one")
    with pytest.raises(runtime.GpuUnavailable) as info:
        runtime.device_count()
    message = str(info.value)
    assert "no CUDA driver found (libcuda.so.1)" in message or "cuInit" in message
    assert "NVIDIA" in message


def test_missing_library_message(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A subprocess pointed at a library that does not exist gets the clear message."""
    import subprocess
    import sys

    missing = tmp_path / "libcuda.so.1"
    code = (
        "from ccogen import runtime\n"
        "assert runtime.driver_available() is False\n"
        "try:\n"
        "    runtime.device_count()\n"
        "except runtime.GpuUnavailable as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('device_count did not raise')\n"
    )
    monkeypatch.setenv("CCOGEN_LIBCUDA", str(missing))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert f"no CUDA driver found ({missing})" in out
    assert "this machine has no NVIDIA GPU or driver" in out


@pytest.mark.gpu
def test_gpu_present() -> None:
    assert runtime.driver_available()
    assert runtime.device_count() >= 1
    assert runtime.driver_version() >= 12000
    assert runtime.device_name(0)
    with pytest.raises(IndexError):
        runtime.device_name(runtime.device_count())
