"""The runtime honours what a manifest asks of the engine's process, or refuses clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccogen.compiler import compile_protocol
from ccogen.errors import ManifestError, RunError
from ccogen.rt.requirements import apply_env, check_heap, read
from ccogen.syntax import load_ir
from tests.helpers import REPO_ROOT


def _manifest(tmp_path: Path, target: str = "nvshmem", arch: str | None = "sm_100") -> Path:
    files = compile_protocol(load_ir(REPO_ROOT / "protocols" / "counted_gather.cco"), target,
                             source="protocols/counted_gather.cco", ranks=2, arch=arch).files
    (tmp_path / "manifest.json").write_text(files["manifest.json"])
    return tmp_path


def test_nvshmem_counted_native_needs_the_tma_policy_and_a_256_byte_heap(tmp_path: Path) -> None:
    req = read(_manifest(tmp_path), "nvshmem")
    assert dict(req.env) == {"NVSHMEM_TMA_POLICY": "ENABLE"} and req.heap_align == 256
    environ: dict[str, str] = {}
    apply_env(req, environ)
    assert environ == {"NVSHMEM_TMA_POLICY": "ENABLE"}
    apply_env(req, environ)  # the same value again is fine


def test_a_conflicting_environment_is_refused_not_overridden(tmp_path: Path) -> None:
    req = read(_manifest(tmp_path), "nvshmem")
    environ = {"NVSHMEM_TMA_POLICY": "DISABLE"}
    with pytest.raises(RunError, match=r"needs NVSHMEM_TMA_POLICY=ENABLE \(manifest\.json "
                                       r"nvshmem\.env\), but this process has "
                                       r"NVSHMEM_TMA_POLICY=DISABLE"):
        apply_env(req, environ)
    assert environ == {"NVSHMEM_TMA_POLICY": "DISABLE"}


def test_a_heap_placed_below_the_alignment_is_refused(tmp_path: Path) -> None:
    req = read(_manifest(tmp_path), "nvshmem")
    check_heap(req, 0x7F0000000000)
    with pytest.raises(RunError, match="not 256-byte aligned as the generated code assumes"):
        check_heap(req, 0x7F0000000080)


def test_without_requirements_nothing_is_set(tmp_path: Path) -> None:
    req = read(_manifest(tmp_path, "nccl-lsa", None), "nccl-lsa")
    environ: dict[str, str] = {}
    apply_env(req, environ)
    assert environ == {} and req.heap_align == 256


def test_a_malformed_section_is_a_manifest_error(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"nvshmem": {"heap_align": 100}}))
    with pytest.raises(ManifestError, match="must be a power of two"):
        read(tmp_path, "nvshmem")
