"""Build every expressible library protocol with the real toolchains (no GPU needed).

- mori-sdma: clang-22 code objects for gfx942 and gfx950 (+ host/device type check, host.o)
- nccl-cft: nvcc >= 13.3 sm_100 cubins whose PTX has `fabric.` instructions
- nvshmem at sm_100: nvcc >= 13.3 cubins; counted protocols take the native counted path

Skipped, with the install hint, where a toolchain is missing (scripts/install-toolchains.sh).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ccogen.cli import main
from ccogen.codegen.files import GeneratedFiles
from ccogen.errors import CompileError, ToolchainError
from ccogen.toolchains import build_dir
from ccogen.toolchains.cuda import build_cft
from ccogen.toolchains.locate import nvcc_release
from tests.codegen.seed import (
    CFT,
    MORI,
    NVSHMEM_SM100,
    ROOT,
    VARIANTS,
    Variant,
    compiled,
    expressible,
)

pytestmark = pytest.mark.toolchain
# nvshmem at sm_100 differs from sm_90 (built by the runtime's tests) only in counted
# writes: build the counted protocols, one other as a smoke test, and two of language v2
# (reduce, signal, a buffer) (~15 s each).
NVSHMEM_SM100_BUILDS = ("counted_broadcast", "counted_gather", "ring_allgather",
                        "allreduce_oneshot", "broadcast_pipelined")  # + language v2
CASES = [(v, stem) for v in VARIANTS for stem in expressible(v)
         if v is not NVSHMEM_SM100 or stem in NVSHMEM_SM100_BUILDS]


def build(stem: str, variant: Variant, tmp: Path, debug: bool = False, ranks: int = 2):
    GeneratedFiles(compiled(stem, variant, ranks, debug).files).write(tmp)
    try:
        return build_dir(tmp)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")


@pytest.mark.parametrize(("variant", "stem"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_library_protocol_builds(variant: Variant, stem: str, tmp_path: Path) -> None:
    result = build(stem, variant, tmp_path)
    for out in result.outputs:
        assert out.is_file() and out.stat().st_size > 0
    if variant is MORI:
        assert {p.name for p in result.outputs} >= {"kernels.gfx942.hsaco", "kernels.gfx950.hsaco",
                                                     "host.o"}
    else:
        ptx = (tmp_path / "kernels.ptx").read_text()
        assert variant is not CFT or "fabric.try_put" in ptx or "fabric.try_get" in ptx
        if variant is NVSHMEM_SM100 and stem.startswith("counted_"):
            assert "counted::bytes" in ptx
            assert any("counted writes: native" in n for n in result.notes)


def test_mori_debug_build(tmp_path: Path) -> None:
    result = build("two_queue_pipeline", MORI, tmp_path, debug=True)
    assert "ccogen_wait_bounded(c, 0, 1," in (tmp_path / "kernels.hip").read_text()
    assert len(result.outputs) == 3


def test_mori_lanes_over_two_waves_build(tmp_path: Path) -> None:
    build("alltoall", MORI, tmp_path, ranks=8)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["kernels"][0]["block"] == 64


def _old_nvcc() -> Path | None:
    found = shutil.which("nvcc")
    if found is None or nvcc_release(Path(found)) >= (13, 3):
        return None
    return Path(found)


def test_cft_refuses_an_nvcc_older_than_13_3(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    old = _old_nvcc()
    if old is None:
        pytest.skip("no nvcc older than 13.3 on PATH to try")
    GeneratedFiles(compiled("lane_ship", CFT).files).write(tmp_path)
    monkeypatch.setenv("CCOGEN_NVCC_CFT", str(old))
    with pytest.raises(ToolchainError, match=r"needs nvcc >= 13\.3"):
        build_dir(tmp_path)


def test_cft_build_fails_without_fabric_instructions(tmp_path: Path) -> None:
    """A file whose PTX has no `fabric.` instruction fails loudly (the stub case)."""
    GeneratedFiles(compiled("lane_ship", CFT).files).write(tmp_path)
    (tmp_path / "kernels.cu").write_text('extern "C" __global__ void k(int* p) { *p = 1; }\n')
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    try:
        with pytest.raises(CompileError, match=r"no `fabric\.` instruction"):
            build_cft(tmp_path, manifest, debug=False)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")


def test_cli_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("clang-22") is None and not os.environ.get("CCOGEN_CLANG"):
        pytest.skip("clang-22 not found: install with bash scripts/install-toolchains.sh")
    out = tmp_path / "ship"
    rc = main(["build", str(ROOT / "protocols" / "lane_ship.cco"), "--target", "mori-sdma",
               "-o", str(out)])
    text = capsys.readouterr().out
    if rc == 2:
        pytest.skip("toolchain missing")
    assert rc == 0, text
    assert "kernels.gfx950.hsaco" in text and (out / "kernels.gfx942.hsaco").is_file()
