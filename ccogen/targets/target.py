"""One `Target` per backend: everything the compiler, the builder and the runtime need.

A target is frozen data: its capability table (read by the checks), the code generator
and the `ccogen build` recipe named by import path (`"module:attribute"`, resolved by the
code generator and the toolchains: this package imports neither), the engine library its
code compiles against, and — for the targets `ccogen run` / `ccogen bench` can run here —
the engine rules (host shim, kernel parameters, device communicator, module
registration, heap sizing).  Build and run code reads these fields; it never compares a
target's name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ccogen.targets.base import Capabilities


class VersionRule(Enum):
    """Which library the process may load, given the headers the code was compiled with."""

    # NCCL: before 2.29 `ncclDevComm` changes layout between releases (demand the same
    # version); from 2.29 on a newer library keeps the device ABI of older headers.
    NCCL_DEVCOMM = "nccl-devcomm"
    # NVSHMEM: the same major version, a minor.patch at least the headers'.
    SAME_MAJOR = "same-major"


NCCL_STABLE_DEVCOMM = 22900  # NCCL_VERSION_CODE of 2.29.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LibrarySpec:
    """One engine library (NCCL, NVSHMEM): where its headers come from, which versions do.

    The headers that compile kernels and host shims are those of the library loaded at
    run time (ccogen.toolchains.libraries finds both in one place).
    """

    name: str            # NCCL | NVSHMEM
    module: str          # the Python package that ships it
    pip: str             # its pip distribution
    env: str             # a directory overriding the package (include/ and lib/)
    header: str          # the header defining the version, relative to include/
    version_macros: tuple[str, str, str]
    minimum: tuple[int, int, int]
    runtime_lib: str     # the shared library loaded at run time
    version_rule: VersionRule
    device_lib: str | None = None  # a static device library to link (`-l` name): the
                                   # code is then relocatable (-rdc) and device-linked

    @property
    def device_archive(self) -> str | None:
        """The file name of `device_lib` (`libnvshmem_device.a`)."""
        return None if self.device_lib is None else f"lib{self.device_lib}.a"

    def loads(self, header: int, loaded: int) -> bool:
        """Whether a process that loaded version code `loaded` may run code built against
        headers of version code `header` (codes: major*10000 + minor*100 + patch)."""
        if self.version_rule is VersionRule.NCCL_DEVCOMM:
            return loaded == header if header < NCCL_STABLE_DEVCOMM else loaded >= header
        return loaded // 10000 == header // 10000 and loaded % 10000 >= header % 10000


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolchain:
    """How the generated files are compiled.

    `builder` ("module:function") builds a generated directory for `ccogen build`:
    `(directory, manifest, debug) -> BuildResult` (ccogen.toolchains).  `library` is the
    engine library whose headers the code includes (None: found by the builder itself,
    e.g. MORI's).  `flags_when` adds a compiler flag when the source matches a pattern.
    """

    builder: str
    library: LibrarySpec | None = None
    flags_when: tuple[tuple[str, str], ...] = ()  # (regular expression, flag)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeapRule:
    """How the engine learns the size of the symmetric heap before it bootstraps."""

    env: str | None = None  # a variable the engine reads at init
    above: int = 0          # set only for heaps larger than this (the engine's default)
    headroom: int = 0       # bytes added for the engine's own allocations

    def environment(self, heap_size: int) -> dict[str, str]:
        """The variables to set (when not set already) for a heap of `heap_size` bytes."""
        if self.env is None or heap_size <= self.above:
            return {}
        return {self.env: str((heap_size + self.headroom) >> 20 << 20)}


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSpec:
    """How ccogen's runtime runs a target's code (docs/runtime.md, docs/runtime-abi.md).

    `shim`: the host shim's source in runtime/engines (one C ABI for every engine);
    `kernel_params`: the parameter kinds its kernels may take; `devcomm`: the engine
    makes a device communicator (its barriers are counted in the manifest);
    `registers_modules`: every loaded module is registered with the engine before a
    launch (`nvshmemx_cumodule_init`) and unregistered before it is unloaded;
    `ranks_share_gpu`: several ranks may run on one GPU (under CUDA MPS; NCCL refuses two
    ranks of one communicator on one GPU), ccogen.rt.placement.
    """

    shim: str
    kernel_params: frozenset[str]
    devcomm: bool = False
    registers_modules: bool = False
    heap: HeapRule = HeapRule()
    ranks_share_gpu: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One backend: capabilities, code generator, toolchain and (if runnable) engine."""

    name: str
    capabilities: Capabilities
    codegen: str  # "module:Class" of the code generator (a ccogen.codegen Backend)
    toolchain: Toolchain
    engine: EngineSpec | None = None  # None: `ccogen run` / `ccogen bench` cannot run it

    @property
    def runnable(self) -> bool:
        return self.engine is not None


def resolve(reference: str) -> Any:
    """The object a `"module:attribute"` reference names (imported on first use)."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = ["EngineSpec", "HeapRule", "LibrarySpec", "Target", "Toolchain", "VersionRule",
           "resolve"]
