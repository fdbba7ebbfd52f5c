"""Every library protocol builds for `nccl-lsa` and `nvshmem` (sm_90) with the real nvcc
and the real NCCL / NVSHMEM headers, without a warning in the generated code.

Toolchain tests: skipped, naming the missing package, when nvcc or the headers are absent
(`pip install -e '.[toolchain]'` brings the headers; CI installs them).

The builds go through the run's build cache (tests/conftest.py: one per pytest run,
shared by every build test), not a fresh one per test: its key covers the text, the flags
(`-Werror` included), nvcc and the library, so an entry exists only where this very build
passed, and a text another test of the run built with the same flags is compiled once.
Caching itself is tested in `tests/toolchains/test_cubin.py` and `test_cache.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.rt.api import compile_for_run
from ccogen.syntax import load_ir
from ccogen.toolchains.cubin import build_cubin
from tests.helpers import RUNTIME_PROTOCOLS, library_params
from tests.runtime.conftest import require_toolchain

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted((ROOT / "protocols").glob("*.cco"))


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("path", PROTOCOLS, ids=[p.stem for p in PROTOCOLS])
def test_library_protocol_builds(path: Path, target: str, tmp_path: Path) -> None:
    require_toolchain(target)
    out = tmp_path / "gen"
    protocol = load_ir(path)
    compile_for_run(protocol, path.name, target, 2, library_params(path), out, debug=False)
    if path.stem == "moe_combine":  # nvcc builds the folded reduce loop (codegen.reroll),
        # once for both ranks (codegen.ranks)
        text = (out / "kernels.cu").read_text()
        assert text.count("ccogen_reduce_group<") == 1 and "case 0: case 1: " in text
    cubin = build_cubin(out, target, "sm_90", False, extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("stem", sorted(RUNTIME_PROTOCOLS))
def test_runtime_protocol_debug_builds(stem: str, target: str, tmp_path: Path) -> None:
    """Debug builds of the run-time protocols (their `require` checked on the device)."""
    require_toolchain(target)
    path = ROOT / "protocols" / f"{stem}.cco"
    out = tmp_path / "gen"
    compile_for_run(load_ir(path), path.name, target, 2, library_params(path), out, debug=True)
    assert "ccogen_require(c, (" in (out / "kernels.cu").read_text()
    cubin = build_cubin(out, target, "sm_90", True, extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0
