"""The extension's CUDA-graph bindings (`begin_capture`, `end_capture`, `Graph`) against a
fake driver (tests/runtime/data/fake_libcuda, loaded through CCOGEN_LIBCUDA): what is
called, in which order, and how a failed instantiation is reported.  No GPU needed; needs
a C compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_child

DATA = Path(__file__).resolve().parent / "data" / "fake_libcuda"

SCRIPT = """
from ccogen import _ccogen_rt as rt
ctx = rt.Context(0)
stream = rt.Stream(True)
fn = rt.Module(b"image").function("k")
rt.launch(fn, 1, 32, 0, [], stream)                # runs
rt.begin_capture(stream)
rt.launch(fn, 1, 32, 0, [], stream)                # captured
rt.launch(fn, 2, 64, 0, [], stream, False)         # captured
graph = rt.end_capture(stream)
graph.launch(stream)
graph.launch(stream)
del graph
rt.begin_capture(stream)
try:
    rt.end_capture(stream)                         # an empty capture: instantiation fails
except rt.CudaError as exc:
    print("ERROR", exc)
"""


@pytest.fixture
def fake_driver(tmp_path: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the fake libcuda")
    lib = tmp_path / "libcuda_fake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(DATA / "fake_cuda.c")],
                   check=True)
    return lib


def test_capture_replay_and_errors(fake_driver: Path, tmp_path: Path) -> None:
    from ccogen import _ccogen_rt

    if not hasattr(_ccogen_rt, "begin_capture"):
        pytest.skip("the installed extension predates the graph bindings: rebuild it "
                    "(pip install --no-build-isolation --no-deps -e .)")
    log = tmp_path / "calls.log"
    env = {**os.environ, "CCOGEN_LIBCUDA": str(fake_driver), "FAKE_CUDA_LOG": str(log)}
    done = run_child([sys.executable, "-c", SCRIPT], cpu_s=60, env=env)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls == [
        "executed 1",
        "begin_capture mode 1",       # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        "captured 1", "captured 2",
        "end_capture 2",
        "graph_destroy 2",            # the graph goes once instantiated
        "graph_launch 2", "graph_launch 2",
        "exec_destroy 2",             # `del graph`
        "begin_capture mode 1", "end_capture 0", "graph_destroy 0",
    ]
    assert "ERROR cuGraphInstantiateWithFlags: CUDA_ERROR_INVALID_VALUE (fake)" in done.stdout
