"""Cost figures of hardware that several targets share (data only)."""

from __future__ import annotations

from ccogen.targets.base import CostModel

# The lent 2 x H200 machines (sm_90, NV18 NVLink): nccl-lsa and nvshmem both run there.
H200_NVLINK = CostModel(
    # peer copy 366-397 GB/s, flag latency 0.66 µs, kernel launch 4.2 µs; NVSHMEM
    # put-with-signal untuned ~113 GB/s per direction (docs/reference/apis.md, NVSHMEM)
    source="H200 pair, NV18 NVLink",
    peak_gbps=397.0,
    flag_latency_us=0.66,
    signal_us=0.66,
    launch_us=4.2,
)

__all__ = ["H200_NVLINK"]
