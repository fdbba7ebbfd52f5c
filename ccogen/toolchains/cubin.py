"""Compiling generated CUDA into cubins, cached on disk (see ccogen.toolchains.cache).

For the targets the runtime runs; what differs between them is data of their `Target`
(ccogen.targets): the engine library (`toolchain.library`) and its flags.

- A header-only device API (`nccl-lsa`): `nvcc -cubin -std=c++17 -arch=ARCH
  -I$NCCL/include kernels.cu` (plus a target's `toolchain.flags_when`: `--extended-lambda`
  when the source uses NCCL's reduce/copy helpers; plus the manifest's `nvcc_flags`).
- A library with a device library (`nvshmem`: `LibrarySpec.device_lib`): relocatable
  device code linked with the device library of the library loaded at run time:
  `nvcc -rdc=true -cubin ...` (a relocatable cubin: no host compilation, which was half
  of an `-rdc=true -c` object's time and which the device link discards) then
  `nvcc -dlink -cubin kernels.rdc.cubin $NV/lib/libnvshmem_device.a`.  The linked cubin
  is byte-identical to the one linked from an object (`tests/toolchains/test_rdc.py`);
  `CCOGEN_NVCC_RDC=object` builds through `nvcc -rdc=true -c` (an object) as before.

Debug builds add `-DCCOGEN_DEBUG=1` (bounded waits that fill the debug record, see
docs/runtime-abi.md).  Every build adds `-lineinfo` so compute-sanitizer and the debug
record name source lines.  A compile failure raises CompileError showing the compiler log,
the generated file and the protocol line (`// file.cco:LINE` comment) the error lies in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccogen.errors import CompileError, ToolchainError
from ccogen.manifest import load_manifest
from ccogen.targets import get_target
from ccogen.toolchains.cache import cache_key, cached_build
from ccogen.toolchains.libraries import (
    Library,
    engine_spec,
    find_library,
    find_nvcc,
    toolchain_inputs,
)

_LOG_LOCATION = re.compile(r"^(?P<file>[^\s:()]+)\((?P<line>\d+)\):\s*(?:error|catastrophic)",
                           re.MULTILINE)
_PROTOCOL_LINE = re.compile(r"//\s*(?P<file>[\w./-]+\.cco):(?P<line>\d+)")
_ARCH = re.compile(r"^sm_\d+[a-z]?$")
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"(?P<name>[^"/]+)"', re.MULTILINE)


@dataclass(frozen=True)
class BuildOptions:
    target: str
    arch: str = "sm_90"
    debug: bool = False
    spin_limit: int | None = None  # CCOGEN_TIMEOUT_CYCLES of debug waits (clock64 cycles)
    extra_flags: tuple[str, ...] = ()


def build_cubin(source: str | Path, target: str, arch: str = "sm_90", debug: bool = False,
                *, spin_limit: int | None = None, extra_flags: Sequence[str] = ()) -> Path:
    """Compile `source` (a manifest directory or a .cu file) for `target`; the cached cubin.

    A manifest directory contributes its `nvcc_flags`.  Raises ToolchainError when nvcc or
    the engine headers are missing and CompileError when nvcc fails.
    """
    path = Path(source)
    flags = list(extra_flags)
    if path.is_dir():
        manifest = load_manifest(path)
        if manifest.target != target:
            raise ToolchainError(f"{path}/manifest.json is for target {manifest.target}, "
                                 f"not {target}")
        flags = [*manifest.nvcc_flags, *flags]
        path = manifest.kernel_path
        debug = debug or manifest.debug
        for header in manifest.header_paths:
            if not header.is_file():
                raise ToolchainError(f"{header} does not exist (listed in "
                                     f"{manifest.directory}/manifest.json `headers`)")
    if not path.is_file():
        raise ToolchainError(f"{path} does not exist")
    options = BuildOptions(target=target, arch=arch, debug=debug, spin_limit=spin_limit,
                           extra_flags=tuple(flags))
    return _build(path, options)


def build_manifest_dir(directory: str | Path, arch: str | None = None,
                       debug: bool | None = None) -> Path:
    """What `ccogen build` does after generating: `<dir>/kernels.cubin` for the manifest."""
    manifest = load_manifest(directory)
    cubin = build_cubin(manifest.directory, manifest.target, arch or manifest.arch,
                        manifest.debug if debug is None else debug)
    out = manifest.directory / "kernels.cubin"
    shutil.copyfile(cubin, out)
    return out


RDC_MODES = ("cubin", "object")


def rdc_mode() -> str:
    """How relocatable device code is compiled before the device link: `cubin` (the
    default: `nvcc -rdc=true -cubin`) or `object` (`nvcc -rdc=true -c`), from
    `$CCOGEN_NVCC_RDC`.  Both link to the same bytes, so the cache key leaves it out."""
    mode = os.environ.get("CCOGEN_NVCC_RDC", "").strip() or "cubin"
    if mode not in RDC_MODES:
        raise ToolchainError(f"CCOGEN_NVCC_RDC must be one of {', '.join(RDC_MODES)}, "
                             f"not {mode!r}")
    return mode


def _check_arch(arch: str) -> None:
    if not _ARCH.match(arch):
        raise ToolchainError(f"arch must look like sm_90 or sm_90a, not {arch!r}")


def _defines(options: BuildOptions) -> list[str]:
    out = ["-lineinfo"]
    if options.debug:
        out.append("-DCCOGEN_DEBUG=1")
        if options.spin_limit is not None:
            out.append(f"-DCCOGEN_TIMEOUT_CYCLES={int(options.spin_limit)}ULL")
    return out


def compile_flags(text: str, library: Library, options: BuildOptions) -> list[str]:
    """The flags of the (first) compile step, without input and output."""
    flags = ["-std=c++17", f"-arch={options.arch}", f"-I{library.include}", *_defines(options)]
    for pattern, flag in get_target(options.target).toolchain.flags_when:
        if re.search(pattern, text):
            flags.append(flag)
    flags += [f for f in options.extra_flags if f not in flags]
    return flags


def _build(path: Path, options: BuildOptions) -> Path:
    _check_arch(options.arch)
    engine_spec(options.target)  # a target the runtime runs (ToolchainError otherwise)
    library = find_library(options.target)
    nvcc = find_nvcc()
    text = path.read_text(encoding="utf-8")
    headers = local_headers(path, text)
    flags = compile_flags(text, library, options)
    key = cache_key("cubin-v2", options.target, text, "\0".join(flags), *toolchain_inputs(nvcc),
                    library.version_text, str(library.root),
                    *(f"{h.name}\0{h.read_text(encoding='utf-8')}" for h in headers))

    def build(tmp: Path) -> dict[str, object]:
        # Compile a copy under its own name: line info and logs then name `kernels.cu`, not
        # a temporary path, so one cache entry serves every directory holding this text.
        stage_sources(tmp, path, headers)
        archive = library.spec.device_archive
        if archive is None:
            commands = [[str(nvcc), "-cubin", *flags, path.name, "-o", "kernels.cubin"]]
        else:
            device_lib = library.lib / archive
            if not device_lib.is_file():
                raise ToolchainError(f"{device_lib} is missing: the {library.spec.name} "
                                     f"package is incomplete (reinstall {library.spec.pip})")
            relocatable = ["-c", "kernels.o"] if rdc_mode() == "object" else \
                ["-cubin", "kernels.rdc.cubin"]
            commands = [
                [str(nvcc), "-rdc=true", relocatable[0], *flags, path.name,
                 "-o", relocatable[1]],
                [str(nvcc), f"-arch={options.arch}", "-dlink", "-cubin", relocatable[1],
                 str(device_lib), "-o", "kernels.cubin"],
            ]
        for command in commands:
            run_compiler(command, Path(tmp), path)
        return {"source": str(path), "target": options.target, "arch": options.arch,
                "library": library.describe(), "commands": commands}

    return cached_build("cubin", key, "kernels.cubin", build)


def stage_sources(tmp: Path, source: Path, headers: Sequence[Path]) -> None:
    """Copy `source` and the headers it includes from its own directory (ccogen_device.cuh)
    into `tmp`.  Line info records each file's modification time: the copies get a fixed
    one (0, as SOURCE_DATE_EPOCH would), so two builds of one text are byte-identical."""
    for file in (source, *headers):
        shutil.copyfile(file, tmp / file.name)
        os.utime(tmp / file.name, (0, 0))


def local_headers(path: Path, text: str) -> list[Path]:
    """The files beside `path` that its text includes with `#include "NAME"`, sorted."""
    names = sorted({m.group("name") for m in _LOCAL_INCLUDE.finditer(text)})
    return [path.parent / n for n in names if (path.parent / n).is_file()]


def run_compiler(command: Sequence[str | Path], cwd: Path, source: Path) -> str:
    """Run a compiler; its log, or CompileError with the log (and the protocol line)."""
    argv = [str(a) for a in command]
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise CompileError(f"{argv[0]} took more than 600 s on {source}", "", str(source)) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {argv[0]}: {exc}") from None
    log = (done.stderr + done.stdout).strip()
    if done.returncode != 0:
        raise CompileError(compile_error_message(log, source, argv), log, str(source))
    return log


def compile_error_message(log: str, source: Path, command: Sequence[str]) -> str:
    """The CompileError text: log, generated file, and the protocol line of the first error."""
    lines = [f"nvcc failed to compile {source}", ""]
    lines += ["  " + line for line in log.splitlines()[:60]]
    if len(log.splitlines()) > 60:
        lines.append(f"  ... {len(log.splitlines()) - 60} more lines")
    lines.append("")
    origin = protocol_origin(log, source)
    if origin is not None:
        lines.append(f"  = note: {source.name}:{origin[0]} was generated from {origin[1]}")
    lines.append(f"  = note: command: {' '.join(command)}")
    return "\n".join(lines)


def protocol_origin(log: str, source: Path) -> tuple[int, str] | None:
    """(line in source, `file.cco:LINE`) for the first error in `log` that points into source."""
    try:
        text = source.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for m in _LOG_LOCATION.finditer(log):
        if Path(m.group("file")).name != source.name:
            continue
        line = int(m.group("line"))
        for i in range(min(line, len(text)) - 1, -1, -1):
            found = _PROTOCOL_LINE.search(text[i])
            if found:
                return line, f"{found.group('file')}:{found.group('line')}"
        return None
    return None


def compile_text(text: str, target: str, arch: str = "sm_90", debug: bool = False,
                 headers: dict[str, str] | None = None) -> Path:
    """build_cubin for CUDA source given as text (written to a temporary kernels.cu, with
    `headers` (name -> text) beside it)."""
    with tempfile.TemporaryDirectory(prefix="ccogen-src-") as tmp:
        path = Path(tmp) / "kernels.cu"
        path.write_text(text, encoding="utf-8")
        for name, header in (headers or {}).items():
            (Path(tmp) / name).write_text(header, encoding="utf-8")
        return build_cubin(path, target, arch, debug)


__all__ = ["BuildOptions", "build_cubin", "build_manifest_dir", "compile_error_message",
           "compile_flags", "compile_text", "local_headers", "protocol_origin", "stage_sources"]
