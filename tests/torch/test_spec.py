"""Manifest → the binding's view of a protocol (no torch): typed windows, buffers,
per-call pointer slots, outputs, back-to-back rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ccogen.errors import ManifestError
from ccogen.manifest import Manifest, load_manifest
from ccogen.torch.spec import TORCH_DTYPES, OpSpec, describe


def _write(tmp_path: Path, data: dict[str, Any]) -> Manifest:
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    (tmp_path / "kernels.cu").write_text("// fake\n")
    return load_manifest(tmp_path)


def buffered_data() -> dict[str, Any]:
    """A v2-shaped manifest: a typed window with a shape, two buffers, buffer params."""
    return {
        "abi": 1, "protocol": "moe", "source": "moe.cco", "target": "nvshmem", "nranks": 1,
        "params": {"tokens": 4}, "heap_size": 512,
        "windows": [{"name": "recv", "offset": 0, "size": 64, "dtype": "bf16",
                     "shape": [2, 16]}],
        "buffers": [{"name": "x", "dtype": "bf16", "shape": [32], "access": "read"},
                    {"name": "counts", "dtype": "i32", "shape": [2]}],
        "kernels": [{"name": "exchange", "grid": 1, "block": 32,
                     "params": ["heap", "buffer:counts", "epoch", "buffer:x", "debug"]}],
        "between_launches": "free",
    }


def buffered_manifest(tmp_path: Path) -> Manifest:
    return _write(tmp_path, buffered_data())


def test_typed_windows_buffers_and_slots(tmp_path: Path) -> None:
    spec = OpSpec.from_manifest(buffered_manifest(tmp_path), ["recv"])
    (recv,) = spec.windows
    assert (recv.dtype, recv.shape, recv.torch_dtype, recv.output) == ("bf16", (2, 16),
                                                                       "bfloat16", True)
    assert [(b.name, b.dtype, b.shape, b.access) for b in spec.buffers] == [
        ("x", "bf16", (32,), "read"), ("counts", "i32", (2,), "readwrite")]
    (kernel,) = spec.kernels
    assert kernel.slots == (1, 3) and kernel.buffers == (1, 0)
    assert spec.between_launches == "free"
    assert spec.label == "moe(tokens=4) on 1 ranks"


def test_v1_windows_are_bytes_and_need_a_barrier(tmp_path: Path) -> None:
    data = buffered_data()
    del data["buffers"], data["between_launches"]
    data["windows"] = [{"name": "send", "offset": 0, "size": 100},
                       {"name": "recv", "offset": 256, "size": 100}]
    data["kernels"][0]["params"] = ["heap", "epoch", "debug"]
    spec = OpSpec.from_manifest(_write(tmp_path, data), ["recv"])
    assert [(w.name, w.dtype, w.shape, w.output) for w in spec.windows] == [
        ("send", "u8", (100,), False), ("recv", "u8", (100,), True)]
    assert spec.between_launches == "host_sync" and spec.kernels[0].slots == ()
    assert [w.name for w in OpSpec.from_manifest(_write(tmp_path, data)).outputs] == [
        "send", "recv"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["windows"][0].update(dtype="f64"), "`windows\\[0\\].dtype` is 'f64'"),
    (lambda d: d["windows"][0].update(shape=[3, 16]), "`windows\\[0\\].shape` \\[3, 16\\] of bf16 "
     "is 96 bytes, the window 64"),
    (lambda d: d["windows"][0].update(size=63, shape=None), "63 is not a whole number of bf16"),
    (lambda d: d["buffers"][0].update(access="rw"), "`buffers\\[0\\].access` is 'rw'"),
    (lambda d: d["buffers"][0].pop("shape"), "`buffers\\[0\\].shape` is missing"),
    (lambda d: d["buffers"].append({"name": "recv", "dtype": "u8", "shape": [1]}),
     "a buffer named like a window"),
    (lambda d: d["kernels"][0]["params"].append("buffer:y"), "'buffer:y' names no entry of "
     "`buffers`"),
    (lambda d: d.update(between_launches="never"), "`between_launches` is 'never'"),
])
def test_manifest_errors_name_the_field(tmp_path: Path, change: Any, message: str) -> None:
    data = buffered_data()
    change(data)
    with pytest.raises(ManifestError, match=message):
        _write(tmp_path, data)


def test_every_element_type_has_a_torch_dtype() -> None:
    assert TORCH_DTYPES["bf16"] == "bfloat16" and TORCH_DTYPES["fp8e4m3"] == "float8_e4m3fn"
    assert describe("bf16", (4, 7168)) == "bf16[4, 7168]"
