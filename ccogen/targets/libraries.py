"""The engine libraries the CUDA targets compile against and load (data only).

Both come as pip packages (`pip install 'ccogen[toolchain]'`) or from a directory named
by an environment variable; ccogen.toolchains.libraries finds them.
"""

from __future__ import annotations

import dataclasses

from ccogen.targets.target import LibrarySpec, VersionRule

NCCL = LibrarySpec(
    name="NCCL", module="nvidia.nccl", pip="nvidia-nccl-cu13", env="CCOGEN_NCCL_HOME",
    header="nccl.h", version_macros=("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"),
    minimum=(2, 28, 0), runtime_lib="libnccl.so.2", version_rule=VersionRule.NCCL_DEVCOMM)

# Compute Fabric Transport arrived in NCCL 2.31.
NCCL_CFT = dataclasses.replace(NCCL, minimum=(2, 31, 0))

NVSHMEM = LibrarySpec(
    name="NVSHMEM", module="nvidia.nvshmem", pip="nvidia-nvshmem-cu13",
    env="CCOGEN_NVSHMEM_HOME", header="non_abi/nvshmem_version.h",
    version_macros=("NVSHMEM_VENDOR_MAJOR_VERSION", "NVSHMEM_VENDOR_MINOR_VERSION",
                    "NVSHMEM_VENDOR_PATCH_VERSION"),
    minimum=(3, 4, 0), runtime_lib="libnvshmem_host.so.3", version_rule=VersionRule.SAME_MAJOR,
    device_lib="nvshmem_device")

__all__ = ["NCCL", "NCCL_CFT", "NVSHMEM"]
