"""manifest.json parsing and validation (docs/runtime-abi.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ccogen.errors import ManifestError
from ccogen.manifest import load_manifest, parse_manifest
from tests.runtime.conftest import DATA


def _data(name: str) -> dict[str, Any]:
    return json.loads((DATA / name / "manifest.json").read_text())


@pytest.mark.parametrize("name", ["nccl_putsig", "nvshmem_putsig", "nccl_hang", "nvshmem_hang"])
def test_test_manifests_parse(name: str) -> None:
    m = load_manifest(DATA / name)
    assert m.nranks == 2
    assert m.kernel_path == DATA / name / "kernels.cu"
    assert m.kernels[0].cooperative


def test_fields() -> None:
    m = load_manifest(DATA / "nccl_putsig")
    assert m.target == "nccl-lsa" and m.protocol == "putsig" and m.source == "putsig.cco"
    assert [(w.name, w.offset, w.size) for w in m.windows] == [
        ("src", 0, 1 << 20), ("dst", 1 << 20, 1 << 20)]
    assert m.signals.offset == 2 << 20 and m.signals.count == 2
    k = m.kernels[0]
    assert k.grid == (4, 1, 1) and k.block == (256, 1, 1)
    assert k.params == ("devcomm", "window", "epoch", "debug")
    assert m.lsa_barrier_count == 4
    assert m.params == (("size", 1 << 20),)


def test_defaults() -> None:
    m = load_manifest(DATA / "nccl_hang")
    assert m.arch == "sm_90" and not m.debug and m.counters == () and m.nvcc_flags == ()
    assert m.kernels[0].shared_mem == 0


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, Path("/x/manifest.json"))
    return str(info.value)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("heap_size"), "`heap_size` is missing"),
    (lambda d: d.update(abi=2), "this runtime implements ABI 1"),
    (lambda d: d.update(target="mori-sdma"),
     "`target` is 'mori-sdma'; the runtime runs nvshmem, nccl-lsa"),
    (lambda d: d.update(target="nccl-gin"), "`target` is 'nccl-gin'"),
    (lambda d: d["windows"][1].update(offset=1000), "not 256-byte aligned"),
    (lambda d: d["windows"][1].update(offset=512), "overlaps windows `src`"),
    (lambda d: d.update(heap_size=4096), "lies outside heap_size 4096"),
    (lambda d: d["signals"].update(count=1), "below nranks * queues = 2"),
    (lambda d: d["kernels"][0]["params"].append("stream"), "kinds are devcomm"),
    (lambda d: d["kernels"][0].update(grid=[0]), "must be a positive int"),
    (lambda d: d["kernels"][0].update(cooperative="yes"), "must be true or false"),
    (lambda d: d.update(kernels=[]), "`kernels` is empty"),
])
def test_errors_name_the_field(edit: Any, message: str) -> None:
    data = copy.deepcopy(_data("nccl_putsig"))
    edit(data)
    text = _error(data)
    assert message in text
    assert text.startswith("/x/manifest.json: ")


def test_nvshmem_kernels_take_no_devcomm() -> None:
    data = _data("nvshmem_putsig")
    data["kernels"][0]["params"] = ["devcomm", "epoch"]
    assert "'devcomm' does not exist on target nvshmem" in _error(data)


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist: generate it with `ccogen compile`"):
        load_manifest(tmp_path)
