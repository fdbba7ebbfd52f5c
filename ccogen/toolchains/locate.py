"""Where the seed targets' toolchains are (installed by scripts/install-toolchains.sh).

- clang for HIP: `$CCOGEN_CLANG`, else `clang-22` on PATH (Debian `clang-22` + `lld-22`).
- MORI headers: `$CCOGEN_MORI_INCLUDE`, else `<toolchains>/mori-1.2.4/include` (the include
  tree of the `amd-mori` 1.2.4 wheel).
- nvcc >= 13.3 for sm_100 CFT code: `$CCOGEN_NVCC_CFT`, else
  `<toolchains>/cuda-13.5.37/nvidia/cu13/bin/nvcc` (the CUDA 13.5 wheels), else `nvcc` on
  PATH when it is new enough.
- NCCL / NVSHMEM headers for `ccogen build` (`find_build_library`): `$CCOGEN_NCCL_HOME` /
  `$CCOGEN_NVSHMEM_HOME` when set, else `<toolchains>/nccl-2.32.3/nvidia/nccl` and
  `<toolchains>/nvshmem-3.8.0/nvidia/nvshmem` (the wheels, installed there with
  `--no-deps`), else the Python packages (`ccogen.toolchains.libraries.find_library`, the
  `toolchain` extra).  The prefix comes before the environment's packages because torch
  pins older ones (torch 2.14.1: `nvidia-nccl-cu13==2.30.7`, `nvidia-nvshmem-cu13==3.4.5`):
  `pip install -e '.[torch]'` downgrades them below what nccl-cft (NCCL >= 2.31) and
  NVSHMEM's counted writes (3.8) need, and the builds must not depend on that.  What
  `ccogen run` loads is the environment's (toolchains.libraries), which must match the library
  the process loads, not the prefix.

`<toolchains>` is `$CCOGEN_TOOLCHAINS`, else `~/.cache/ccogen/toolchains`.  A missing tool
raises `ToolchainError` saying how to install it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from ccogen.errors import LibraryVersionError, ToolchainError

if TYPE_CHECKING:
    from ccogen.toolchains.libraries import Library

INSTALL = "bash scripts/install-toolchains.sh"
MORI_VERSION = "1.2.4"
CUDA_VERSION = "13.5.37"
MIN_CFT_CUDA = (13, 3)
SHIM = Path(__file__).resolve().parent / "hip_shim"


def toolchains_root() -> Path:
    explicit = os.environ.get("CCOGEN_TOOLCHAINS", "").strip()
    return Path(explicit) if explicit else Path.home() / ".cache" / "ccogen" / "toolchains"


def _override(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not Path(value).exists():
        raise ToolchainError(f"{name}={value} does not exist")
    return Path(value)


def find_clang() -> Path:
    """clang >= 22 (gfx950 needs it; clang-19 rejects `gfx950`)."""
    found = _override("CCOGEN_CLANG") or shutil.which("clang-22")
    if found is None:
        raise ToolchainError("clang-22 not found: the mori-sdma build needs Debian's clang-22 "
                             f"and lld-22 (`apt-get install clang-22 lld-22`, or `{INSTALL}`), "
                             "or set CCOGEN_CLANG")
    return Path(found)


def find_clangxx(clang: Path) -> Path:
    """The C++ driver beside `clang` (for the plain C++ host entry)."""
    name = clang.name.replace("clang", "clang++", 1)
    candidate = clang.with_name(name)
    return candidate if candidate.exists() else clang


def find_mori_include() -> Path:
    default = toolchains_root() / f"mori-{MORI_VERSION}" / "include"
    root = _override("CCOGEN_MORI_INCLUDE") or default
    if not (root / "mori" / "cco" / "cco.hpp").is_file():
        raise ToolchainError(f"MORI headers not found ({root}/mori/cco/cco.hpp): run `{INSTALL}` "
                             f"(unpacks the amd-mori {MORI_VERSION} wheel's headers) or set "
                             "CCOGEN_MORI_INCLUDE")
    return root


def find_nvcc_cft() -> Path:
    """An nvcc that emits real CFT code (CUDA >= 13.3)."""
    explicit = _override("CCOGEN_NVCC_CFT")
    if explicit is not None:
        return explicit
    wheel = toolchains_root() / f"cuda-{CUDA_VERSION}" / "nvidia" / "cu13" / "bin" / "nvcc"
    if wheel.is_file():
        return wheel
    found = shutil.which("nvcc")
    if found is not None and nvcc_release(Path(found)) >= MIN_CFT_CUDA:
        return Path(found)
    need = ".".join(map(str, MIN_CFT_CUDA))
    raise ToolchainError(f"no nvcc >= {need} found (sm_100 CFT code; an older nvcc turns every "
                         f"CFT call into an assert(false) stub): run `{INSTALL}` (the CUDA "
                         f"{CUDA_VERSION} compiler wheels) or set CCOGEN_NVCC_CFT")


# the engine wheels install-toolchains.sh puts in the prefix: (dir name, package path)
ENGINE_WHEELS: dict[str, tuple[str, str]] = {
    "NCCL": ("nccl-2.32.3", "nvidia/nccl"),
    "NVSHMEM": ("nvshmem-3.8.0", "nvidia/nvshmem"),
}


def prefix_library_root(name: str) -> Path | None:
    """`<toolchains>/<dir>/<package>` of engine library `name` (`NCCL`), None if none."""
    wheel = ENGINE_WHEELS.get(name)
    return None if wheel is None else toolchains_root() / wheel[0] / wheel[1]


def find_build_library(target: str) -> Library:
    """The NCCL / NVSHMEM headers `ccogen build` compiles `target` against: the explicit
    `$CCOGEN_*_HOME`, else the toolchains prefix, else the Python package (module
    docstring); `ToolchainError` / `LibraryVersionError` saying how to get them."""
    from ccogen.toolchains.libraries import Library, find_library, library_spec, parse_version

    spec = library_spec(target)
    if not os.environ.get(spec.env, "").strip():
        root = prefix_library_root(spec.name)
        if root is not None and (root / "include" / spec.header).is_file():
            library = Library(spec, root.resolve(), parse_version(root / "include", spec))
            if library.version >= spec.minimum:
                return library
    try:
        return find_library(target)
    except LibraryVersionError as exc:
        raise LibraryVersionError(
            f"{exc}; or, where another package pins {spec.pip} (torch does), run `{INSTALL}`: "
            f"it puts the {spec.name} headers `ccogen build` needs in {toolchains_root()}, "
            "apart from the environment's packages") from None


@functools.cache
def nvcc_release(nvcc: Path) -> tuple[int, int]:
    """(major, minor) from `nvcc --version`."""
    try:
        text = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"`{nvcc} --version` failed: {exc}") from None
    m = re.search(r"release (\d+)\.(\d+)", text)
    if m is None:
        raise ToolchainError(f"cannot read the CUDA release from `{nvcc} --version`")
    return int(m.group(1)), int(m.group(2))


@functools.cache
def tool_version(tool: Path) -> str:
    """First line of `tool --version` (recorded in build reports)."""
    try:
        out = subprocess.run([str(tool), "--version"], capture_output=True, text=True,
                             timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if "nvcc" in tool.name else (lines[0].strip() if lines else "unknown")


__all__ = ["ENGINE_WHEELS", "INSTALL", "MIN_CFT_CUDA", "SHIM", "find_build_library", "find_clang",
           "find_clangxx", "find_mori_include", "find_nvcc_cft", "nvcc_release",
           "prefix_library_root", "tool_version", "toolchains_root"]
