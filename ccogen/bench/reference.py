"""Hand-written reference kernels (benchmarks/reference/<target>/<protocol>/) and the
per-size manifests that run them through the same runtime path as generated code.

A reference directory holds `kernels.cu` (self-contained, like generated code) and a
`manifest.json` that follows docs/runtime-abi.md for the protocol's default instance at 2
ranks, plus a `reference` object the runtime ignores:

    "reference": {"protocol_file": "protocols/alltoall.cco", "param": "block",
                  "units": "peers", "small_max": 4096, "small_threads": 32,
                  "threads": 512, "bytes_per_cta": 65536, "max_ctas": 128,
                  "max_grid": 128, "scratch": 65536, "timer": false}

For any instance of the protocol, `derive_manifest` takes the GENERATED manifest of that
instance (same windows, same offsets, so the instance's `ensure` checks apply unchanged),
swaps in the reference kernel, appends `scratch` zeroed bytes to the heap for the
reference's own words (launch counter, timer, per-CTA signal slots), and passes the
layout to the kernel as macros (`nvcc_flags`):

    REF_NRANKS, REF_CTAS (CTAs per unit), REF_THREADS, REF_SCRATCH (heap offset),
    REF_P_<PARAM> (each parameter), REF_W_<WINDOW> / REF_S_<WINDOW> (offset / size),
    REF_T_<WINDOW or BUFFER> = REF_<DTYPE> (the element type, language v2: REF_BF16,
    REF_F32, ...; a kernel defines REF_U8 ... REF_FP8E4M3 as the numbers `DTYPE_CODES`
    gives, so `#if REF_T_X == REF_BF16` selects its element type).

Typed windows (language v2): a parameter that counts elements is turned into bytes for
the launch rule by `elements_of`, the window or buffer whose element size multiplies it
(`"param": "n", "elements_of": "x"` for `window x: T[n]`).  The generated manifest's
`buffers` and `between_launches` pass through unchanged (but `"host_sync": true` in the
rule: a kernel that orders nothing between its launches says `host_sync` whatever the
protocol says), and a reference kernel takes each buffer as a `buffer:NAME` parameter,
listed in its own manifest.

Launch shape: `units` is the number of independent streams of work (`peers`: nranks - 1,
one per peer; `one`: 1); each unit gets 1 CTA of `small_threads` threads when the
parameter `param` is at most `small_max` bytes, else ceil(bytes / bytes_per_cta) CTAs
(at most `max_ctas`, and at most `max_grid` in all) of `threads` threads.  The grid is
units x CTAs, never cooperative (every CTA waits only on its counterpart on a peer, and
the grids fit on the GPU).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ccogen.errors import DiagnosticError, ManifestError
from ccogen.manifest import ELEMENT_SIZES
from ccogen.targets import get_target

_PACKAGE = Path(__file__).resolve().parent.parent


def default_root() -> Path | None:
    """benchmarks/reference of the source checkout (not shipped in wheels), if present."""
    root = _PACKAGE.parent / "benchmarks" / "reference"
    return root if root.is_dir() else None


@dataclass(frozen=True)
class LaunchRule:
    """How a reference sizes its grid from the bytes of `param` (module docstring)."""

    protocol_file: str
    param: str
    units: str = "one"
    small_max: int = 4096
    small_threads: int = 32
    threads: int = 512
    bytes_per_cta: int = 256 << 10
    max_ctas: int = 128
    max_grid: int = 128
    scratch: int = 64 << 10
    timer: bool = False
    elements_of: str = ""  # the window/buffer whose element size turns `param` into bytes
    # The hand-written kernel orders nothing between its launches (it predates the
    # protocol's own back-to-back ordering, a leading barrier say): its manifest says
    # `between_launches: host_sync` whatever the protocol's says.
    host_sync: bool = False


@dataclass(frozen=True)
class ReferenceSpec:
    directory: Path
    target: str
    protocol: str
    kernel: dict[str, Any]  # name, symbol, params (grid/block come from the rule)
    rule: LaunchRule
    lsa_barrier_count: int = 0

    @property
    def kernel_path(self) -> Path:
        return self.directory / "kernels.cu"


def load_reference(directory: str | Path) -> ReferenceSpec:
    """Read a reference directory's manifest.json and its `reference` rule."""
    directory = Path(directory)
    path = directory / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the reference manifest: {exc}") from None
    rule_data = data.get("reference")
    if not isinstance(rule_data, dict):
        raise ManifestError(f"{path}: a reference manifest needs a `reference` object "
                            "(see ccogen/bench/reference.py)")
    try:
        rule = LaunchRule(**rule_data)
    except TypeError as exc:
        raise ManifestError(f"{path}: `reference`: {exc}") from None
    if rule.units not in ("one", "peers"):
        raise ManifestError(f"{path}: `reference.units` is `one` or `peers`, not {rule.units!r}")
    kernels = data.get("kernels") or []
    if len(kernels) != 1:
        raise ManifestError(f"{path}: a reference has exactly one kernel")
    if not (directory / "kernels.cu").is_file():
        raise ManifestError(f"{directory}/kernels.cu is missing")
    k = kernels[0]
    kernel = {"name": k["name"], "symbol": k.get("symbol", k["name"]), "params": k["params"]}
    return ReferenceSpec(directory, str(data["target"]), str(data["protocol"]), kernel, rule,
                         int(data.get("nccl", {}).get("lsa_barrier_count", 0)))


def find_reference(protocol: str, target: str, root: Path | None = None) -> ReferenceSpec | None:
    """The reference for `protocol` on `target` under root (default: the checkout's)."""
    root = root if root is not None else default_root()
    if root is None:
        return None
    directory = root / target / protocol
    return load_reference(directory) if (directory / "manifest.json").is_file() else None


def launch_shape(rule: LaunchRule, nbytes: int, units: int = 1) -> tuple[int, int]:
    """(CTAs per unit, threads per CTA) for `nbytes` of the rule's parameter, `units`
    units in the grid."""
    if nbytes <= rule.small_max:
        return 1, rule.small_threads
    ctas = -(-nbytes // rule.bytes_per_cta)
    return max(1, min(rule.max_ctas, rule.max_grid // max(1, units), ctas)), rule.threads


# The numbers behind the REF_<DTYPE> macros (every typed kernel defines the same).
DTYPE_CODES = {"u8": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5, "f16": 6, "bf16": 7,
               "f32": 8, "fp8e4m3": 9}


def _macro(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name).upper()


def derive_manifest(spec: ReferenceSpec, generated: dict[str, Any]) -> dict[str, Any]:
    """The reference's manifest for the instance whose generated manifest is `generated`."""
    params = {str(k): int(v) for k, v in generated.get("params", {}).items()}
    if spec.rule.param not in params:
        raise ManifestError(f"{spec.directory}: the rule's parameter `{spec.rule.param}` is "
                            f"not a parameter of the instance ({', '.join(params)})")
    nranks = int(generated["nranks"])
    units = nranks - 1 if spec.rule.units == "peers" else 1
    # the generated code's SM budget caps the reference's grid too (same shape, same budget)
    rule = replace(spec.rule, max_grid=min(spec.rule.max_grid,
                                           int(generated.get("max_ctas", spec.rule.max_grid))))
    ctas, threads = launch_shape(rule, params[spec.rule.param] * _item_size(spec, generated),
                                 units)
    scratch = int(generated["heap_size"])
    flags = [f"-DREF_NRANKS={nranks}", f"-DREF_CTAS={ctas}", f"-DREF_THREADS={threads}",
             f"-DREF_SCRATCH={scratch}ULL"]
    flags += [f"-DREF_P_{_macro(k)}={v}ULL" for k, v in sorted(params.items())]
    for w in generated["windows"]:
        flags += [f"-DREF_W_{_macro(w['name'])}={w['offset']}ULL",
                  f"-DREF_S_{_macro(w['name'])}={w['size']}ULL"]
    for area in [*generated["windows"], *generated.get("buffers", [])]:
        if "dtype" in area:
            flags.append(f"-DREF_T_{_macro(area['name'])}=REF_{_macro(area['dtype'])}")
    manifest = {
        "abi": 1,
        "protocol": spec.protocol,
        "source": generated.get("source", f"{spec.protocol}.cco"),
        "target": spec.target,
        "arch": generated.get("arch", "sm_90"),
        "nranks": nranks,
        "params": params,
        "queues": generated.get("queues", 1),
        "debug": False,
        "heap_size": scratch + spec.rule.scratch,
        "windows": generated["windows"],
        "signals": generated.get("signals", {"offset": 0, "count": 0}),
        "counters": generated.get("counters", []),
        **({"buffers": generated["buffers"]} if generated.get("buffers") else {}),
        **({"between_launches": "host_sync"} if spec.rule.host_sync else
           {"between_launches": generated["between_launches"]}
           if "between_launches" in generated else {}),
        # the reference reads the same run-time values (`ccogen run` refuses random bytes)
        **({"runtime_values": True} if generated.get("runtime_values") else {}),
        "kernels": [{"name": spec.kernel["name"], "symbol": spec.kernel["symbol"],
                     "grid": units * ctas, "block": threads, "shared_mem": 0,
                     "cooperative": False, "params": list(spec.kernel["params"])}],
        "nvcc_flags": flags,
        "kernel_file": "kernels.cu",
        "reference": _rule_data(spec.rule),
    }
    engine = get_target(spec.target).engine
    if engine is not None and engine.devcomm:  # the device communicator's LSA barriers
        manifest["nccl"] = {"lsa_barrier_count": spec.lsa_barrier_count}
    return manifest


def _rule_data(rule: LaunchRule) -> dict[str, Any]:
    """The `reference` object; `elements_of` only where set (byte parameters omit it)."""
    data = asdict(rule)
    if not data["elements_of"]:
        del data["elements_of"]
    if not data["host_sync"]:
        del data["host_sync"]
    return data


def _item_size(spec: ReferenceSpec, generated: dict[str, Any]) -> int:
    """Bytes per unit of the rule's parameter: 1, or the element size of `elements_of`."""
    name = spec.rule.elements_of
    if not name:
        return 1
    for area in [*generated["windows"], *generated.get("buffers", [])]:
        if area["name"] == name:
            return ELEMENT_SIZES[str(area.get("dtype", "u8"))]
    raise ManifestError(f"{spec.directory}: the rule's `elements_of` names `{name}`, which is "
                        "neither a window nor a buffer of the instance")


def write_case(spec: ReferenceSpec, generated_dir: Path, out_dir: Path) -> Path:
    """Write the reference's kernels.cu and derived manifest.json for the instance
    generated into generated_dir; returns out_dir."""
    generated = json.loads((generated_dir / "manifest.json").read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(spec.kernel_path, out_dir / "kernels.cu")
    manifest = derive_manifest(spec, generated)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n",
                                           encoding="utf-8")
    return out_dir


def timer_offset(manifest: dict[str, Any]) -> int | None:
    """Heap offset of the (sum of ns, count) words a timing reference accumulates."""
    rule = manifest.get("reference") or {}
    if not rule.get("timer"):
        return None
    return int(manifest["heap_size"]) - int(rule["scratch"]) + 8


def default_manifest(spec: ReferenceSpec, repo: Path, nranks: int = 2) -> dict[str, Any]:
    """The manifest.json that sits beside a reference: the protocol's default instance."""
    import tempfile

    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir

    path = repo / spec.rule.protocol_file
    with tempfile.TemporaryDirectory(prefix="ccogen-ref-") as tmp:
        compile_for_run(load_ir(path), path.name, spec.target, nranks, {}, Path(tmp),
                        debug=False, epoch_from_heap=True)
        generated = json.loads((Path(tmp) / "manifest.json").read_text(encoding="utf-8"))
    return derive_manifest(spec, generated)


def pending_codegen(exc: DiagnosticError) -> bool:
    """Whether the default instance failed only for code generation not written yet
    (E042 `... is not implemented yet`, language v2 ops before their backend lands)."""
    return all(d.code == "E042" and "not implemented yet" in d.message
               for d in exc.diagnostics)


def main(argv: list[str] | None = None) -> int:
    """`python -m ccogen.bench.reference [--check]`: rewrite (or check) the manifest.json
    beside every reference from the protocol's default instance."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    root = default_root()
    if root is None:
        sys.stderr.write("error: no benchmarks/reference in this checkout\n")
        return 2
    stale = []
    for manifest in sorted(root.glob("*/*/manifest.json")):
        spec = load_reference(manifest.parent)
        try:
            text = json.dumps(default_manifest(spec, root.parent.parent), indent=2) + "\n"
        except DiagnosticError as exc:
            if not pending_codegen(exc):
                raise
            print(f"pending {manifest}: the protocol's code generation is not there yet "
                  f"({exc}); left as it is", file=sys.stderr)
            continue
        if manifest.read_text(encoding="utf-8") != text:
            stale.append(manifest)
            if "--check" not in args:
                manifest.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if '--check' in args else 'rewrote'} {path}")
    return 1 if stale and "--check" in args else 0


__all__ = ["LaunchRule", "ReferenceSpec", "default_manifest", "default_root",
           "derive_manifest", "find_reference", "launch_shape", "load_reference", "main",
           "pending_codegen",
           "timer_offset", "write_case"]

if __name__ == "__main__":
    raise SystemExit(main())
