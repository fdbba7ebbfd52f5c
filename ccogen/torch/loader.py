"""Protocol → generated files, cached on disk (no torch, no GPU here).

`generate(protocol, target, nranks, params, debug)` checks the instance and generates
kernels.cu + manifest.json once per distinct input: the entry
`<cache>/torch-op/<key>/` (ccogen.toolchains.cache: a lock per entry, atomic publication, so
every rank of a torchrun job may ask at once) holds the files and `binding.json` (the
windows the protocol writes).  The key hashes the protocol's text, the target, the team
size, the parameters, the debug flag and a fingerprint of ccogen's own sources and
templates, so a cache hit runs neither the checker nor the code generator, and a changed
ccogen never serves stale code.  binding.json also names the protocol's per-call count and
its row-batched buffers (ccogen.torch.batch), read off the protocol's declarations.  The
kernels are always generated with `epoch_from_heap` (the epoch counted on the device:
launches can be captured in a CUDA graph and replayed).  The cubin is built by
ccogen.toolchains.cubin, cached the same way.

`protocol` is a path to a `.cco` file (a bare name not found in the working directory is
looked up in ccogen's protocol library), `.cco` text, or a Protocol (builder or IR).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ccogen.errors import RunError
from ccogen.manifest import Manifest, load_manifest
from ccogen.toolchains.cache import cache_key, cached_build
from ccogen.torch.batch import BatchShape, batch_shape

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance

# v2: binding.json says the count (ccogen.torch.batch); v3: its outputs are the results
# `ensure` reads (`output_windows`), not every window written (a credit window is not one)
GENERATOR_VERSION = "torch-op-v3"

# Orders the launches of protocols not proven back-to-back safe (ccogen.torch.op).
LAUNCH_BARRIER = '''\
protocol launch_barrier():
    """Every rank's stream reaches this point before any rank's stream goes on."""
    team lsa
    window unused: 256

    kernel meet(threads=32):
        barrier()

    ensure:
        unused == init(unused)
'''


@dataclass(frozen=True)
class Generated:
    """The generated files of one instance and what the binding needs besides them."""

    directory: Path
    manifest: Manifest
    outputs: tuple[str, ...]  # the windows a call returns (`output_windows`)
    key: str
    batch: BatchShape | None = None  # its per-call count and row-batched buffers


@dataclass(frozen=True)
class Source:
    """A protocol as text with the name it is reported under, or an IR protocol."""

    text: str
    name: str
    ir: Any = None  # an ccogen.ir.nodes.Protocol when given as an object


def read_source(protocol: Any) -> Source:
    """The protocol's text (the cache key) without parsing it when it is a file or text."""
    from ccogen._resources import protocols_dir

    if isinstance(protocol, str | Path) and (isinstance(protocol, Path) or (
            "\n" not in protocol and protocol.endswith(".cco"))):
        path = Path(protocol)
        if not path.is_file() and len(path.parts) == 1 and (protocols_dir() / path).is_file():
            path = protocols_dir() / path
        try:
            return Source(path.read_text(encoding="utf-8"), path.name)
        except OSError as exc:
            raise RunError(f"cannot read {path}: {exc.strerror or exc}") from None
    if isinstance(protocol, str):
        return Source(protocol, "<string>")
    from ccogen.ir.nodes import Protocol as IrProtocol
    from ccogen.syntax import to_source

    ir = protocol if isinstance(protocol, IrProtocol) else getattr(protocol, "ir", None)
    if not isinstance(ir, IrProtocol):
        raise TypeError(f"load() takes a .cco path, .cco text or a Protocol, not "
                        f"{type(protocol).__name__}")
    return Source(to_source(ir), f"{ir.name}.cco", ir)


@functools.cache
def generator_fingerprint() -> str:
    """A hash of ccogen's Python sources and templates: what generated code depends on."""
    from ccogen._resources import templates_dir

    package = Path(__file__).resolve().parent.parent
    files = sorted(package.rglob("*.py")) + sorted(templates_dir().rglob("*.j2"))
    return cache_key(*(p.read_bytes() for p in files))


def generate(protocol: Any, target: str, nranks: int, params: Mapping[str, int | str], *,
             debug: bool = False, force: bool = False,
             max_ctas: int | None = None) -> Generated:
    """The cached generated files of `protocol` for `nranks` ranks (module docstring).
    A protocol the checker refuses raises DiagnosticError (on a cache miss) unless
    `force` (to see a debug build report the wait that hangs, as `ccogen run --force`).
    `max_ctas`: the SM budget (None: the code generator's default; `Communicator` gives
    ranks sharing a GPU the budget that keeps them resident together)."""
    source = read_source(protocol)
    items = sorted((str(k), _param_value(v)) for k, v in params.items())
    key = cache_key(GENERATOR_VERSION, generator_fingerprint(), source.name, source.text,
                    target, str(nranks), json.dumps(items), str(bool(debug)),
                    "force" if force else "", f"max_ctas={max_ctas}")

    def build(tmp: Path) -> dict[str, object]:
        _generate_into(tmp, source, target, nranks, dict(items), debug, force, max_ctas)
        return {"protocol": source.name, "target": target, "nranks": nranks,
                "params": dict(items), "debug": debug, "max_ctas": max_ctas}

    marker = cached_build("torch-op", key, "binding.json", build)
    directory = marker.parent
    binding = json.loads(marker.read_text(encoding="utf-8"))
    batch = binding.get("batch")
    return Generated(directory, load_manifest(directory), tuple(binding["outputs"]), key,
                     None if batch is None else BatchShape.from_json(batch))


def _param_value(value: Any) -> int | str:
    """An integer parameter's value, or a `dtype` parameter's: its name (`T="f32"`) or a
    torch dtype (`T=torch.float32`)."""
    if isinstance(value, str | int):
        return value
    name = _TORCH_DTYPES.get(str(value))
    if name is None:
        from ccogen.torch.errors import ArgumentError

        names = ", ".join(_TORCH_DTYPES.values())
        raise ArgumentError(f"a parameter is an integer or an element type ({names}, or the "
                            f"torch dtype of one), not {value!r}")
    return name


_TORCH_DTYPES = {"torch.uint8": "u8", "torch.int32": "i32", "torch.uint32": "u32",
                 "torch.int64": "i64", "torch.uint64": "u64", "torch.float16": "f16",
                 "torch.bfloat16": "bf16", "torch.float32": "f32"}


def output_windows(instance: Instance) -> list[str]:
    """The windows a call returns: those the protocol writes that `ensure` reads as results
    (the caller's outputs, language reference §8), so that a window the protocol writes
    only for itself (a credit, a landing slot) is not one.  As before this rule: every
    window written when `ensure` reads none of them (no `ensure`, or results in buffers
    only), every window when none is written."""
    from ccogen.ir.postcondition import check_regions

    windows = [name for name, _ in instance.window_sizes]
    written = {op.dst.window for ops in instance.ranks for op in ops
               if op.dst is not None} & set(windows)
    results = {r.window for c in instance.checks for r, init in check_regions(c)
               if not init} | {x.region.window for c in instance.checks
                               for x in c.loads if not x.init}
    return sorted(written & results or written) or windows


def _generate_into(tmp: Path, source: Source, target: str, nranks: int,
                   params: dict[str, int | str], debug: bool, force: bool,
                   max_ctas: int | None) -> None:
    """Generate into the cache entry (`tmp`'s parent, under the entry's lock); binding.json,
    written into `tmp`, is published last, so a reader never sees a partial entry."""
    from ccogen.rt.api import generate_for_run
    from ccogen.syntax import parse_ir

    ir = source.ir if source.ir is not None else parse_ir(source.text, source.name)
    # a dtype parameter passes its name: instantiation binds it (bind_dtype_params)
    ints = cast(dict[str, int], params)
    # the windows written are those of the checked instance: a loop checked on three
    # iterations writes the windows of every iteration (no need to unroll it here)
    instance = generate_for_run(ir, source.name, target, nranks, ints, tmp.parent,
                                debug=debug, force=force, epoch_from_heap=True,
                                max_ctas=max_ctas).checked
    batch = batch_shape(ir)
    (tmp / "binding.json").write_text(json.dumps(
        {"outputs": output_windows(instance),
         "batch": None if batch is None else batch.to_json()}, indent=2) + "\n",
        encoding="utf-8")


__all__ = ["GENERATOR_VERSION", "LAUNCH_BARRIER", "Generated", "generate",
           "generator_fingerprint",
           "read_source"]
