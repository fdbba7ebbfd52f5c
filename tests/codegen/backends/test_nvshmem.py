"""nvshmem target: NVLink peers are looked up once per launch, not at every step."""

from __future__ import annotations

import re

import pytest

from tests.helpers import generated_kernels as kernels


@pytest.mark.parametrize(("protocol", "nranks"), [("pingpong", 2), ("alltoall", 4)])
def test_peer_pointers_are_looked_up_once_per_launch(protocol: str, nranks: int) -> None:
    text = kernels(protocol, "nvshmem", nranks=nranks)
    assert len(re.findall(r"\bnvshmem_ptr\(", text)) == 1  # in ccogen_nvshmem_peers only
    kernels_found = re.findall(r"extern \"C\" __global__", text)
    tables = re.findall(rf"__shared__ char\* peers\[{nranks}\];\n"
                        rf"  ccogen_nvshmem_lookup\(heap, peers, {nranks}\);\n"
                        r"  __syncthreads\(\);  // publishes peers", text)
    assert kernels_found and len(tables) == len(kernels_found)
    # quiet reads the launch's flag instead of asking NVSHMEM for every PE
    assert "nvshmem_n_pes()" not in text
