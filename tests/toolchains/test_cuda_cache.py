"""The nccl-cft and nvshmem sm_100 builds (ccogen.toolchains.cuda) go through the build
cache: its key changes with the source, a flag or the compiler, and one build serves two
directories holding the same source.  No toolchain: a fake nvcc (a shell script) that
counts its runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.errors import CompileError
from ccogen.toolchains.cuda import build_key, cached_nvcc_run

FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake nvcc, release 13.3"; exit 0; fi
echo run >> "{runs}"
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  if [ "$a" = "-DFAIL" ]; then echo "kernels.cu(1): error: asked to fail" >&2; exit 1; fi
  prev="$a"
done
echo "fabric.put // $*" > kernels.ptx
echo "ptxas warning : fake" >&2
echo "cubin of $*" > "$out"
"""


@pytest.fixture
def nvcc(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "nvcc"
    path.parent.mkdir()
    path.write_text(FAKE_NVCC.format(runs=tmp_path / "runs"))
    path.chmod(0o755)
    return path


def _source(directory: Path, text: str = "__global__ void k() {}\n") -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "kernels.cu").write_text(text)
    return directory / "kernels.cu"


def _runs(nvcc: Path) -> int:
    runs = nvcc.parent.parent / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_the_key_changes_with_the_source_a_flag_the_tag_and_the_library(
        tmp_path: Path, nvcc: Path) -> None:
    source = _source(tmp_path / "a")
    command = [nvcc, "-cubin", "-arch=sm_100", "kernels.cu", "-o", "kernels.cubin"]
    key = build_key("t", source, [command], nvcc, "lib 1")
    assert build_key("t", _source(tmp_path / "b"), [command], nvcc, "lib 1") == key
    assert build_key("t", source, [[*command, "-DCCOGEN_DEBUG=1"]], nvcc, "lib 1") != key
    assert build_key("t", source, [command, command], nvcc, "lib 1") != key
    assert build_key("u", source, [command], nvcc, "lib 1") != key
    assert build_key("t", source, [command], nvcc, "lib 2") != key
    assert build_key("t", _source(tmp_path / "c", "__global__ void j() {}\n"), [command],
                     nvcc, "lib 1") != key


def test_a_local_header_is_part_of_the_key(tmp_path: Path, nvcc: Path) -> None:
    source = _source(tmp_path / "a", '#include "ccogen_device.cuh"\n')
    (tmp_path / "a" / "ccogen_device.cuh").write_text("// one\n")
    command = [nvcc, "-cubin", "kernels.cu", "-o", "kernels.cubin"]
    key = build_key("t", source, [command], nvcc, "lib")
    (tmp_path / "a" / "ccogen_device.cuh").write_text("// two\n")
    assert build_key("t", source, [command], nvcc, "lib") != key


def test_one_build_serves_two_directories_and_a_new_flag_rebuilds(
        tmp_path: Path, nvcc: Path, cache_dir: Path) -> None:
    command = [nvcc, "-cubin", "-arch=sm_100", "kernels.cu", "-o", "kernels.cubin"]
    for name in ("a", "b"):
        _source(tmp_path / name)
        ptx, log = cached_nvcc_run("t", tmp_path / name, [command], nvcc, "lib")
        assert ptx.startswith("fabric.put") and log == "ptxas warning : fake"  # cached too
        assert (tmp_path / name / "kernels.cubin").read_text().startswith("cubin of -cubin")
    assert _runs(nvcc) == 1
    ptx_a, ptx_b = (tmp_path / d / "kernels.ptx" for d in "ab")
    assert ptx_a.read_bytes() == ptx_b.read_bytes()
    cached_nvcc_run("t", tmp_path / "a", [[*command, "-lineinfo"]], nvcc, "lib")
    assert _runs(nvcc) == 2
    assert "-lineinfo" in (tmp_path / "a" / "kernels.cubin").read_text()


def test_a_failing_compile_is_not_cached(tmp_path: Path, nvcc: Path, cache_dir: Path) -> None:
    """Each build of a failing source runs the compiler and shows its log."""
    command = [nvcc, "-cubin", "-DFAIL", "kernels.cu", "-o", "kernels.cubin"]
    _source(tmp_path / "a")
    for expected in (1, 2):
        with pytest.raises(CompileError, match="asked to fail"):
            cached_nvcc_run("t", tmp_path / "a", [command], nvcc, "lib")
        assert _runs(nvcc) == expected
