"""Every library protocol builds for `nccl-lsa` and `nvshmem` (sm_90) with the real nvcc
and the real NCCL / NVSHMEM headers, without a warning in the generated code.

Toolchain tests: skipped, naming the missing package, when nvcc or the headers are absent
(`pip install -e '.[toolchain]'` brings the headers; CI installs them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.rt.api import compile_for_run
from ccogen.rt.build import build_cubin
from ccogen.syntax import load_ir
from tests.helpers import RUNTIME_PENDING
from tests.runtime.conftest import require_toolchain

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted(p for p in (ROOT / "protocols").glob("*.cco")
                   if p.stem not in RUNTIME_PENDING)  # run-time sizes: generation pending


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("path", PROTOCOLS, ids=[p.stem for p in PROTOCOLS])
def test_library_protocol_builds(path: Path, target: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    require_toolchain(target)
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "gen"
    protocol = load_ir(path)
    compile_for_run(protocol, path.name, target, 2, {}, out, debug=False)
    cubin = build_cubin(out, target, "sm_90", False, extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0
