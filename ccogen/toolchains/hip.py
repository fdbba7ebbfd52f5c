"""The `mori-sdma` build: clang-22 HIP code objects (docs/reference/apis.md, MORI: building
without ROCm).

One linked code object per arch (`--offload-arch=gfx942|gfx950 --cuda-device-only
--no-gpu-bundle-output -nogpuinc -nogpulib`, ccogen's `hip/hip_runtime.h` stand-in first
on the include path), checked to be an AMDGPU ELF for that arch holding every kernel's
descriptor; a host+device `-fsyntax-only` pass; and the host entry compiled as plain C++
(`host.o`).  `--debug` adds `-DMORI_CCO_SDMA_DEBUG`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

from ccogen.errors import CompileError
from ccogen.toolchains import locate
from ccogen.toolchains.build import BuildResult
from ccogen.toolchains.cubin import run_compiler

EM_AMDGPU = 224
AMDGPU_MACH = {"gfx942": 0x4C, "gfx950": 0x4F}


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
    result = BuildResult(str(manifest["target"]), directory,
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


__all__ = ["AMDGPU_MACH", "build_hip", "check_code_object"]
