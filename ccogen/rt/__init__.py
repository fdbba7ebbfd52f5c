"""The GPU runtime: build generated CUDA (through `ccogen.toolchains`), bootstrap NCCL / NVSHMEM,
run, check `ensure`.

- `build_cubin(dir_or_cu, target, arch, debug)` — nvcc with an on-disk cache (no GPU needed:
  `ccogen.toolchains.cubin`);
- `run(protocol, target=..., ranks=..., params=..., iters=...)` — generate, build, launch
  one process per GPU, check every `ensure` on real data every epoch, time the kernels;
- `run_manifest(dir, instance, ...)` — the same for already generated files.

Design and operation: docs/runtime.md; the contract with generated code: docs/runtime-abi.md.
Importing this package needs neither a GPU nor numpy; running does.
"""

from __future__ import annotations

from ccogen.errors import (
    CompileError,
    EngineError,
    LibraryVersionError,
    ManifestError,
    NoGpuError,
    NotEnoughGpusError,
    RunError,
    ToolchainError,
)
from ccogen.manifest import Manifest, load_manifest
from ccogen.rt.api import run
from ccogen.rt.launch import run as run_manifest
from ccogen.rt.placement import Placement, ResidencyError
from ccogen.rt.report import RankResult, RunReport
from ccogen.toolchains.cubin import build_cubin, build_manifest_dir

__all__ = [
    "CompileError",
    "EngineError",
    "LibraryVersionError",
    "Manifest",
    "ManifestError",
    "NoGpuError",
    "NotEnoughGpusError",
    "Placement",
    "RankResult",
    "ResidencyError",
    "RunError",
    "RunReport",
    "ToolchainError",
    "build_cubin",
    "build_manifest_dir",
    "load_manifest",
    "run",
    "run_manifest",
]
