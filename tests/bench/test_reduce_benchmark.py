"""benchmarks/reduce: the local-reduce micro-benchmark's protocol, runner and timing
program (the GPU run itself is manual: benchmarks/reduce/README.md)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ccogen.cli.main import main as ccogen

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "reduce"


def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reduce_run", HERE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("k", [2, 4, 8])
def test_the_protocol_checks_and_simulates(k: int) -> None:
    path = str(HERE / "local_reduce.cco")
    assert ccogen(["lint", path, "--ranks", "1", "--param", f"k={k}"]) == 0
    assert ccogen(["simulate", path, "--ranks", "1", "--param", "n=512", "--param", f"k={k}",
                   "--param", "ctas=4", "--seeds", "3"]) == 0


def test_bandwidth_counts_bytes_read_and_written() -> None:
    run = runner()
    row = {"bytes": 3 * 64 * 2**20, "ms": 0.05}
    assert run.gbps(row) == pytest.approx(3 * 64 * 2**20 / 50e-6 / 1e9)
    text = run.table([{"k": 2, "name": "copy", "grid": 0, "block": 0, "ms": 0.1, "gbps": 4000.0,
                       "of_copy": 1.0, "mismatches": 0},
                      {"k": 2, "name": "hand", "grid": 132, "block": 512, "ms": 0.05,
                       "gbps": 3800.0, "of_copy": 0.95, "mismatches": 0}])
    assert "| 2 | hand | 132 x 512 | 50.0 | 3800 | 95.0 % | 0 |" in text
    assert "| 2 | copy | - | 100.0 | 4000 | 100.0 % | 0 |" in text


def test_the_generated_kernel_or_the_reason_it_is_missing(tmp_path: Path) -> None:
    from ccogen.errors import ToolchainError

    run = runner()
    try:
        got = run.generate(4, 1 << 16, 8, "sm_90", tmp_path)
    except ToolchainError as exc:  # generated, but nvcc or the NVSHMEM headers are absent
        pytest.skip(str(exc))
    if isinstance(got, str):
        assert got.startswith("not generated: E042") and "not implemented yet" in got
    else:
        assert got.cubin.is_file() and got.grid == 8 and got.block == 512
        assert {"buffer:src", "buffer:dst"} <= set(got.params)


@pytest.mark.toolchain
def test_the_timing_program_compiles(tmp_path: Path) -> None:
    from ccogen.errors import ToolchainError
    from ccogen.toolchains.libraries import find_nvcc

    try:
        nvcc = find_nvcc()
    except ToolchainError as exc:
        pytest.skip(str(exc))
    done = subprocess.run([str(nvcc), "-std=c++17", "-O3", "-arch=sm_90", "-c", "-Werror",
                           "all-warnings", "-o", str(tmp_path / "reduce_bench.o"),
                           str(HERE / "reduce_bench.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
