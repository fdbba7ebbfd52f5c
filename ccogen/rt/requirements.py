"""What a generated instance needs from the process that runs it, beyond its kernels.

A code generator records, in the target's section of `manifest.json`
(docs/runtime-abi.md), the environment the engine must be initialised with and the
alignment the symmetric heap must have, e.g. for nvshmem's native counted writes on
sm_100:

    "nvshmem": {"env": {"NVSHMEM_TMA_POLICY": "ENABLE"}, "heap_align": 256}

NVSHMEM refuses counted writes unless its TMA policy is ENABLE
(`non_abi/device/pt-to-pt/counted_device.cuh`: `tma_policy != NVSHMEMX_TMA_ENABLE` is
`NVSHMEMX_ERROR_NOT_SUPPORTED`), and the policy is read from the environment when the
engine starts.  The runtime honours both before the engine starts, or refuses with an
error that names the variable: a process whose environment already says otherwise is
not silently overridden, and a heap the engine placed at a lesser alignment is not
used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from ccogen.errors import ManifestError, RunError

DEFAULT_HEAP_ALIGN = 256


@dataclass(frozen=True)
class EngineRequirements:
    """The target section's `env` and `heap_align` of one manifest."""

    section: str  # "nvshmem", "nccl", "mori": where in manifest.json they come from
    env: tuple[tuple[str, str], ...] = ()
    heap_align: int = DEFAULT_HEAP_ALIGN


def read(manifest_dir: str | Path, target: str) -> EngineRequirements:
    """The requirements `manifest.json` states for the engine of `target`."""
    file = Path(manifest_dir)
    file = file / "manifest.json" if file.is_dir() else file
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{file}: cannot read: {exc}") from None
    section = target.split("-")[0]  # nccl-lsa, nccl-cft -> nccl; nvshmem; mori-sdma -> mori
    block = data.get(section, {}) if isinstance(data, dict) else {}
    if not isinstance(block, dict):
        raise ManifestError(f"{file}: `{section}` must be an object")
    env = block.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise ManifestError(f"{file}: `{section}.env` must map variable names to strings")
    align = block.get("heap_align", DEFAULT_HEAP_ALIGN)
    if not isinstance(align, int) or isinstance(align, bool) or align < 1 or align & (align - 1):
        raise ManifestError(f"{file}: `{section}.heap_align` must be a power of two, "
                            f"not {align!r}")
    return EngineRequirements(section, tuple(sorted(env.items())), align)


def apply_env(req: EngineRequirements, environ: MutableMapping[str, str] | None = None) -> None:
    """Set the variables the engine needs before it starts; refuse a conflicting value."""
    environ = os.environ if environ is None else environ
    for name, value in req.env:
        have = environ.get(name)
        if have is not None and have != value:
            raise RunError(f"the generated code needs {name}={value} (manifest.json "
                           f"{req.section}.env), but this process has {name}={have}: unset it "
                           f"or set it to {value}")
        environ[name] = value


def check_heap(req: EngineRequirements, address: int) -> None:
    """Refuse a heap the engine placed at less than the alignment the code assumes."""
    if address % req.heap_align:
        raise RunError(f"the engine placed the symmetric heap at {address:#x}, not "
                       f"{req.heap_align}-byte aligned as the generated code assumes "
                       f"(manifest.json {req.section}.heap_align): its windows and counters "
                       "would be misaligned")


def describe(req: EngineRequirements) -> Mapping[str, object]:
    return {"env": dict(req.env), "heap_align": req.heap_align}


__all__ = ["DEFAULT_HEAP_ALIGN", "EngineRequirements", "apply_env", "check_heap", "describe",
           "read"]
