"""`Options.epoch_from_heap`: kernels count their own launches (for CUDA-graph replay).

Off (the default) the generated files are byte for byte what they were before the option
existed (the goldens); on, every kernel of nccl-lsa and nvshmem takes a ticket from a
launch counter of its own, placed after its barrier words in the heap's scratch area.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccogen.codegen import Options, Unsupported, generate
from ccogen.instantiate import instantiate
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[2]


def files(name: str, target: str, nranks: int = 2, **options: object) -> dict[str, str]:
    instance, diags = instantiate(load_ir(ROOT / "protocols" / f"{name}.cco"), nranks, {})
    assert instance is not None, diags
    return generate(instance, target, source=f"protocols/{name}.cco",
                    options=Options(**options)).files  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_off_is_the_default_and_changes_nothing(target: str) -> None:
    default = files("two_queue_pipeline", target)
    assert files("two_queue_pipeline", target, epoch_from_heap=False) == default
    golden = (ROOT / "tests" / "golden" / target / "two_queue_pipeline.cu").read_text()
    assert default["kernels.cu"] == golden
    assert "ccogen_launch_epoch" not in default["kernels.cu"]
    assert "ccogen_launch_epoch" not in default["ccogen_device.cuh"]


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_on_every_kernel_takes_a_ticket(target: str) -> None:
    on = files("alltoall", target, epoch_from_heap=True)
    off = files("alltoall", target)
    text = on["kernels.cu"]
    assert on["ccogen_device.cuh"].count(
        "__device__ __forceinline__ uint64_t ccogen_launch_epoch(") == 1
    calls = re.findall(r"epoch = ccogen_launch_epoch\((.*), (\d+)ULL\);", text)
    assert len(calls) == 1
    # the counter follows the kernel's rank-wide and group barrier words
    fill = re.search(r"(\d+),\s+(\d+)ULL, (\d+)ULL, \d+ULL\);", text)  # ctas, group, rank, syncs
    assert fill is not None
    group, rank = int(fill.group(2)), int(fill.group(3))
    assert group == rank + 8 and int(calls[0][1]) == group + 8 * 1
    manifest, before = json.loads(on["manifest.json"]), json.loads(off["manifest.json"])
    assert manifest["kernels"][0]["params"] == before["kernels"][0]["params"]  # same ABI
    assert manifest["windows"] == before["windows"]
    assert int(calls[0][1]) + 8 <= manifest["heap_size"]
    assert on["kernels.cu"].splitlines()[0] != off["kernels.cu"].splitlines()[0]  # options hash


def test_several_kernels_and_blocks_get_distinct_counters() -> None:
    text = files("two_queue_pipeline", "nccl-lsa", epoch_from_heap=True)["kernels.cu"]
    offsets = [int(m) for m in re.findall(r"ccogen_launch_epoch\(.*, (\d+)ULL\);", text)]
    assert offsets and len(set(offsets)) == len(offsets)


@pytest.mark.parametrize("target", ["nccl-cft", "mori-sdma"])
def test_other_targets_refuse(target: str) -> None:
    with pytest.raises(Unsupported, match="epoch_from_heap"):
        files("alltoall", target, epoch_from_heap=True)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_on_compiles(target: str, tmp_path: Path) -> None:
    from ccogen.toolchains.cubin import build_cubin
    from tests.runtime.conftest import require_toolchain

    require_toolchain(target)
    for name, text in files("pingpong", target, epoch_from_heap=True).items():
        (tmp_path / name).write_text(text)
    assert build_cubin(tmp_path, target, "sm_90").is_file()
