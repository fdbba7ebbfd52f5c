"""Build generated code with the real compilers (no GPU): what `ccogen build` runs.

`build_dir(directory)` reads the manifest's target and runs that target's builder, the
function its `Target.toolchain.builder` names (ccogen.targets): `ccogen.toolchains.hip`
for mori-sdma, `ccogen.toolchains.cuda` for the CUDA targets.  Every builder returns a
`BuildResult`: what it produced, with which tools, and what it checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ccogen.errors import ToolchainError
from ccogen.targets import TARGETS
from ccogen.targets.target import resolve


@dataclass
class BuildResult:
    """What one build produced, with which tools, and what it checked."""

    target: str
    directory: Path
    outputs: list[Path] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log: str = ""  # what the compilers printed (warnings) on success; cached with the outputs

    def summary(self) -> str:
        lines = [f"built {self.target} in {self.directory}"]
        lines += [f"  {p.name}" for p in self.outputs]
        lines += [f"  = tool: {t}" for t in self.tools]
        lines += [f"  = note: {n}" for n in self.notes]
        return "\n".join(lines)


def load(directory: Path) -> dict[str, object]:
    """The manifest, checked before any compiler runs (`ccogen.manifest.check_for_build`:
    seal, file names, arch, flags, symbols)."""
    from ccogen.manifest import check_for_build

    path = directory / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolchainError(f"cannot read {path}: {exc}") from None
    check_for_build(data, path)
    return data  # type: ignore[no-any-return]


def arch_number(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


def build_dir(directory: str | Path, debug: bool | None = None) -> BuildResult:
    """Build what `ccogen compile` wrote in `directory` for its manifest's target."""
    path = Path(directory)
    manifest = load(path)
    target = TARGETS.get(str(manifest.get("target")))
    if target is None:
        raise ToolchainError(f"{path}/manifest.json names target {manifest.get('target')!r}, "
                             "which ccogen cannot build")
    dbg = bool(manifest.get("debug")) if debug is None else debug
    result: BuildResult = resolve(target.toolchain.builder)(path, manifest, dbg)
    return result


__all__ = ["BuildResult", "arch_number", "build_dir", "load"]
