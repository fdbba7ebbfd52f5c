"""CUDA builds for `ccogen build` (no GPU needed).

- `nccl-cft`: nvcc >= 13.3 `-cubin -arch=sm_100` against NCCL >= 2.31 headers, keeping
  the PTX: the build fails unless it contains `fabric.` instructions (older toolkits
  compile CFT calls to `assert(false)` stubs without a word).
- `nvshmem` at sm_100 or later: nvcc >= 13.3, `-rdc=true -cubin` (a relocatable cubin:
  no host compilation) and `-dlink -cubin` with `libnvshmem_device.a`.  "The headers
  support counted writes" means NVSHMEM >= 3.8 whose `host/nvshmemx_api.h` declares
  `nvshmemx_putmem_signal_counted_nbi_block`; the declarations sit behind
  `NVSHMEM_CFT_HANDLES_SUPPORT` (off in the pip wheels), which the build then defines.
  A counted protocol built that way must show counted fabric instructions in its PTX;
  otherwise it builds the `NVSHMEM_SIGNAL_ADD` emulation and says so.
- `nccl-lsa`, `nvshmem` below sm_100: the runtime's cubin builder
  (`ccogen.toolchains.cubin.build_manifest_dir`, the system nvcc).

Each builder takes the target from the manifest and its engine library from the target
(`Target.toolchain.library`: NCCL >= 2.31 for nccl-cft).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ccogen.errors import CompileError, ToolchainError
from ccogen.toolchains import locate
from ccogen.toolchains.build import BuildResult, arch_number
from ccogen.toolchains.cubin import run_compiler

MIN_NVSHMEM_COUNTED = (3, 8, 0)
COUNTED_DECL = "nvshmemx_putmem_signal_counted_nbi_block"
FIRST_FABRIC_ARCH = 100  # sm_100: CFT and NVSHMEM's counted writes


def _nvcc_cft() -> tuple[Path, str]:
    nvcc = locate.find_nvcc_cft()
    release = locate.nvcc_release(nvcc)
    if release < locate.MIN_CFT_CUDA:
        need = ".".join(map(str, locate.MIN_CFT_CUDA))
        raise ToolchainError(f"{nvcc} is CUDA {release[0]}.{release[1]}: sm_100 CFT code needs "
                             f"nvcc >= {need} (older ones emit assert(false) stubs); run "
                             f"`{locate.INSTALL}` or set CCOGEN_NVCC_CFT")
    return nvcc, locate.tool_version(nvcc)


def _keep_ptx(tmp: Path, directory: Path) -> str:
    ptx = next(iter(sorted(tmp.glob("*.ptx"))), None)
    if ptx is None:
        raise CompileError(f"nvcc left no PTX in {tmp}")
    shutil.copyfile(ptx, directory / "kernels.ptx")
    return ptx.read_text(encoding="utf-8", errors="replace")


def build_cft(directory: Path, manifest: dict[str, object], debug: bool,
              extra_flags: tuple[str, ...] = ()) -> BuildResult:
    """`extra_flags`: more nvcc flags (the tests add `-Werror all-warnings`)."""
    target = str(manifest["target"])
    nvcc, version = _nvcc_cft()
    nccl = locate.find_build_library(target)  # NCCL >= 2.31: the prefix's, else the package
    arch = str(manifest["arch"])
    source = directory / "kernels.cu"
    with tempfile.TemporaryDirectory(prefix="ccogen-cft-") as tmp:
        run_compiler([nvcc, "-cubin", "-std=c++17", f"-arch={arch}", f"-I{nccl.include}",
                      "-lineinfo", *(["-DCCOGEN_DEBUG=1"] if debug else []), *extra_flags, "--keep",
                      "--keep-dir", tmp, source.name, "-o", "kernels.cubin"], directory, source)
        ptx = _keep_ptx(Path(tmp), directory)
    fabric = ptx.count("fabric.")
    if fabric == 0:
        raise CompileError(f"{source}: the PTX has no `fabric.` instruction, so every CFT call "
                           f"became an assert(false) stub; {version} with {nccl.describe()} "
                           f"for {arch} did not enable CFT (needs CUDA >= 13.3 and sm_100)")
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    return BuildResult(target, directory, outputs,
                       [version, nccl.describe()],
                       [f"PTX has {fabric} `fabric.` instructions "
                        f"({ptx.count('counted::bytes')} counted)"])


def counted_supported(include: Path, version: tuple[int, int, int]) -> bool:
    """NVSHMEM headers that declare the counted-write API (behind NVSHMEM_CFT_HANDLES_SUPPORT)."""
    api = include / "host" / "nvshmemx_api.h"
    return (version >= MIN_NVSHMEM_COUNTED and api.is_file()
            and COUNTED_DECL in api.read_text(encoding="utf-8", errors="replace"))


def build_nvshmem_sm100(directory: Path, manifest: dict[str, object], debug: bool) -> BuildResult:
    target = str(manifest["target"])
    nvcc, version = _nvcc_cft()
    nv = locate.find_build_library(target)  # 3.8 (counted writes): the prefix's first
    device_lib = nv.lib / str(nv.spec.device_archive)
    if not device_lib.is_file():
        raise ToolchainError(f"{device_lib} is missing (reinstall {nv.spec.pip})")
    arch = str(manifest["arch"])
    native = counted_supported(nv.include, nv.version)
    counted = any(k.get("shared_mem", 0) for k in manifest["kernels"])  # type: ignore[attr-defined]
    source = directory / "kernels.cu"
    defines = ["-DNVSHMEM_CFT_HANDLES_SUPPORT"] if native else []
    with tempfile.TemporaryDirectory(prefix="ccogen-nvshmem-") as tmp:
        # A relocatable cubin, not an object (`-c`): no host compilation, which the device
        # link discards; the same PTX and linked cubin bytes, in ~60% of the CPU time.
        relocatable = str(Path(tmp) / "kernels.rdc.cubin")
        run_compiler([nvcc, "-rdc=true", "-cubin", "-std=c++17", f"-arch={arch}",
             f"-I{nv.include}", "-lineinfo", *defines, *(["-DCCOGEN_DEBUG=1"] if debug else []),
             "--keep", "--keep-dir", tmp, source.name, "-o", relocatable], directory, source)
        ptx = _keep_ptx(Path(tmp), directory)
        run_compiler([nvcc, f"-arch={arch}", "-dlink", "-cubin", relocatable,
             str(device_lib), "-o", "kernels.cubin"], directory, source)
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    result = BuildResult(target, directory, outputs,
                         [version, nv.describe()])
    if counted and native:
        if "counted::bytes" not in ptx:
            raise CompileError(f"{source}: NVSHMEM {nv.version_text} declares counted writes, but "
                               "the PTX has no counted fabric instruction: the native path did "
                               f"not compile ({version}, {arch})")
        result.notes.append(f"counted writes: native (nvshmemx_putmem_signal_counted_nbi_block; "
                            f"{ptx.count('counted::bytes')} counted fabric instructions)")
    elif counted:
        result.notes.append(f"counted writes: NVSHMEM_SIGNAL_ADD emulation ({nv.describe()} does "
                            "not declare the counted-write API)")
    return result


def build_runtime_cubin(directory: Path, manifest: dict[str, object], debug: bool
                        ) -> BuildResult:
    """The cubin `ccogen run` would build (the system nvcc), copied into `directory`."""
    from ccogen.toolchains.cubin import build_manifest_dir

    cubin = build_manifest_dir(directory, debug=debug)
    return BuildResult(str(manifest["target"]), directory, [cubin],
                       ["nvcc (system; ccogen.toolchains.cubin)"])


def build_nvshmem(directory: Path, manifest: dict[str, object], debug: bool) -> BuildResult:
    """sm_100 and later: the CFT-capable nvcc (counted writes); below: the runtime's build."""
    if arch_number(str(manifest.get("arch", ""))) >= FIRST_FABRIC_ARCH:
        return build_nvshmem_sm100(directory, manifest, debug)
    return build_runtime_cubin(directory, manifest, debug)


__all__ = ["build_cft", "build_nvshmem", "build_nvshmem_sm100", "build_runtime_cubin",
           "counted_supported"]
