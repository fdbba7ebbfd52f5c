"""Cubin builds (`ccogen.toolchains.cubin`) and their cache (toolchain: nvcc + the engine
headers; no GPU)."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from ccogen.errors import CompileError, LibraryVersionError, ToolchainError
from ccogen.targets.libraries import NCCL, NVSHMEM
from ccogen.toolchains.cubin import (
    BuildOptions,
    build_cubin,
    build_manifest_dir,
    compile_flags,
    protocol_origin,
    rdc_mode,
)
from ccogen.toolchains.libraries import Library, find_library, library_spec
from tests.runtime.conftest import DATA, require_toolchain

TARGETS = {"nccl-lsa": "nccl_putsig", "nvshmem": "nvshmem_putsig"}


def _counting_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point CCOGEN_NVCC at a wrapper that logs every compile (not `--version`)."""
    from ccogen.toolchains.libraries import find_nvcc

    real = find_nvcc()
    log = tmp_path / "nvcc.log"
    wrapper = tmp_path / "nvcc"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo "$@" >> "{log}"\n'
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CCOGEN_NVCC", str(wrapper))
    return log


def _compiles(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.toolchain
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_builds_and_caches(target: str, cache_dir: Path, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    require_toolchain(target)
    log = _counting_nvcc(tmp_path, monkeypatch)
    cubin = build_cubin(DATA / TARGETS[target], target, "sm_90")
    assert cubin.is_file() and cubin.is_relative_to(cache_dir)
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    steps = 1 if target == "nccl-lsa" else 2  # nvshmem: -rdc -cubin, then -dlink -cubin
    assert _compiles(log) == steps
    assert build_cubin(DATA / TARGETS[target], target, "sm_90") == cubin
    assert _compiles(log) == steps, "the second build must compile nothing"
    if target == "nccl-lsa":  # a debug build is another entry (nvshmem: same path, slower)
        debug = build_cubin(DATA / TARGETS[target], target, "sm_90", debug=True)
        assert debug != cubin and _compiles(log) == 2 * steps
        assert "-DCCOGEN_DEBUG=1" in log.read_text()
    else:
        assert "libnvshmem_device.a" in log.read_text() and "-rdc=true" in log.read_text()


@pytest.mark.toolchain
def test_a_relocatable_cubin_links_to_the_bytes_an_object_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvshmem's relocatable code compiled straight to a cubin (the default, no host
    compilation) and through an object (`CCOGEN_NVCC_RDC=object`) link to one cubin."""
    require_toolchain("nvshmem")
    log = _counting_nvcc(tmp_path, monkeypatch)
    built: dict[str, bytes] = {}
    cache = tmp_path / "cache"  # one directory for both: each builds in the same place
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(cache))
    for mode in ("cubin", "object"):
        monkeypatch.setenv("CCOGEN_NVCC_RDC", mode)
        built[mode] = build_cubin(DATA / TARGETS["nvshmem"], "nvshmem", "sm_90").read_bytes()
        shutil.rmtree(cache)  # the mode is not in the key: the second must build again
    first, link, second, link_object = [line.split() for line in log.read_text().splitlines()]
    assert "-cubin" in first and "kernels.rdc.cubin" in first and "-c" not in first
    assert "-dlink" in link and "kernels.rdc.cubin" in link
    assert "-c" in second and "kernels.o" in second and "-cubin" not in second
    assert "-dlink" in link_object and "kernels.o" in link_object
    assert built["cubin"][:4] == b"\x7fELF"
    assert built["cubin"] == built["object"]


def test_an_unknown_rdc_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCOGEN_NVCC_RDC", "ptx")
    with pytest.raises(ToolchainError, match="CCOGEN_NVCC_RDC must be one of cubin, object"):
        rdc_mode()
    monkeypatch.delenv("CCOGEN_NVCC_RDC")
    assert rdc_mode() == "cubin"


@pytest.mark.toolchain
def test_same_text_elsewhere_hits_the_cache(cache_dir: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    require_toolchain("nccl-lsa")
    log = _counting_nvcc(tmp_path, monkeypatch)
    first = build_cubin(DATA / "nccl_hang" / "kernels.cu", "nccl-lsa")
    copy = tmp_path / "elsewhere" / "kernels.cu"
    copy.parent.mkdir()
    copy.write_text((DATA / "nccl_hang" / "kernels.cu").read_text())
    assert build_cubin(copy, "nccl-lsa") == first
    copy.write_text(copy.read_text() + "\n// changed\n")
    assert build_cubin(copy, "nccl-lsa") != first
    assert _compiles(log) == 2


@pytest.mark.toolchain
def test_local_header_is_built_beside_and_keys_the_cache(cache_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """kernels.cu includes the shared device header from its own directory: the build copies
    it beside the copy it compiles, and a change to the header is a new cache entry."""
    require_toolchain("nccl-lsa")
    log = _counting_nvcc(tmp_path, monkeypatch)
    src = tmp_path / "gen" / "kernels.cu"
    src.parent.mkdir()
    src.write_text('#include "support.cuh"\n'
                   'extern "C" __global__ void k(int* p) { *p = kValue; }\n')
    header = src.parent / "support.cuh"
    header.write_text("constexpr int kValue = 1;\n")
    first = build_cubin(src, "nccl-lsa")
    assert build_cubin(src, "nccl-lsa") == first and _compiles(log) == 1
    header.write_text("constexpr int kValue = 2;\n")
    assert build_cubin(src, "nccl-lsa") != first and _compiles(log) == 2
    header.unlink()
    with pytest.raises(CompileError, match=r"support\.cuh"):
        build_cubin(src, "nccl-lsa")


def test_listed_header_must_exist(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    out.mkdir()
    for name in ("kernels.cu", "manifest.json"):
        (out / name).write_text((DATA / "nccl_hang" / name).read_text())
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    manifest["headers"] = ["ccogen_device.cuh"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ToolchainError, match=r"ccogen_device\.cuh does not exist"):
        build_cubin(out, "nccl-lsa")


@pytest.mark.toolchain
def test_build_manifest_dir_writes_cubin(cache_dir: Path, tmp_path: Path) -> None:
    require_toolchain("nccl-lsa")
    out = tmp_path / "gen"
    out.mkdir()
    for name in ("kernels.cu", "manifest.json"):
        (out / name).write_text((DATA / "nccl_hang" / name).read_text())
    cubin = build_manifest_dir(out)
    assert cubin == out / "kernels.cubin" and cubin.stat().st_size > 0


@pytest.mark.toolchain
def test_compile_error_names_the_protocol_line(cache_dir: Path, tmp_path: Path) -> None:
    require_toolchain("nccl-lsa")
    src = tmp_path / "kernels.cu"
    src.write_text('#include <nccl.h>\n// broken.cco:3\nextern "C" __global__ void k() {\n'
                   "  // broken.cco:5\n  int x = no_such_name;\n}\n")
    with pytest.raises(CompileError) as info:
        build_cubin(src, "nccl-lsa")
    text = str(info.value)
    assert f"nvcc failed to compile {src}" in text
    assert 'identifier "no_such_name" is undefined' in text
    assert "kernels.cu:5 was generated from broken.cco:5" in text
    assert not list((cache_dir / "cubin").glob("*/kernels.cubin"))


def test_protocol_origin(tmp_path: Path) -> None:
    src = tmp_path / "kernels.cu"
    src.write_text("a\n// p.cco:10\nb\nc\n// p.cco:20\nd\n")
    assert protocol_origin("kernels.cu(4): error: x", src) == (4, "p.cco:10")
    assert protocol_origin("kernels.cu(6): error: x", src) == (6, "p.cco:20")
    assert protocol_origin("other.h(6): error: x", src) is None
    assert protocol_origin("kernels.cu(1): error: x", src) is None


def test_missing_headers_name_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                          ) -> None:
    monkeypatch.setenv("CCOGEN_NVSHMEM_HOME", str(tmp_path))
    with pytest.raises(ToolchainError, match=r"pip install nvidia-nvshmem-cu13"):
        find_library("nvshmem")


def test_old_library_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "nccl.h").write_text(
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 27\n#define NCCL_PATCH 7\n")
    monkeypatch.setenv("CCOGEN_NCCL_HOME", str(tmp_path))
    with pytest.raises(LibraryVersionError, match=r"NCCL 2\.27\.7 .* is too old: .* >= 2\.28"):
        find_library("nccl-lsa")


def test_cft_needs_nccl_2_31(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nccl-cft compiles against the same NCCL package, from 2.31 on (its Target says so)."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "nccl.h").write_text(
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n")
    monkeypatch.setenv("CCOGEN_NCCL_HOME", str(tmp_path))
    assert find_library("nccl-lsa").version == (2, 28, 9)
    with pytest.raises(LibraryVersionError, match=r"NCCL 2\.28\.9 .* is too old: the nccl-cft "
                       r"target needs NCCL >= 2\.31\.0; upgrade with `pip install -U "):
        find_library("nccl-cft")


def test_mori_has_no_engine_library() -> None:
    with pytest.raises(ToolchainError, match="mori-sdma compiles against no NCCL / NVSHMEM"):
        library_spec("mori-sdma")
    with pytest.raises(ToolchainError, match="unknown target 'foo'; known targets: mori-sdma"):
        library_spec("foo")


def test_the_runtime_builds_only_what_it_runs(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="cannot run target 'nccl-cft': the runtime runs "
                       "nvshmem, nccl-lsa"):
        build_cubin(DATA / "nccl_hang" / "kernels.cu", "nccl-cft")


@pytest.mark.parametrize(("target", "spec"), [("nccl-lsa", NCCL), ("nvshmem", NVSHMEM)])
def test_extended_lambda_only_for_nccl_reduce_copy(target: str, spec: object) -> None:
    library = Library(spec, Path("/lib/x"), (9, 9, 9))  # type: ignore[arg-type]
    options = BuildOptions(target=target, extra_flags=("-DX=1",))
    helpers = "ncclLsaReduceSum(coop, ...);"
    plain = compile_flags("int x;", library, options)
    assert plain == ["-std=c++17", "-arch=sm_90", "-I/lib/x/include", "-lineinfo", "-DX=1"]
    with_helpers = compile_flags(helpers, library, options)
    assert ("--extended-lambda" in with_helpers) is (target == "nccl-lsa")


def test_missing_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CCOGEN_NVCC", str(tmp_path / "nope"))
    with pytest.raises(ToolchainError, match=r"CCOGEN_NVCC=.* does not exist"):
        build_cubin(DATA / "nccl_hang", "nccl-lsa")


@pytest.mark.toolchain
def test_nvcc_append_flags_change_the_key(cache_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag nvcc appends from the environment changes the cubin: a new entry (#29 item 3)."""
    require_toolchain("nccl-lsa")
    log = _counting_nvcc(tmp_path, monkeypatch)
    monkeypatch.delenv("NVCC_APPEND_FLAGS", raising=False)
    first = build_cubin(DATA / "nccl_hang" / "kernels.cu", "nccl-lsa")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DCCOGEN_SOMETHING_ELSE=1")
    second = build_cubin(DATA / "nccl_hang" / "kernels.cu", "nccl-lsa")
    assert second != first and _compiles(log) == 2


@pytest.mark.toolchain
def test_two_builds_from_different_temporary_directories_are_identical(
        cache_dir: Path, tmp_path: Path) -> None:
    """Reproducible builds (#29 item 8): the same kernels built from two temporary
    directories, the cache emptied between them, are byte-identical cubins that name no
    temporary directory (the build directory is `<entry>/.build`, one name per key)."""
    from ccogen.toolchains import cache

    require_toolchain("nccl-lsa")
    cubins = []
    for name in ("first-tmp", "second-tmp"):
        where = tmp_path / name
        where.mkdir()
        (where / "kernels.cu").write_text((DATA / "nccl_hang" / "kernels.cu").read_text())
        cubins.append(build_cubin(where / "kernels.cu", "nccl-lsa").read_bytes())
        assert not list(cache_dir.glob("cubin/*/.build"))  # removed after the build
        cache.clear()
    assert cubins[0] == cubins[1]
    assert b"first-tmp" not in cubins[0] and b".kernels.cubin." not in cubins[0]
