"""Build generated code with the real compilers (no GPU): what `ccogen build` runs.

- `mori-sdma`: clang-22 without ROCm (docs/reference/apis.md, MORI): one linked code object
  per arch (`--offload-arch=gfx942|gfx950 --cuda-device-only --no-gpu-bundle-output
  -nogpuinc -nogpulib`, ccogen's `hip/hip_runtime.h` stand-in first on the include path),
  checked to be an AMDGPU ELF for that arch holding every kernel's descriptor; a
  host+device `-fsyntax-only` pass; and the host entry compiled as plain C++ (`host.o`).
  `--debug` adds `-DMORI_CCO_SDMA_DEBUG`.
- `nccl-cft`: nvcc >= 13.3 `-cubin -arch=sm_100` against NCCL >= 2.31 headers, keeping
  the PTX: the build fails unless it contains `fabric.` instructions (older toolkits
  compile CFT calls to `assert(false)` stubs without a word).
- `nvshmem` at sm_100 or later: nvcc >= 13.3, `-rdc` compile and `-dlink -cubin` with
  `libnvshmem_device.a`.  "The headers support counted writes" means NVSHMEM >= 3.8
  whose `host/nvshmemx_api.h` declares `nvshmemx_putmem_signal_counted_nbi_block`; the
  declarations sit behind `NVSHMEM_CFT_HANDLES_SUPPORT` (off in the pip wheels), which
  the build then defines.  A counted protocol built that way must show counted fabric
  instructions in its PTX; otherwise it builds the `NVSHMEM_SIGNAL_ADD` emulation and
  says so.
- `nccl-lsa`, `nvshmem` below sm_100: the runtime's cubin builder
  (`ccogen.rt.build.build_manifest_dir`, the system nvcc).
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccogen.rt.build import run_compiler
from ccogen.rt.errors import CompileError, ToolchainError
from ccogen.toolchains import locate

EM_AMDGPU = 224
AMDGPU_MACH = {"gfx942": 0x4C, "gfx950": 0x4F}
MIN_NCCL_CFT = (2, 31, 0)
MIN_NVSHMEM_COUNTED = (3, 8, 0)
COUNTED_DECL = "nvshmemx_putmem_signal_counted_nbi_block"


@dataclass
class BuildResult:
    """What one build produced, with which tools, and what it checked."""

    target: str
    directory: Path
    outputs: list[Path] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"built {self.target} in {self.directory}"]
        lines += [f"  {p.name}" for p in self.outputs]
        lines += [f"  = tool: {t}" for t in self.tools]
        lines += [f"  = note: {n}" for n in self.notes]
        return "\n".join(lines)


def load(directory: Path) -> dict[str, object]:
    path = directory / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise ToolchainError(f"cannot read {path}: {exc}") from None


def arch_number(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


# ============================================================================= mori-sdma


def check_code_object(path: Path, arch: str, symbols: Sequence[str]) -> None:
    """An AMDGPU ELF for `arch` with every kernel's `.kd` descriptor."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or struct.unpack_from("<H", data, 18)[0] != EM_AMDGPU:
        raise CompileError(f"{path} is not an AMDGPU ELF code object")
    mach = struct.unpack_from("<I", data, 48)[0] & 0xFF
    if mach != AMDGPU_MACH[arch]:
        raise CompileError(f"{path}: e_flags mach {mach:#x}, expected "
                           f"{AMDGPU_MACH[arch]:#x} ({arch})")
    missing = [s for s in symbols if f"{s}.kd".encode() not in data]
    if missing:
        raise CompileError(f"{path} lacks the kernel descriptor(s) of {', '.join(missing)}")


def build_hip(directory: Path, manifest: dict[str, object], debug: bool) -> BuildResult:
    clang, include = locate.find_clang(), locate.find_mori_include()
    source = directory / "kernels.hip"
    flags = ["-x", "hip", "-std=c++17", "-nogpuinc", "-nogpulib", f"-I{locate.SHIM}",
             f"-I{include}", *(["-DMORI_CCO_SDMA_DEBUG"] if debug else [])]
    symbols = [k["symbol"] for k in manifest["kernels"]]  # type: ignore[attr-defined, index]
    result = BuildResult("mori-sdma", directory,
                         tools=[locate.tool_version(clang), f"MORI headers {include}"])
    for arch in manifest["arch"]:  # type: ignore[attr-defined]
        out = directory / f"kernels.{arch}.hsaco"
        run_compiler([clang, *flags, f"--offload-arch={arch}", "--cuda-device-only",
             "--no-gpu-bundle-output", "-O2", "-c", source.name, "-o", out.name], directory, source)
        check_code_object(out, arch, symbols)
        result.outputs.append(out)
    run_compiler([clang, *flags, "--offload-arch=gfx942", "-fsyntax-only", source.name],
                 directory, source)
    host = directory / "host.cpp"
    run_compiler([locate.find_clangxx(clang), "-std=c++17", "-O2", "-fPIC", f"-I{include}", "-c",
         host.name, "-o", "host.o"], directory, host)
    result.outputs.append(directory / "host.o")
    result.notes.append(f"code objects checked: AMDGPU ELF per arch with {len(symbols)} kernel "
                        "descriptor(s); host and device passes type-check")
    return result


# ============================================================================= CUDA, sm_100


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


def build_cft(directory: Path, manifest: dict[str, object], debug: bool) -> BuildResult:
    from ccogen.rt.toolchain import find_library

    nvcc, version = _nvcc_cft()
    nccl = find_library("nccl-lsa")
    if nccl.version < MIN_NCCL_CFT:
        raise ToolchainError(f"{nccl.describe()} has no CFT: nccl-cft needs NCCL >= 2.31 "
                             "(`pip install -U nvidia-nccl-cu13`)")
    arch = str(manifest["arch"])
    source = directory / "kernels.cu"
    with tempfile.TemporaryDirectory(prefix="ccogen-cft-") as tmp:
        run_compiler([nvcc, "-cubin", "-std=c++17", f"-arch={arch}", f"-I{nccl.include}",
                      "-lineinfo", *(["-DCCOGEN_DEBUG=1"] if debug else []), "--keep",
                      "--keep-dir", tmp, source.name, "-o", "kernels.cubin"], directory, source)
        ptx = _keep_ptx(Path(tmp), directory)
    fabric = ptx.count("fabric.")
    if fabric == 0:
        raise CompileError(f"{source}: the PTX has no `fabric.` instruction, so every CFT call "
                           f"became an assert(false) stub; {version} with {nccl.describe()} "
                           f"for {arch} did not enable CFT (needs CUDA >= 13.3 and sm_100)")
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    return BuildResult("nccl-cft", directory, outputs,
                       [version, nccl.describe()],
                       [f"PTX has {fabric} `fabric.` instructions "
                        f"({ptx.count('counted::bytes')} counted)"])


def counted_supported(include: Path, version: tuple[int, int, int]) -> bool:
    """NVSHMEM headers that declare the counted-write API (behind NVSHMEM_CFT_HANDLES_SUPPORT)."""
    api = include / "host" / "nvshmemx_api.h"
    return (version >= MIN_NVSHMEM_COUNTED and api.is_file()
            and COUNTED_DECL in api.read_text(encoding="utf-8", errors="replace"))


def build_nvshmem_sm100(directory: Path, manifest: dict[str, object], debug: bool) -> BuildResult:
    from ccogen.rt.toolchain import find_library

    nvcc, version = _nvcc_cft()
    nv = find_library("nvshmem")
    device_lib = nv.lib / "libnvshmem_device.a"
    if not device_lib.is_file():
        raise ToolchainError(f"{device_lib} is missing (reinstall nvidia-nvshmem-cu13)")
    arch = str(manifest["arch"])
    native = counted_supported(nv.include, nv.version)
    counted = any(k.get("shared_mem", 0) for k in manifest["kernels"])  # type: ignore[attr-defined]
    source = directory / "kernels.cu"
    defines = ["-DNVSHMEM_CFT_HANDLES_SUPPORT"] if native else []
    with tempfile.TemporaryDirectory(prefix="ccogen-nvshmem-") as tmp:
        run_compiler([nvcc, "-rdc=true", "-c", "-std=c++17", f"-arch={arch}", f"-I{nv.include}",
             "-lineinfo", *defines, *(["-DCCOGEN_DEBUG=1"] if debug else []), "--keep",
             "--keep-dir", tmp, source.name, "-o", str(Path(tmp) / "kernels.o")], directory, source)
        ptx = _keep_ptx(Path(tmp), directory)
        run_compiler([nvcc, f"-arch={arch}", "-dlink", "-cubin", str(Path(tmp) / "kernels.o"),
             str(device_lib), "-o", "kernels.cubin"], directory, source)
    outputs = [directory / "kernels.cubin", directory / "kernels.ptx"]
    result = BuildResult("nvshmem", directory, outputs,
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


# ============================================================================= dispatch


def build_dir(directory: str | Path, debug: bool | None = None) -> BuildResult:
    """Build what `ccogen compile` wrote in `directory` for its manifest's target."""
    path = Path(directory)
    manifest = load(path)
    target = manifest.get("target")
    dbg = bool(manifest.get("debug")) if debug is None else debug
    if target == "mori-sdma":
        return build_hip(path, manifest, dbg)
    if target == "nccl-cft":
        return build_cft(path, manifest, dbg)
    if target == "nvshmem" and arch_number(str(manifest.get("arch", ""))) >= 100:
        return build_nvshmem_sm100(path, manifest, dbg)
    if target in ("nccl-lsa", "nvshmem"):
        from ccogen.rt.build import build_manifest_dir

        cubin = build_manifest_dir(path, debug=dbg)
        return BuildResult(str(target), path, [cubin], ["nvcc (system; ccogen.rt.build)"])
    raise ToolchainError(f"{path}/manifest.json names target {target!r}, which ccogen cannot build")


__all__ = ["BuildResult", "build_cft", "build_dir", "build_hip", "build_nvshmem_sm100",
           "check_code_object", "counted_supported"]
