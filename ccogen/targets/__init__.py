"""The targets: one `Target` per backend (capabilities, code generator, toolchain, engine).

`TARGETS` maps the target names of docs/reference/targets.md to their `Target`; `get_target`
looks one up (raising `UnknownTarget`, whose message lists the known names);
`runnable_targets` names those `ccogen run` / `ccogen bench` can run; `providers` lists,
for a feature one target lacks, the targets that have it (E042).  Everything here is
data: the checks read `Target.capabilities`, the code generators and the runtime the
rest (docs/design.md, "How to add a target").
"""

from __future__ import annotations

from ccogen.targets import mori_sdma, nccl_cft, nccl_lsa, nvshmem
from ccogen.targets.base import Feature, Support
from ccogen.targets.target import Target

TARGETS: dict[str, Target] = {
    target.name: target
    for target in (mori_sdma.TARGET, nccl_cft.TARGET, nvshmem.TARGET, nccl_lsa.TARGET)
}

# Without `--target`, performance warnings rest on the figures docs/reference/rules.md cites.
DEFAULT_COST_TARGET = "mori-sdma"


class UnknownTarget(ValueError):
    """A target name that is not in `TARGETS`; the message lists the known ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown target `{name}`; known targets: {', '.join(TARGETS)}")


def get_target(name: str) -> Target:
    target = TARGETS.get(name)
    if target is None:
        raise UnknownTarget(name)
    return target


def runnable_targets() -> list[str]:
    """The targets ccogen's runtime can run (those with an engine), in table order."""
    return [name for name, target in TARGETS.items() if target.runnable]


def providers(feature: Feature) -> list[tuple[str, Support]]:
    """The targets that can lower `feature`, with how (native first, then by table order)."""
    found = [(name, target.capabilities.supports(feature)) for name, target in TARGETS.items()]
    available = [(name, how) for name, how in found if how.available]
    return sorted(available, key=lambda item: item[1] is not Support.NATIVE)


__all__ = ["DEFAULT_COST_TARGET", "TARGETS", "Target", "UnknownTarget", "get_target",
           "providers", "runnable_targets"]
