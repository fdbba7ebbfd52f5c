"""Where nvcc and the engines' headers and libraries are, and which versions they are.

Which library a target uses is its `Target.toolchain.library` (ccogen.targets.libraries).
The NCCL and NVSHMEM headers used to compile kernels and engine shims must be those of the
library the process loads at run time (`ncclDevComm` changes size between NCCL releases; an
NVSHMEM cubin's device library must not be newer than the host library).  ccogen therefore
takes both from one place: the `nvidia.nccl` / `nvidia.nvshmem` Python packages
(`pip install nvidia-nccl-cu13 nvidia-nvshmem-cu13`, or `pip install 'ccogen[toolchain]'`),
or a directory named by `CCOGEN_NCCL_HOME` / `CCOGEN_NVSHMEM_HOME` (with `include/` and
`lib/`).  nvcc is `$CCOGEN_NVCC`, else `nvcc` on PATH, else `$CUDA_HOME/bin/nvcc`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ccogen.errors import LibraryVersionError, ToolchainError
from ccogen.targets import TARGETS, UnknownTarget, get_target, runnable_targets
from ccogen.targets.target import EngineSpec, LibrarySpec


@dataclass(frozen=True)
class Library:
    """An installed NCCL or NVSHMEM: headers, libraries and version."""

    spec: LibrarySpec
    root: Path
    version: tuple[int, int, int]

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def version_code(self) -> int:
        """NCCL_VERSION_CODE / ccogen's NVSHMEM code (major*10000 + minor*100 + patch)."""
        major, minor, patch = self.version
        if self.spec.name == "NCCL" and major <= 2 and minor <= 8:
            return major * 1000 + minor * 100 + patch
        return major * 10000 + minor * 100 + patch

    def describe(self) -> str:
        return f"{self.spec.name} {self.version_text} ({self.root})"


def library_spec(target: str) -> LibrarySpec:
    """The engine library whose headers `target`'s code compiles against."""
    try:
        spec = get_target(target).toolchain.library
    except UnknownTarget:
        raise ToolchainError(f"unknown target {target!r}; known targets: "
                             f"{', '.join(TARGETS)}") from None
    if spec is None:
        raise ToolchainError(f"target {target} compiles against no NCCL / NVSHMEM library")
    return spec


def engine_spec(target: str) -> EngineSpec:
    """How the runtime runs `target` (ToolchainError when it cannot run it here)."""
    try:
        engine = get_target(target).engine
    except UnknownTarget:
        engine = None
    if engine is None:
        raise ToolchainError(f"ccogen cannot run target {target!r}: the runtime runs "
                             f"{', '.join(runnable_targets())}")
    return engine


def _package_roots(module: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def find_library(target: str) -> Library:
    """The NCCL / NVSHMEM for `target`; ToolchainError naming the package when absent."""
    spec = library_spec(target)
    override = os.environ.get(spec.env, "").strip()
    candidates = [Path(override)] if override else _package_roots(spec.module)
    for root in candidates:
        if (root / "include" / spec.header).is_file():
            library = Library(spec, root.resolve(), parse_version(root / "include", spec))
            _check_minimum(library, target)
            return library
    where = f"{spec.env}={override}" if override else f"the Python package {spec.module}"
    raise ToolchainError(
        f"{spec.name} headers not found ({where} has no include/{spec.header}); "
        f"install them with `pip install {spec.pip}` (or `pip install 'ccogen[toolchain]'`), "
        f"or point {spec.env} at a directory with include/ and lib/")


def parse_version(include: Path, spec: LibrarySpec) -> tuple[int, int, int]:
    text = (include / spec.header).read_text(encoding="utf-8", errors="replace")
    parts = []
    for macro in spec.version_macros:
        m = re.search(rf"#\s*define\s+{macro}\s+(\d+)", text)
        if m is None:
            raise ToolchainError(f"cannot read {macro} from {include / spec.header}")
        parts.append(int(m.group(1)))
    return (parts[0], parts[1], parts[2])


def _check_minimum(library: Library, target: str) -> None:
    if library.version < library.spec.minimum:
        need = ".".join(map(str, library.spec.minimum))
        raise LibraryVersionError(
            f"{library.describe()} is too old: the {target} target needs "
            f"{library.spec.name} >= {need}; upgrade with `pip install -U {library.spec.pip}`")


def find_nvcc() -> Path:
    """nvcc: $CCOGEN_NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin."""
    override = os.environ.get("CCOGEN_NVCC", "").strip()
    if override:
        if not Path(override).is_file():
            raise ToolchainError(f"CCOGEN_NVCC={override} does not exist")
        return Path(override)
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return Path(home) / "bin" / "nvcc"
    raise ToolchainError("nvcc not found: install the CUDA toolkit (>= 12.8; 13.0 is tested), "
                         "put nvcc on PATH or set CCOGEN_NVCC")


@functools.cache
def _nvcc_version_cached(path: str, mtime_ns: int) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"`{path} --version` failed: {exc}") from None
    return out.stdout.strip()


def nvcc_version(nvcc: Path) -> str:
    """`nvcc --version` text (part of every cache key); cached per binary."""
    return _nvcc_version_cached(str(nvcc), nvcc.stat().st_mtime_ns)


# The environment nvcc reads that changes what it produces: flags it adds to every command
# line, the host compiler it runs, and include/library search paths.
COMPILER_ENV = ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN", "CPATH",
                "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")
# ccogen's own build code, from the package root: the version and what compiles and caches
_BUILD_MODULES = ("_version.py", "toolchains/cubin.py", "rt/engines.py", "toolchains/libraries.py",
                  "toolchains/cache.py", "toolchains/cuda.py")


def _file_identity(path: str | None) -> str:
    """A host tool's resolved path, size and modification time ('' when there is none)."""
    if not path:
        return ""
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return path
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


@functools.cache
def _build_code_fingerprint() -> str:
    import hashlib

    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for name in _BUILD_MODULES:
        h.update((package / name).read_bytes())
    return h.hexdigest()


def toolchain_inputs(nvcc: Path) -> tuple[str, ...]:
    """Everything about the compiler that changes a binary and is not on its command line:
    nvcc's resolved path and `--version`, the environment it reads (`COMPILER_ENV`), the
    host compiler it would run, and ccogen's own build code.  Part of every cache key."""
    env = os.environ
    ccbin = env.get("NVCC_CCBIN", "").strip()
    host = [_file_identity(shutil.which(ccbin) if ccbin else None)] if ccbin else \
        [_file_identity(shutil.which(tool)) for tool in ("gcc", "g++")]
    return (_file_identity(str(nvcc)), nvcc_version(nvcc),
            *(f"{name}={env.get(name, '')}" for name in COMPILER_ENV),
            *host, _build_code_fingerprint())


__all__ = ["COMPILER_ENV", "Library", "engine_spec", "find_library", "find_nvcc", "library_spec",
           "nvcc_version", "parse_version", "toolchain_inputs"]
