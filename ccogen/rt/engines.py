"""The engine host shims (runtime/engines/*.cu): built at run time, loaded with ctypes.

Each runnable target names its shim (`EngineSpec.shim`, ccogen.targets); every shim exports
the same C ABI (`ccogen_init`, `ccogen_heap_alloc`, `ccogen_devcomm_create`,
`ccogen_barrier`, ...; see the .cu files).  It is compiled with nvcc
against the headers of the library it links (found by ccogen.toolchains.libraries) and rpath'd to
it, so headers and library agree; on load, `Engine` checks the library the process
actually resolved against the headers.  Built shims are cached like cubins.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from ccogen.errors import EngineError, LibraryVersionError, ToolchainError
from ccogen.toolchains.cache import cache_key, cached_build
from ccogen.toolchains.libraries import (
    Library,
    engine_spec,
    find_library,
    find_nvcc,
    toolchain_inputs,
)

SHIM_ABI = 1
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def engines_dir() -> Path:
    """runtime/engines in a source checkout, ccogen/engines in a wheel."""
    source_tree = _PACKAGE_DIR.parent / "runtime" / "engines"
    if (_PACKAGE_DIR.parent / "pyproject.toml").is_file() and source_tree.is_dir():
        return source_tree
    return _PACKAGE_DIR / "engines"


def shim_source(target: str) -> Path:
    path = engines_dir() / engine_spec(target).shim
    if not path.is_file():
        raise ToolchainError(f"engine shim source {path} is missing (broken install?)")
    return path


def shim_command(source: Path, library: Library, nvcc: Path, arch: str) -> list[str]:
    cmd = [str(nvcc), "-O2", "-std=c++17", f"-arch={arch}", "-Xcompiler", "-fPIC", "-shared",
           f"-I{library.include}", str(source), "-o", "libccogen_engine.so",
           f"-L{library.lib}", f"-l:{library.spec.runtime_lib}"]
    if library.spec.device_lib is not None:  # device code of the shim links the device library
        cmd.insert(1, "-rdc=true")
        cmd.append(f"-l{library.spec.device_lib}")
    cmd += ["-Xlinker", f"-rpath,{library.lib}"]
    return cmd


def build_engine(target: str, arch: str = "sm_90") -> tuple[Path, Library]:
    """The cached shim library for `target`, and the NCCL / NVSHMEM it links."""
    from ccogen.toolchains.cubin import run_compiler

    library = find_library(target)
    nvcc = find_nvcc()
    source = shim_source(target)
    text = source.read_text(encoding="utf-8")
    key = cache_key("engine-v2", target, text, arch, *toolchain_inputs(nvcc),
                    library.version_text, str(library.root))

    def build(tmp: Path) -> dict[str, object]:
        command = shim_command(source, library, nvcc, arch)
        run_compiler(command, Path(tmp), source)
        return {"target": target, "library": library.describe(), "command": command}

    return cached_build("engine", key, "libccogen_engine.so", build), library


@dataclass(frozen=True)
class Heap:
    pointer: int   # device address of this rank's heap
    window: int    # ncclWindow_t (nccl-lsa), 0 on nvshmem


class Engine:
    """One engine per process: bootstrap, heap, device communicator, host barrier."""

    def __init__(self, target: str, path: Path, library: Library) -> None:
        self.target = target
        self.spec = engine_spec(target)
        self.library = library
        try:
            self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise EngineError(f"cannot load the {library.spec.name} engine shim {path}: {exc}"
                              ) from None
        self._declare()
        abi = self.lib.ccogen_shim_abi()
        if abi != SHIM_ABI:
            raise EngineError(f"engine shim {path} has ABI {abi}, expected {SHIM_ABI}")
        self._check_versions()

    def _declare(self) -> None:
        lib = self.lib
        c = ctypes
        lib.ccogen_last_error.restype = c.c_char_p
        lib.ccogen_devcomm_size.restype = c.c_size_t
        lib.ccogen_unique_id_size.restype = c.c_size_t
        lib.ccogen_runtime_version.argtypes = [c.POINTER(c.c_int)]
        lib.ccogen_unique_id.argtypes = [c.c_void_p, c.c_size_t]
        lib.ccogen_init.argtypes = [c.c_int, c.c_int, c.c_int, c.c_char_p, c.c_size_t]
        lib.ccogen_heap_alloc.argtypes = [c.c_size_t, c.POINTER(c.c_uint64),
                                          c.POINTER(c.c_uint64)]
        lib.ccogen_devcomm_create.argtypes = [c.c_int, c.c_void_p, c.c_size_t]
        lib.ccogen_barrier.argtypes = [c.c_double]
        if self.spec.registers_modules:
            lib.ccogen_module_init.argtypes = [c.c_uint64]
            lib.ccogen_module_finalize.argtypes = [c.c_uint64]

    def _call(self, what: str, rc: int) -> None:
        if rc != 0:
            raise EngineError(f"{self.library.spec.name} {what}: "
                              f"{self.lib.ccogen_last_error().decode(errors='replace')}")

    # -- versions ---------------------------------------------------------------------------
    @property
    def header_version(self) -> int:
        return int(self.lib.ccogen_header_version())

    def runtime_version(self) -> int:
        v = ctypes.c_int(0)
        self._call("version query", self.lib.ccogen_runtime_version(ctypes.byref(v)))
        return v.value

    def _check_versions(self) -> None:
        header, loaded = self.header_version, self.runtime_version()
        name = self.library.spec.name
        if not self.library.spec.loads(header, loaded):
            raise LibraryVersionError(
                f"the process loaded {name} {_code_text(loaded)} but the shim and kernels "
                f"were compiled against {name} {_code_text(header)} headers "
                f"({self.library.root}); another {self.library.spec.runtime_lib} was found "
                "first (LD_LIBRARY_PATH? another package?)")

    # -- bootstrap ---------------------------------------------------------------------------
    def unique_id(self) -> bytes:
        size = int(self.lib.ccogen_unique_id_size())
        buf = ctypes.create_string_buffer(size)
        self._call("unique id", self.lib.ccogen_unique_id(buf, size))
        return buf.raw

    def init(self, rank: int, nranks: int, device: int, uid: bytes) -> None:
        self._call(f"init (rank {rank} of {nranks}, GPU {device})",
                   self.lib.ccogen_init(rank, nranks, device, uid, len(uid)))

    def heap_alloc(self, size: int) -> Heap:
        ptr, win = ctypes.c_uint64(0), ctypes.c_uint64(0)
        self._call(f"heap allocation of {size} bytes",
                   self.lib.ccogen_heap_alloc(size, ctypes.byref(ptr), ctypes.byref(win)))
        return Heap(ptr.value, win.value)

    @property
    def devcomm_size(self) -> int:
        return int(self.lib.ccogen_devcomm_size())

    def devcomm(self, lsa_barrier_count: int) -> bytes:
        size = self.devcomm_size
        buf = ctypes.create_string_buffer(size)
        self._call(f"ncclDevCommCreate (lsaBarrierCount={lsa_barrier_count})",
                   self.lib.ccogen_devcomm_create(lsa_barrier_count, buf, size))
        return buf.raw

    def module_init(self, module_handle: int) -> None:
        if self.spec.registers_modules:
            self._call("module init", self.lib.ccogen_module_init(module_handle))

    def module_finalize(self, module_handle: int) -> None:
        if self.spec.registers_modules:
            self._call("module finalize", self.lib.ccogen_module_finalize(module_handle))

    def barrier(self, timeout_s: float) -> None:
        self._call("host barrier", self.lib.ccogen_barrier(float(timeout_s)))

    def finalize(self) -> None:
        self._call("finalize", self.lib.ccogen_finalize())


def _code_text(code: int) -> str:
    if code < 10000:  # NCCL before 2.9: X*1000 + Y*100 + Z
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def load_engine(target: str, path: Path | None = None, arch: str = "sm_90") -> Engine:
    """Build (or take from the cache) and load the shim for `target`."""
    if path is None:
        path, library = build_engine(target, arch)
    else:
        library = find_library(target)
    return Engine(target, path, library)


__all__ = ["Engine", "Heap", "build_engine", "engines_dir", "load_engine", "shim_source"]
