"""Launch shape and program declarations of the SM-copy targets (codegen.backends.sm)."""

from __future__ import annotations

import re

import pytest

from ccogen.codegen.backends import sm
from tests.helpers import generated_kernels as kernels


@pytest.mark.parametrize(("largest", "threads", "blocks", "expected"), [
    (8, 64, 1, (1, 64)),            # small: one CTA of threads=, rounded to a warp
    (4 << 10, 40, 1, (1, 64)),
    (16 << 10, 64, 1, (1, 512)),    # larger: 512-thread CTAs, one per 64 KiB
    (1 << 20, 64, 1, (16, 512)),
    (1 << 30, 64, 1, (sm.MAX_CTAS, 512)),
    (1 << 30, 64, 8, (sm.MAX_GRID // 8, 512)),  # the kernel's CTAs stay under MAX_GRID
])
def test_launch_shape(largest: int, threads: int, blocks: int,
                      expected: tuple[int, int]) -> None:
    assert sm.launch_shape(largest, threads, blocks) == expected


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_small_kernels_inline_their_programs(target: str) -> None:
    text = kernels("alltoall", target, params={"block": 1 << 20})
    declared = re.findall(r"__device__ (__\w+__) void ccogen_alltoall_exchange_r\d_b0", text)
    assert declared == ["__forceinline__", "__forceinline__"]


def test_very_long_programs_stay_out_of_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sm, "INLINE_STEPS", 3)  # alltoall's two programs have 5+ steps each
    text = kernels("alltoall", params={"block": 1 << 20})
    declared = re.findall(r"__device__ (__\w+__) void ccogen_alltoall_exchange_r\d_b0", text)
    assert declared == ["__noinline__", "__noinline__"]
