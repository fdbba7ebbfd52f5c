"""The step primitives' linkage (issue 31): out of line in an instance of very many steps.

Inlined at each of a few hundred steps, ptxas spent minutes on a 4-rank halo exchange and
an FP8 MoE dispatch (tests/runtime/data/stall/), and `ccogen run` looked stalled while it
built; out of line they built in 17 s and 22 s on an H200 host (docs/performance.md).
Small instances keep them inlined (the context stays in registers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccogen.codegen.backends.sm import INLINE_STEPS
from ccogen.compiler import compile_protocol
from ccogen.syntax import load_ir

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")

DATA = Path(__file__).resolve().parents[1] / "runtime" / "data"
DEFINE = re.compile(r"^#define CCOGEN_STEP_INLINE (\S+)$", re.M)


def _kernels(path: Path, target: str, ranks: int) -> str:
    files = compile_protocol(load_ir(path), target, source=path.name, ranks=ranks).files
    return files["kernels.cu"]


@pytest.mark.parametrize("target", ["nvshmem", "nccl-lsa"])
def test_a_kernel_of_many_steps_calls_its_primitives_out_of_line(target: str) -> None:
    text = _kernels(DATA / "stall" / "halo2d.cco", target, 4)
    assert text.count("// halo2d.cco:") > INLINE_STEPS  # the instance is above the bound
    assert DEFINE.findall(text) == ["__noinline__"]
    # the define comes before the shared header that declares the primitives with it
    assert text.index("#define CCOGEN_STEP_INLINE") < text.index('#include "ccogen_device.cuh"')
    assert "__device__ CCOGEN_STEP_INLINE void ccogen_copy_warp(" in text


def test_a_small_kernel_keeps_them_inlined() -> None:
    text = _kernels(DATA.parents[2] / "protocols" / "pingpong.cco", "nvshmem", 2)
    assert DEFINE.findall(text) == ["__forceinline__"]


def test_nvshmem_fallbacks_are_out_of_line_and_local_copies_have_none() -> None:
    text = _kernels(DATA / "stall" / "halo2d.cco", "nvshmem", 4)
    assert "__device__ __noinline__ void ccogen_nvshmem_move(" in text
    assert "__device__ __noinline__ void ccogen_nvshmem_putsig(" in text
    move = text[text.index("__device__ __forceinline__ void ccogen_move("):]
    move = move[:move.index("\n}\n")]
    # a local copy returns before any NVSHMEM call is reachable
    assert move.index("if (dp < 0 && sp < 0)") < move.index("ccogen_nvshmem_move<scope>")


@pytest.mark.parametrize("target", ["nvshmem", "nccl-lsa"])
def test_out_of_line_primitives_are_capped_at_the_kernels_register_bound(target: str) -> None:
    """`__launch_bounds__(512)` gives a kernel 128 registers; ptxas refuses a kernel calling
    an out-of-line primitive that needs more (`ccogen_putsig_group`, 140, at 8 ranks of
    ring_allgather on the GPU machine), so the manifest asks nvcc to cap every function."""
    import json

    path = DATA.parents[2] / "protocols" / "ring_allgather.cco"
    files = compile_protocol(load_ir(path), target, source=path.name, ranks=8).files
    manifest = json.loads(files["manifest.json"])
    assert DEFINE.findall(files["kernels.cu"]) == ["__noinline__"]
    widest = max(k["block"] if isinstance(k["block"], int) else k["block"][0]
                 for k in manifest["kernels"])
    assert manifest["nvcc_flags"] == [f"-maxrregcount={min(255, 65536 // widest)}"]
    small = compile_protocol(load_ir(path), target, source=path.name, ranks=2).files
    assert "nvcc_flags" not in json.loads(small["manifest.json"])
