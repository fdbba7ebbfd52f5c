"""Launch shape and program declarations of the SM-copy targets (codegen.backends.sm)."""

from __future__ import annotations

import json
import re

import pytest

from ccogen.codegen.backends import sm
from ccogen.codegen.backends.base import DEFAULT_MAX_CTAS
from tests.helpers import generated_kernels as kernels


@pytest.mark.parametrize(("largest", "threads", "blocks", "expected"), [
    (8, 64, 1, (1, 64)),            # small: one CTA of threads=, rounded to a warp
    (4 << 10, 40, 1, (1, 64)),
    (16 << 10, 64, 1, (1, 512)),    # larger: 512-thread CTAs, one per 64 KiB
    (1 << 20, 64, 1, (16, 512)),
    (1 << 30, 64, 1, (DEFAULT_MAX_CTAS, 512)),  # the default SM budget: 32 CTAs a launch
    (1 << 30, 64, 8, (DEFAULT_MAX_CTAS // 8, 512)),  # shared by the kernel's blocks
])
def test_launch_shape(largest: int, threads: int, blocks: int,
                      expected: tuple[int, int]) -> None:
    assert sm.launch_shape(largest, threads, blocks) == expected


@pytest.mark.parametrize(("largest", "blocks", "budget", "expected"), [
    (1 << 30, 1, 128, sm.MAX_CTAS),   # a group never exceeds the measured best, 128
    (1 << 30, 1, 1000, sm.MAX_CTAS),
    (1 << 30, 3, 128, 42),            # 3 x 42 <= 128
    (1 << 30, 4, 7, 1),               # the budget below 2 per block: one CTA each
    (1 << 20, 1, 8, 8),               # 1 MiB wants 16
    (1 << 20, 1, 64, 16),             # ... and takes no more than it wants
])
def test_launch_shape_honours_the_sm_budget(largest: int, blocks: int, budget: int,
                                            expected: int) -> None:
    ctas, _ = sm.launch_shape(largest, 64, blocks, max_ctas=budget)
    assert ctas == expected and ctas * blocks <= budget


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem", "nccl-cft"])
@pytest.mark.parametrize("budget", [1, 5, 32, 128])
def test_every_kernel_grid_stays_within_the_budget(target: str, budget: int) -> None:
    from ccogen.codegen import Options, generate
    from ccogen.instantiate import instantiate
    from ccogen.syntax import load_ir
    from tests.helpers import REPO_ROOT

    for name in ("alltoall", "counted_broadcast", "striped_put"):
        ir = load_ir(REPO_ROOT / "protocols" / f"{name}.cco")
        instance, _ = instantiate(ir, 4 if name != "striped_put" else 2, {})
        assert instance is not None
        files = generate(instance, target, source="p.cco",
                         options=Options(max_ctas=budget)).files
        manifest = json.loads(files["manifest.json"])
        assert manifest["max_ctas"] == budget
        for k in manifest["kernels"]:
            assert k["grid"] <= budget and k["cooperative"] == (k["grid"] > 1), (name, k)


def test_a_budget_below_the_logical_blocks_is_refused() -> None:
    from ccogen.codegen import Options, Unsupported, generate
    from ccogen.instantiate import instantiate
    from ccogen.syntax import parse_ir

    text = ("protocol many(size: bytes = 1 MiB):\n    team lsa(2)\n    window msg: size * 4\n\n"
            "    kernel k(threads=64, blocks=4):\n        blocks b in range(4):\n"
            "            if me == 0:\n"
            "                put(1, dst=msg[b * size:(b + 1) * size], "
            "src=msg[b * size:(b + 1) * size], signal=\"remote\", queue=0)\n"
            "                quiet(1)\n            else:\n"
            "                wait_signal(0, queue=0)\n")
    instance, diags = instantiate(parse_ir(text), 2, {})
    assert instance is not None, diags
    for target in ("nccl-lsa", "nvshmem", "mori-sdma"):
        with pytest.raises(Unsupported, match=r"kernel `k` has 4 logical blocks.*budget of 3 CTAs"):
            generate(instance, target, options=Options(max_ctas=3))
        generate(instance, target, options=Options(max_ctas=4))
    with pytest.raises(ValueError, match="max_ctas must be a positive integer"):
        Options(max_ctas=0)


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_small_kernels_inline_their_programs(target: str) -> None:
    text = kernels("alltoall", target, params={"block": 1 << 20})
    # one program for both ranks (codegen.ranks)
    declared = re.findall(r"__device__ (__\w+__) void ccogen_alltoall_exchange_r0x2_b0", text)
    assert declared == ["__forceinline__"]


def test_very_long_programs_stay_out_of_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sm, "INLINE_STEPS", 3)  # alltoall's one program has 5+ steps
    text = kernels("alltoall", params={"block": 1 << 20})
    declared = re.findall(r"__device__ (__\w+__) void ccogen_alltoall_exchange_r0x2_b0", text)
    assert declared == ["__noinline__"]
