"""A manifest is input (issue #29 item 4): a lowered heap, a compiler flag that runs a
program, an absolute kernel file, a tampered kernels.cu are each refused before anything
is built or launched (no GPU, no toolchain: the refusals come first)."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ccogen.codegen import generate
from ccogen.codegen.files import GeneratedFiles, seal
from ccogen.errors import ManifestError
from ccogen.instantiate import instantiate
from ccogen.manifest import load_manifest
from ccogen.rt.launch import run
from ccogen.syntax import load_ir
from ccogen.toolchains import build_dir
from ccogen.toolchains.cubin import build_cubin

ROOT = Path(__file__).resolve().parents[1]


def _generated(tmp_path: Path, target: str = "nccl-lsa") -> Path:
    instance, diags = instantiate(load_ir(ROOT / "protocols" / "pingpong.cco"), 2, {})
    assert instance is not None, diags
    out = tmp_path / "gen"
    generate(instance, target, source="pingpong.cco").write(out)
    return out


def _edit(directory: Path, change: Callable[[dict[str, Any]], None], *, reseal: bool) -> None:
    """Change manifest.json; `reseal`: recompute its hashes too (a deliberate forgery)."""
    path = directory / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    text = json.dumps(data, indent=2) + "\n"
    if reseal:
        files = {p.name: p.read_text() for p in directory.iterdir() if p.name != "manifest.json"}
        text = seal({**files, "manifest.json": text})["manifest.json"]
    path.write_text(text)


@pytest.fixture
def no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """CCOGEN_NVCC pointing at a program that records being run (it must never be)."""
    ran = tmp_path / "ran"
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> "{ran}"\nexit 1\n')
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CCOGEN_NVCC", str(nvcc))
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    return ran


def _refused_everywhere(directory: Path, ran: Path, match: str) -> None:
    with pytest.raises(ManifestError, match=match):
        load_manifest(directory)
    with pytest.raises(ManifestError, match=match):
        build_cubin(directory, "nccl-lsa")
    with pytest.raises(ManifestError, match=match):
        build_dir(directory)  # `ccogen build`
    with pytest.raises(ManifestError, match=match):
        run(directory, iters=1)  # before any GPU, engine or compiler
    assert not ran.exists(), "a compiler ran"


def test_a_generated_directory_is_sealed_and_loads(tmp_path: Path) -> None:
    m = load_manifest(_generated(tmp_path))
    assert m.sealed and m.scratch is not None
    assert m.scratch[0] + m.scratch[1] <= m.heap_size


def test_a_lowered_heap_is_refused(tmp_path: Path, no_compiler: Path) -> None:
    out = _generated(tmp_path)

    def lower(data: dict[str, Any]) -> None:
        data["heap_size"] = data["scratch"]["offset"]  # the windows still fit

    _edit(out, lower, reseal=False)
    _refused_everywhere(out, no_compiler, "changed after ccogen generated it")
    _edit(out, lambda data: None, reseal=True)  # forged hashes: the kernels' words still count
    _refused_everywhere(out, no_compiler, "kernels need")


@pytest.mark.parametrize("flag", ["-ccbin=/tmp/evil", "--compiler-bindir=/tmp", "-ccbin",
                                  "-Xcompiler=-fplugin=/tmp/evil.so", "-Xcompiler",
                                  "-I/tmp/evil", "-include=/etc/passwd", "-DX=$(touch y)",
                                  "-o/tmp/out", "--run"])
def test_a_flag_off_the_allow_list_is_refused(flag: str, tmp_path: Path,
                                              no_compiler: Path) -> None:
    out = _generated(tmp_path)
    _edit(out, lambda data: data.__setitem__("nvcc_flags", [flag]), reseal=True)
    _refused_everywhere(out, no_compiler, "is not a flag ccogen passes")


def test_allowed_flags_load(tmp_path: Path) -> None:
    out = _generated(tmp_path)
    flags = ["-DREF_P_ROUNDS=16ULL", "-DREF_T_X=REF_F32", "-UNDEBUG", "--extended-lambda"]
    _edit(out, lambda data: data.__setitem__("nvcc_flags", flags), reseal=True)
    assert load_manifest(out).nvcc_flags == tuple(flags)


@pytest.mark.parametrize("name", ["/etc/passwd", "../kernels.cu", "sub/kernels.cu", ".k.cu"])
def test_a_kernel_file_outside_the_directory_is_refused(name: str, tmp_path: Path,
                                                        no_compiler: Path) -> None:
    out = _generated(tmp_path)
    _edit(out, lambda data: data.__setitem__("kernel_file", name), reseal=True)
    _refused_everywhere(out, no_compiler, "must be a file name beside the manifest")


@pytest.mark.parametrize("file", ["kernels.cu", "ccogen_device.cuh"])
def test_a_tampered_generated_file_is_refused(file: str, tmp_path: Path,
                                              no_compiler: Path) -> None:
    out = _generated(tmp_path)
    path = out / file
    path.write_text(path.read_text() + '\n#include "/etc/passwd"\n')
    _refused_everywhere(out, no_compiler,
                        re.escape(f"{file} was changed after ccogen generated it"))


def test_a_generated_file_replaced_by_a_link_is_refused(tmp_path: Path,
                                                        no_compiler: Path) -> None:
    out = _generated(tmp_path)
    real = tmp_path / "elsewhere.cu"
    real.write_text((out / "kernels.cu").read_text())  # the same text, through a link
    (out / "kernels.cu").unlink()
    (out / "kernels.cu").symlink_to(real)
    _refused_everywhere(out, no_compiler, "a link or not a regular file")


def test_mori_manifests_are_checked_before_clang(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.toolchains import locate

    def no_clang() -> Path:
        raise AssertionError("clang was looked for")

    monkeypatch.setattr(locate, "find_clang", no_clang)
    out = _generated(tmp_path, "mori-sdma")
    host = out / "host.cpp"
    host.write_text(host.read_text().replace("int ", "int /* edited */ ", 1))
    with pytest.raises(ManifestError, match=r"host\.cpp was changed"):
        build_dir(out)
    out2 = _generated(tmp_path / "again", "mori-sdma")
    _edit(out2, lambda data: data.__setitem__("arch", ["gfx942 -fplugin=x"]), reseal=True)
    with pytest.raises(ManifestError, match="arch"):
        build_dir(out2)


def test_an_unsealed_hand_written_manifest_still_loads(tmp_path: Path) -> None:
    out = _generated(tmp_path)
    _edit(out, lambda data: data.pop("generated"), reseal=False)
    assert not load_manifest(out).sealed
    files = GeneratedFiles({"x": "y"})
    assert seal(files.files) == files.files  # nothing to seal without a manifest
