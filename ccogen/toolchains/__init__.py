"""Toolchains: building generated code without a GPU.

`ccogen build` (`build`: each target's builder, `cuda`, `hip`; `locate`: the compilers and
headers of scripts/install-toolchains.sh, clang-22 + MORI headers and the CUDA 13.5
compiler wheels), and the builds `ccogen run` needs (`cubin`: kernels.cu -> cubin with
the system nvcc; `libraries`: the NCCL / NVSHMEM packages the process loads; `cache`: the
on-disk build cache).  Nothing here needs a GPU or imports the runtime (`ccogen.rt`,
which builds through this package).
"""

from __future__ import annotations

from ccogen.toolchains.build import BuildResult, build_dir

__all__ = ["BuildResult", "build_dir"]
