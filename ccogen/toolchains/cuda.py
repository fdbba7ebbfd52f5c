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

The nccl-cft and nvshmem sm_100 builds go through the build cache (ccogen.toolchains.cache,
kind `cuda-build`): the key (`build_key`) is every input of the output bytes: the tag of
the build, the source text and the headers it includes from its own directory, every
compiler command line (flags, include paths, device library), the compiler's identity
(`toolchain_inputs`: path, `--version`, environment, host compiler, ccogen's build code)
and the library's version and location.  The entry is one tar of `kernels.cubin`,
`kernels.ptx` (copied into the directory) and the compilers' log (`BuildResult.log`: the
warnings of a successful build, the same whether cached or not); the checks on the PTX
run on every build, cached or not.  A failing compile leaves no entry: its error (and
log) comes from a real run.
"""

from __future__ import annotations

import tarfile
from collections.abc import Sequence
from pathlib import Path

from ccogen.errors import CompileError, ToolchainError
from ccogen.toolchains import locate
from ccogen.toolchains.build import BuildResult, arch_number
from ccogen.toolchains.cache import cache_key, cached_build
from ccogen.toolchains.cubin import local_headers, run_compiler, stage_sources
from ccogen.toolchains.libraries import toolchain_inputs

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


_OUTPUTS = ("kernels.cubin", "kernels.ptx")
_LOG = "compiler.log"
_ARCHIVE = "outputs.tar"
Command = Sequence[str | Path]


def build_key(tag: str, source: Path, commands: Sequence[Command], nvcc: Path,
              library: str) -> str:
    """The cache key of a build: `tag`, the source and its local headers, every command
    line, the compiler (`toolchain_inputs`) and `library` (its version and location)."""
    text = source.read_text(encoding="utf-8")
    headers = local_headers(source, text)
    return cache_key(tag, text, *(f"{h.name}\0{h.read_text(encoding='utf-8')}" for h in headers),
                     *("\0".join(map(str, c)) for c in commands), *toolchain_inputs(nvcc),
                     library)


def cached_nvcc_run(tag: str, directory: Path, commands: Sequence[Command], nvcc: Path,
                    library: str) -> tuple[str, str]:
    """Run `commands` (in a private copy of `directory/kernels.cu` and its local headers,
    `--keep`ing the PTX in it), or take their cached outputs; write `kernels.cubin` and
    `kernels.ptx` into `directory` and return the PTX text and the compilers' log."""
    source = directory / "kernels.cu"

    def build(tmp: Path) -> dict[str, object]:
        stage_sources(tmp, source, local_headers(source, source.read_text(encoding="utf-8")))
        logs = [run_compiler(command, tmp, source) for command in commands]
        (tmp / _LOG).write_text("\n".join(log for log in logs if log), encoding="utf-8")
        ptx = next(iter(sorted(tmp.glob("*.ptx"))), None)
        if ptx is None:
            raise CompileError(f"nvcc left no PTX for {source}")
        with tarfile.open(tmp / _ARCHIVE, "w") as tar:
            tar.add(tmp / "kernels.cubin", "kernels.cubin")
            tar.add(ptx, "kernels.ptx")
            tar.add(tmp / _LOG, _LOG)
        return {"source": str(source), "commands": [list(map(str, c)) for c in commands],
                "library": library}

    archive = cached_build("cuda-build", build_key(tag, source, commands, nvcc, library),
                           _ARCHIVE, build)
    texts: dict[str, str] = {}
    with tarfile.open(archive) as tar:
        for name in (*_OUTPUTS, _LOG):  # only these names are read: nothing is extracted
            member = tar.extractfile(name)
            if member is None:
                raise CompileError(f"{archive} lacks {name}")
            data = member.read()
            if name in _OUTPUTS:
                (directory / name).write_bytes(data)
            texts[name] = data.decode("utf-8", errors="replace")
    return texts["kernels.ptx"], texts[_LOG]


def build_cft(directory: Path, manifest: dict[str, object], debug: bool,
              extra_flags: tuple[str, ...] = ()) -> BuildResult:
    """`extra_flags`: more nvcc flags (the tests add `-Werror all-warnings`)."""
    target = str(manifest["target"])
    nvcc, version = _nvcc_cft()
    nccl = locate.find_build_library(target)  # NCCL >= 2.31: the prefix's, else the package
    arch = str(manifest["arch"])
    source = directory / "kernels.cu"
    command: list[str | Path] = [
        nvcc, "-cubin", "-std=c++17", f"-arch={arch}", f"-I{nccl.include}", "-lineinfo",
        *(["-DCCOGEN_DEBUG=1"] if debug else []), *extra_flags, "--keep", source.name,
        "-o", "kernels.cubin"]
    ptx, log = cached_nvcc_run("nccl-cft-v1", directory, [command], nvcc,
                      f"{nccl.version_text}\0{nccl.root}")
    fabric = ptx.count("fabric.")
    if fabric == 0:
        raise CompileError(f"{source}: the PTX has no `fabric.` instruction, so every CFT call "
                           f"became an assert(false) stub; {version} with {nccl.describe()} "
                           f"for {arch} did not enable CFT (needs CUDA >= 13.3 and sm_100)")
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    return BuildResult(target, directory, outputs,
                       [version, nccl.describe()],
                       [f"PTX has {fabric} `fabric.` instructions "
                        f"({ptx.count('counted::bytes')} counted)"], log)


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
    # A relocatable cubin, not an object (`-c`): no host compilation, which the device
    # link discards; the same PTX and linked cubin bytes, in ~60% of the CPU time.
    commands: list[Command] = [
        [nvcc, "-rdc=true", "-cubin", "-std=c++17", f"-arch={arch}", f"-I{nv.include}",
         "-lineinfo", *defines, *(["-DCCOGEN_DEBUG=1"] if debug else []), "--keep", source.name,
         "-o", "kernels.rdc.cubin"],
        [nvcc, f"-arch={arch}", "-dlink", "-cubin", "kernels.rdc.cubin", device_lib,
         "-o", "kernels.cubin"],
    ]
    ptx, log = cached_nvcc_run("nvshmem-sm100-v1", directory, commands, nvcc,
                      f"{nv.version_text}\0{nv.root}")
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    result = BuildResult(target, directory, outputs, [version, nv.describe()], log=log)
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


__all__ = ["build_cft", "build_key", "build_nvshmem", "build_nvshmem_sm100",
           "build_runtime_cubin", "cached_nvcc_run", "counted_supported"]
