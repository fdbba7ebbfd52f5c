"""Language v2 on every target's real toolchain: a local weighted `reduce` whose result a
put forwards (tests/runtime/data/local_reduce.cco), per element type, and its refusals.

Toolchain tests: skipped, naming what is missing, where a compiler or the headers are
absent (as tests/codegen/test_seed_build.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.codegen.files import GeneratedFiles
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError, ToolchainError
from ccogen.syntax import load_ir
from ccogen.toolchains import build_dir

ROOT = Path(__file__).resolve().parents[2]
LOCAL_REDUCE = ROOT / "tests" / "runtime" / "data" / "local_reduce.cco"
TARGETS = ("nccl-lsa", "nvshmem", "nccl-cft", "mori-sdma")


def generate(target: str, dtype: str, out: Path) -> dict[str, str]:
    files = compile_protocol(load_ir(LOCAL_REDUCE), target, source="local_reduce.cco",
                             ranks=2, params={"T": dtype}).files  # type: ignore[dict-item]
    GeneratedFiles(files).write(out)
    return files


@pytest.mark.parametrize("target", TARGETS)
def test_local_reduce_generates_for_every_target(target: str, tmp_path: Path) -> None:
    files = generate(target, "bf16", tmp_path)
    text = files["kernels.hip" if target == "mori-sdma" else "kernels.cu"]
    assert "// local_reduce.cco:11: reduce" in text
    bf16 = "ccogen_bf16" if target == "mori-sdma" else "__nv_bfloat16"
    assert f"<{bf16}, float, CCOGEN_SUM, 2, true>" in text
    assert "3.0f, -2.0f" in text


@pytest.mark.toolchain
@pytest.mark.parametrize("dtype", ["bf16", "f16", "i32", "f32"])
@pytest.mark.parametrize("target", TARGETS)
def test_local_reduce_builds(target: str, dtype: str, tmp_path: Path) -> None:
    generate(target, dtype, tmp_path)
    try:
        result = build_dir(tmp_path)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    assert result.outputs and all(p.stat().st_size > 0 for p in result.outputs)


@pytest.mark.parametrize(("stem", "target", "needle"), [
    ("allreduce_oneshot", "mori-sdma", "cannot lower a `reduce` that reads a peer's window"),
    ("allreduce_oneshot", "nccl-cft", "cannot lower a `reduce` that reads a peer's window"),
    ("broadcast_pipelined", "mori-sdma", "cannot lower `signal`"),
])
def test_refusals_name_the_alternative(stem: str, target: str, needle: str) -> None:
    path = ROOT / "protocols" / f"{stem}.cco"
    with pytest.raises(DiagnosticError) as info:
        compile_protocol(load_ir(path), target, source=path.name, ranks=2)
    # one E042 per refused feature (lint's capability table may add local buffers first)
    (d,) = [d for d in info.value.diagnostics if d.code == "E042" and needle in d.message]
    assert d.help is not None and ("put" in d.help or "get" in d.help)
