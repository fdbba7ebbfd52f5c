"""manifest.json: what the runtime needs to allocate, launch and check one generated instance.

The format is defined in docs/runtime-abi.md (the contract with the code generators); this
module parses and validates it into frozen dataclasses.  Every problem is a ManifestError
naming the file and the field.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ccogen.errors import ManifestError
from ccogen.ir.dtype import ELEMENT_SIZES
from ccogen.targets import TARGETS, runnable_targets

ABI_VERSION = 1
HEAP_ALIGN = 256
PARAM_KINDS = ("devcomm", "window", "heap", "epoch", "debug")
BUFFER_PARAM = "buffer:"  # `buffer:NAME`: the device pointer of the caller's tensor NAME
ACCESS = ("read", "write", "readwrite")
BETWEEN_LAUNCHES = ("host_sync", "free")
SEAL = "generated"  # codegen.files.seal: the SHA-256 of the generated files and the manifest
# The only nvcc flags a manifest may ask for (anything else, `-ccbin`, `-Xcompiler`, `-o`,
# an include path, could run a program or read a file at build time): macro definitions
# with a plain value, and a few code-generation switches.
_FLAG_ALLOWED = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-U[A-Za-z_][A-Za-z0-9_]*"
                           r"|--extended-lambda|-lineinfo|-O[0-3]|-maxrregcount=[1-9][0-9]{0,2}")
FLAGS_HELP = "-DNAME[=VALUE] (VALUE letters, digits and _.+-), -UNAME, --extended-lambda, " \
             "-lineinfo, -O0..-O3, -maxrregcount=N"


def buffer_name(param: object) -> str | None:
    """NAME for a `buffer:NAME` kernel parameter, else None."""
    if isinstance(param, str) and param.startswith(BUFFER_PARAM):
        return param[len(BUFFER_PARAM):]
    return None


@dataclass(frozen=True)
class WindowSpec:
    name: str
    offset: int
    size: int
    dtype: str = "u8"
    shape: tuple[int, ...] = ()  # elements per dimension; () means (size // itemsize,)

    @property
    def dims(self) -> tuple[int, ...]:
        return self.shape or (self.size // ELEMENT_SIZES[self.dtype],)


@dataclass(frozen=True)
class BufferSpec:
    """A `buffer` (language v2): the caller's own tensor, passed at every launch."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    access: str = "readwrite"  # read, write or readwrite: what the kernels do with it

    @property
    def size(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count * ELEMENT_SIZES[self.dtype]


@dataclass(frozen=True)
class SignalSpec:
    offset: int
    count: int  # nranks * queues 64-bit slots

    @property
    def size(self) -> int:
        return self.count * 8


@dataclass(frozen=True)
class CounterSpec:
    name: str
    offset: int


@dataclass(frozen=True)
class KernelSpec:
    name: str
    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    cooperative: bool
    params: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    directory: Path
    abi: int
    protocol: str
    source: str
    target: str
    arch: str
    nranks: int
    params: tuple[tuple[str, int], ...]
    queues: int
    debug: bool
    heap_size: int
    windows: tuple[WindowSpec, ...]
    signals: SignalSpec
    counters: tuple[CounterSpec, ...]
    kernels: tuple[KernelSpec, ...]
    lsa_barrier_count: int
    nvcc_flags: tuple[str, ...]
    kernel_file: str = "kernels.cu"
    headers: tuple[str, ...] = ()  # files beside kernel_file that it #includes
    max_ctas: int | None = None  # the SM budget the code was generated for (CTAs per launch)
    buffers: tuple[BufferSpec, ...] = ()
    between_launches: str = "host_sync"
    runtime_values: bool = False  # the kernels read run-time values (language v2 §3)
    scratch: tuple[int, int] | None = None  # (offset, size): the kernels' own words
    sealed: bool = False  # the `generated` hashes were present and matched

    @property
    def kernel_path(self) -> Path:
        return self.directory / self.kernel_file

    @property
    def header_paths(self) -> tuple[Path, ...]:
        return tuple(self.directory / h for h in self.headers)

    def window(self, name: str) -> WindowSpec:
        for w in self.windows:
            if w.name == name:
                return w
        raise KeyError(name)


class _Reader:
    """Typed field access with errors that name the file and the JSON path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> ManifestError:
        return ManifestError(f"{self.path}: `{where}` {what} (see docs/runtime-abi.md)")

    def obj(self, data: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            raise self.fail(where, "must be an object")
        return data

    def get(self, data: Mapping[str, Any], key: str, where: str, default: Any = ...) -> Any:
        if key in data:
            return data[key]
        if default is ...:
            raise self.fail(f"{where}{key}", "is missing")
        return default

    def int_(self, data: Mapping[str, Any], key: str, where: str, default: Any = ...,
             minimum: int = 0) -> int:
        value = self.get(data, key, where, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(f"{where}{key}", f"must be an integer >= {minimum}, not {value!r}")
        return value

    def str_(self, data: Mapping[str, Any], key: str, where: str, default: Any = ...) -> str:
        value = self.get(data, key, where, default)
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where}{key}", f"must be a non-empty string, not {value!r}")
        return value

    def bool_(self, data: Mapping[str, Any], key: str, where: str, default: Any = ...) -> bool:
        value = self.get(data, key, where, default)
        if not isinstance(value, bool):
            raise self.fail(f"{where}{key}", f"must be true or false, not {value!r}")
        return value

    def list_(self, data: Mapping[str, Any], key: str, where: str, default: Any = ...
              ) -> Sequence[Any]:
        value = self.get(data, key, where, default)
        if not isinstance(value, list):
            raise self.fail(f"{where}{key}", "must be a list")
        return value

    def dim3(self, data: Mapping[str, Any], key: str, where: str) -> tuple[int, int, int]:
        value = self.get(data, key, where)
        items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if (not isinstance(items, list) or not 1 <= len(items) <= 3
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                           for x in items)):
            raise self.fail(f"{where}{key}",
                            f"must be a positive int or 1-3 of them, not {value!r}")
        full = [*items, 1, 1][:3]
        return (full[0], full[1], full[2])


def load_manifest(path: str | Path) -> Manifest:
    """Parse `<dir>/manifest.json` (or the file itself) and validate it."""
    path = Path(path)
    file = path / "manifest.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{file} does not exist: generate it with `ccogen compile` "
                            "(or ccogen.codegen.generate)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{file}: cannot read: {exc}") from None
    sealed = verify_seal(data, file.parent, _Reader(file))  # integrity first, then content
    manifest = parse_manifest(data, file)
    return replace(manifest, sealed=True) if sealed else manifest


def check_file_name(r: _Reader, name: object, where: str) -> str:
    """A file beside the manifest: a plain relative name (no directory, no link out)."""
    if (not isinstance(name, str) or not name or "/" in name or "\\" in name
            or name.startswith(".") or not name.isprintable()):
        raise r.fail(where, f"must be a file name beside the manifest, not {name!r}")
    return name


def check_nvcc_flags(r: _Reader, flags: Sequence[Any]) -> tuple[str, ...]:
    """The manifest's `nvcc_flags`, each from the fixed allow-list (`FLAGS_HELP`)."""
    for i, flag in enumerate(flags):
        if not isinstance(flag, str) or not _FLAG_ALLOWED.fullmatch(flag):
            raise r.fail(f"nvcc_flags[{i}]", f"{flag!r} is not a flag ccogen passes to a "
                         f"compiler from a manifest (allowed: {FLAGS_HELP})")
    return tuple(flags)


def _regular_sha256(path: Path) -> str | None:
    """SHA-256 of a regular file, opened without following a link (None: not one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return hashlib.sha256(handle.read()).hexdigest()


def verify_seal(data: Any, directory: Path, r: _Reader) -> bool:
    """Check the `generated` hashes (codegen.files.seal) when the manifest has them: the
    manifest's own canonical JSON and every file it lists, which must include the kernel
    file and the headers.  False for an unsealed (hand-written) manifest."""
    if not isinstance(data, Mapping) or SEAL not in data:
        return False
    seal = r.obj(data[SEAL], SEAL)
    files = r.obj(r.get(seal, "files", f"{SEAL}."), f"{SEAL}.files")
    body = {k: v for k, v in data.items() if k != SEAL}
    own = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                         .encode("utf-8")).hexdigest()
    if seal.get("manifest") != own:
        raise r.fail(f"{SEAL}.manifest", "does not match the manifest: it was changed after "
                     "ccogen generated it; generate the directory again")
    needed = {check_file_name(r, data.get("kernel_file", "kernels.cu"), "kernel_file"),
              *_headers(r, data)}
    missing = sorted(needed - set(files))
    if missing:
        raise r.fail(f"{SEAL}.files", f"does not cover {', '.join(missing)}")
    for name, digest in files.items():
        check_file_name(r, name, f"{SEAL}.files")
        found = _regular_sha256(directory / name)
        if found is None:
            raise r.fail(f"{SEAL}.files", f"names {name}, which is missing, a link or not a "
                         "regular file")
        if found != digest:
            raise r.fail(f"{SEAL}.files", f"{name} was changed after ccogen generated it "
                         "(its SHA-256 differs from the one recorded); generate the "
                         "directory again")
    return True


_BUILD_ARCH = re.compile(r"sm_\d+[a-z]?|gfx\d+[a-z]?")


def check_for_build(data: Any, file: Path) -> None:
    """What `ccogen build` checks of a manifest of any target before running a compiler:
    the seal (when present), the kernel file and headers beside it, `arch` (a string or a
    list of `sm_NN` / `gfxNNN`), `nvcc_flags` from the allow-list, kernel symbols that are
    C identifiers.  ManifestError otherwise."""
    r = _Reader(file)
    top = r.obj(data, "(top level)")
    check_file_name(r, top.get("kernel_file", "kernels.cu"), "kernel_file")
    _headers(r, top)
    arch = top.get("arch", "sm_90")
    for a in arch if isinstance(arch, list) else [arch]:
        if not isinstance(a, str) or not _BUILD_ARCH.fullmatch(a):
            raise r.fail("arch", f"must be sm_NN or gfxNNN (or a list of them), not {a!r}")
    check_nvcc_flags(r, r.list_(top, "nvcc_flags", "", []))
    for i, k in enumerate(r.list_(top, "kernels", "")):
        symbol = r.obj(k, f"kernels[{i}]").get("symbol")
        if not isinstance(symbol, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
            raise r.fail(f"kernels[{i}].symbol", f"must be a C identifier, not {symbol!r}")
    verify_seal(top, file.parent, r)


def parse_manifest(data: Any, file: Path) -> Manifest:
    r = _Reader(file)
    top = r.obj(data, "(top level)")
    abi = r.int_(top, "abi", "")
    if abi != ABI_VERSION:
        raise r.fail("abi", f"is {abi}; this runtime implements ABI {ABI_VERSION}")
    target = r.str_(top, "target", "")
    if target not in runnable_targets():
        raise r.fail("target", f"is {target!r}; the runtime runs "
                     f"{', '.join(runnable_targets())}")
    heap_size = r.int_(top, "heap_size", "", minimum=1)
    windows = tuple(_window(r, w, i) for i, w in enumerate(r.list_(top, "windows", "")))
    buffers = tuple(_buffer(r, b, i) for i, b in enumerate(r.list_(top, "buffers", "", [])))
    between = r.str_(top, "between_launches", "", "host_sync")
    if between not in BETWEEN_LAUNCHES:
        raise r.fail("between_launches", f"is {between!r}; values are "
                     f"{', '.join(BETWEEN_LAUNCHES)}")
    sig = r.obj(r.get(top, "signals", "", {"offset": 0, "count": 0}), "signals")
    signals = SignalSpec(r.int_(sig, "offset", "signals."), r.int_(sig, "count", "signals."))
    counters = tuple(_counter(r, c, i) for i, c in enumerate(r.list_(top, "counters", "", [])))
    buffer_names = {b.name for b in buffers}
    kernels = tuple(_kernel(r, k, i, target, buffer_names)
                    for i, k in enumerate(r.list_(top, "kernels", "")))
    if not kernels:
        raise r.fail("kernels", "is empty")
    nccl = r.obj(r.get(top, "nccl", "", {}), "nccl")
    flags = check_nvcc_flags(r, r.list_(top, "nvcc_flags", "", []))
    scratch = None
    if "scratch" in top:
        area = r.obj(top["scratch"], "scratch")
        scratch = (r.int_(area, "offset", "scratch."), r.int_(area, "size", "scratch.", minimum=1))
    params = r.obj(r.get(top, "params", "", {}), "params")
    manifest = Manifest(
        directory=file.parent,
        abi=abi,
        protocol=r.str_(top, "protocol", ""),
        source=r.str_(top, "source", "", "protocol.cco"),
        target=target,
        arch=r.str_(top, "arch", "", "sm_90"),
        nranks=r.int_(top, "nranks", "", minimum=1),
        params=tuple((str(k), int(v)) for k, v in params.items()),
        queues=r.int_(top, "queues", "", 1, minimum=1),
        debug=r.bool_(top, "debug", "", False),
        heap_size=heap_size,
        windows=windows,
        signals=signals,
        counters=counters,
        kernels=kernels,
        lsa_barrier_count=r.int_(nccl, "lsa_barrier_count", "nccl.", 0),
        nvcc_flags=flags,
        kernel_file=check_file_name(r, r.get(top, "kernel_file", "", "kernels.cu"),
                                    "kernel_file"),
        headers=_headers(r, top),
        max_ctas=r.int_(top, "max_ctas", "", minimum=1) if "max_ctas" in top else None,
        buffers=buffers,
        between_launches=between,
        runtime_values=bool(r.get(top, "runtime_values", "", False)),
        scratch=scratch,
    )
    _check_layout(r, manifest)
    return manifest


def _headers(r: _Reader, top: Mapping[str, Any]) -> tuple[str, ...]:
    names = r.list_(top, "headers", "", [])
    return tuple(check_file_name(r, name, f"headers[{i}]") for i, name in enumerate(names))


def _window(r: _Reader, data: Any, i: int) -> WindowSpec:
    where = f"windows[{i}]."
    w = r.obj(data, where[:-1])
    size = r.int_(w, "size", where, minimum=1)
    dtype = _dtype(r, w, where, "u8")
    shape = _shape(r, w, where, None)
    itemsize = ELEMENT_SIZES[dtype]
    if size % itemsize:
        raise r.fail(f"{where}size", f"{size} is not a whole number of {dtype} elements")
    if shape and _product(shape) * itemsize != size:
        raise r.fail(f"{where}shape", f"{list(shape)} of {dtype} is "
                     f"{_product(shape) * itemsize} bytes, the window {size}")
    return WindowSpec(r.str_(w, "name", where), r.int_(w, "offset", where), size, dtype,
                      shape or ())


def _buffer(r: _Reader, data: Any, i: int) -> BufferSpec:
    where = f"buffers[{i}]."
    b = r.obj(data, where[:-1])
    access = r.str_(b, "access", where, "readwrite")
    if access not in ACCESS:
        raise r.fail(f"{where}access", f"is {access!r}; values are {', '.join(ACCESS)}")
    shape = _shape(r, b, where, ...)
    assert shape is not None
    return BufferSpec(r.str_(b, "name", where), _dtype(r, b, where, ...), shape, access)


def _dtype(r: _Reader, data: Mapping[str, Any], where: str, default: Any) -> str:
    dtype = r.str_(data, "dtype", where, default)
    if dtype not in ELEMENT_SIZES:
        raise r.fail(f"{where}dtype", f"is {dtype!r}; element types are "
                     f"{', '.join(ELEMENT_SIZES)}")
    return dtype


def _shape(r: _Reader, data: Mapping[str, Any], where: str, default: Any
           ) -> tuple[int, ...] | None:
    value = r.get(data, "shape", where, default)
    if value is None:
        return None
    if (not isinstance(value, list) or not value
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                       for x in value)):
        raise r.fail(f"{where}shape", f"must be a non-empty list of positive ints, not {value!r}")
    return tuple(value)


def _product(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _counter(r: _Reader, data: Any, i: int) -> CounterSpec:
    where = f"counters[{i}]."
    c = r.obj(data, where[:-1])
    return CounterSpec(r.str_(c, "name", where), r.int_(c, "offset", where))


def _kernel(r: _Reader, data: Any, i: int, target: str, buffers: set[str]) -> KernelSpec:
    where = f"kernels[{i}]."
    k = r.obj(data, where[:-1])
    params = tuple(r.list_(k, "params", where))
    engine = TARGETS[target].engine
    assert engine is not None  # parse_manifest accepts runnable targets only
    allowed = engine.kernel_params
    for j, kind in enumerate(params):
        named = buffer_name(kind)
        if named is not None:
            if named not in buffers:
                raise r.fail(f"{where}params[{j}]", f"{kind!r} names no entry of `buffers`")
            continue
        if kind not in PARAM_KINDS:
            raise r.fail(f"{where}params[{j}]", f"is {kind!r}; kinds are {', '.join(PARAM_KINDS)}")
        if kind not in allowed:
            raise r.fail(f"{where}params[{j}]", f"{kind!r} does not exist on target {target}")
    name = r.str_(k, "name", where)
    return KernelSpec(
        name=name,
        symbol=r.str_(k, "symbol", where, name),
        grid=r.dim3(k, "grid", where),
        block=r.dim3(k, "block", where),
        shared_mem=r.int_(k, "shared_mem", where, 0),
        cooperative=r.bool_(k, "cooperative", where, False),
        params=params,
    )


def _check_layout(r: _Reader, m: Manifest) -> None:
    """Offsets 256-byte aligned, every area inside the heap, no two areas overlapping."""
    areas: list[tuple[str, int, int]] = [(f"windows `{w.name}`", w.offset, w.size)
                                         for w in m.windows]
    if m.signals.count:
        areas.append(("signals", m.signals.offset, m.signals.size))
        if m.signals.count < m.nranks * m.queues:
            raise r.fail("signals.count", f"is {m.signals.count}, below nranks * queues = "
                         f"{m.nranks * m.queues}")
    areas += [(f"counters `{c.name}`", c.offset, 8) for c in m.counters]
    names = [w.name for w in m.windows]
    if len(set(names)) != len(names):
        raise r.fail("windows", "has two windows of one name")
    buffer_names = [b.name for b in m.buffers]
    if len(set(buffer_names)) != len(buffer_names) or set(buffer_names) & set(names):
        raise r.fail("buffers", "has two buffers of one name, or a buffer named like a window")
    for what, offset, _size in areas:
        if offset % HEAP_ALIGN:
            raise r.fail(what, f"offset {offset} is not {HEAP_ALIGN}-byte aligned")
    if m.scratch is not None:  # the kernels' barrier words and LL entries: 8-byte aligned
        if m.scratch[0] % 8:
            raise r.fail("scratch", f"offset {m.scratch[0]} is not 8-byte aligned")
        areas.append(("scratch", *m.scratch))
    for what, offset, size in areas:
        if offset + size > m.heap_size:
            need = f": the kernels need {offset + size} bytes at least" if what == "scratch" \
                else ""
            raise r.fail(what, f"[{offset}, {offset + size}) lies outside heap_size "
                         f"{m.heap_size}{need}")
    ordered = sorted(areas, key=lambda a: a[1])
    for (a, a_off, a_size), (b, b_off, _) in itertools.pairwise(ordered):
        if a_off + a_size > b_off:
            raise r.fail(b, f"overlaps {a}")


__all__ = [
    "ABI_VERSION",
    "ACCESS",
    "BETWEEN_LAUNCHES",
    "BUFFER_PARAM",
    "ELEMENT_SIZES",
    "PARAM_KINDS",
    "BufferSpec",
    "CounterSpec",
    "KernelSpec",
    "Manifest",
    "SignalSpec",
    "WindowSpec",
    "buffer_name",
    "check_for_build",
    "check_nvcc_flags",
    "load_manifest",
    "parse_manifest",
    "verify_seal",
]
