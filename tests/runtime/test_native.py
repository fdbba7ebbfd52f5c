"""The native runtime extension: builds, imports without a GPU, and finds GPUs where present."""

from __future__ import annotations

import importlib

import pytest

from ccogen.rt import native


def test_extension_imports() -> None:
    rt = importlib.import_module("ccogen._ccogen_rt")
    assert issubclass(rt.CudaUnavailable, RuntimeError)
    assert issubclass(rt.CudaError, RuntimeError)
    for name in ("driver_available", "driver_version", "device_count", "device_name"):
        assert callable(getattr(rt, name))


def test_driver_available_never_raises() -> None:
    assert isinstance(native.driver_available(), bool)


def test_without_driver_calls_raise_gpu_unavailable() -> None:
    if native.driver_available():
        pytest.skip("a CUDA driver is usable here; this test covers machines without one")
    with pytest.raises(native.GpuUnavailable) as info:
        native.device_count()
    message = str(info.value)
    assert "no CUDA driver found (libcuda.so.1)" in message or "cuInit" in message
    assert "NVIDIA" in message


def test_missing_library_message(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A subprocess pointed at a library that does not exist gets the clear message."""
    import subprocess
    import sys

    missing = tmp_path / "libcuda.so.1"
    code = (
        "from ccogen.rt import native\n"
        "assert native.driver_available() is False\n"
        "try:\n"
        "    native.device_count()\n"
        "except native.GpuUnavailable as exc:\n"
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
    assert native.driver_available()
    assert native.device_count() >= 1
    assert native.driver_version() >= 12000
    assert native.device_name(0)
    with pytest.raises(IndexError):
        native.device_name(native.device_count())


def test_load_is_the_extension() -> None:
    assert native.load() is importlib.import_module("ccogen._ccogen_rt")


def test_a_missing_extension_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import ccogen

    monkeypatch.delattr(ccogen, "_ccogen_rt", raising=False)
    monkeypatch.setitem(sys.modules, "ccogen._ccogen_rt", None)  # `import` now fails
    with pytest.raises(native.GpuUnavailable, match=r"ccogen\._ccogen_rt\) is not built: .*"
                       r"python -m pip install -e \."):
        native.load()
    assert native.driver_available() is False
    assert native.is_cuda_error(RuntimeError("x")) is False


def test_gpu_unavailable_is_a_set_up_error() -> None:
    """The CLI prints a RunError as one `error:` line (exit 2), never a traceback."""
    from ccogen.errors import NoGpuError, RunError

    assert issubclass(native.GpuUnavailable, NoGpuError)
    assert issubclass(native.GpuUnavailable, RunError)


def test_is_cuda_error() -> None:
    rt = native.load()
    assert native.is_cuda_error(rt.CudaError("cuInit: CUDA_ERROR_NO_DEVICE"))
    assert native.is_cuda_error(rt.CudaUnavailable("no CUDA driver found"))
    assert not native.is_cuda_error(RuntimeError("cuInit"))


def test_only_native_imports_the_extension() -> None:
    """One way in: every other module gets the extension from `native.load()`."""
    import ast
    from pathlib import Path

    import ccogen

    package = Path(ccogen.__file__).parent
    importers = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.endswith("ccogen._ccogen_rt") else []
            if any(n.endswith("_ccogen_rt") for n in names):
                importers.append(str(path.relative_to(package)))
    assert sorted(set(importers)) == ["rt/native.py"]
