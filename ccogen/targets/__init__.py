"""Backend capability tables: one frozen `Capabilities` per target, read by checks and generators.

`TARGETS` maps the target names of docs/reference/targets.md to their tables; `get_target`
looks one up (raising `UnknownTarget`, whose message lists the known names);
`providers` lists, for a feature one target lacks, the targets that have it (E042).
"""

from __future__ import annotations

from ccogen.targets import mori_sdma, nccl_cft, nccl_lsa, nvshmem
from ccogen.targets.base import Capabilities, Feature, Support

TARGETS: dict[str, Capabilities] = {
    caps.name: caps
    for caps in (mori_sdma.CAPABILITIES, nccl_cft.CAPABILITIES, nvshmem.CAPABILITIES,
                 nccl_lsa.CAPABILITIES)
}

# Without `--target`, performance warnings rest on the figures docs/reference/rules.md cites.
DEFAULT_COST_TARGET = "mori-sdma"


class UnknownTarget(ValueError):
    """A target name that is not in `TARGETS`; the message lists the known ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown target `{name}`; known targets: {', '.join(TARGETS)}")


def get_target(name: str) -> Capabilities:
    caps = TARGETS.get(name)
    if caps is None:
        raise UnknownTarget(name)
    return caps


def providers(feature: Feature) -> list[tuple[str, Support]]:
    """The targets that can lower `feature`, with how (native first, then by table order)."""
    found = [(caps.name, caps.supports(feature)) for caps in TARGETS.values()]
    available = [(name, how) for name, how in found if how.available]
    return sorted(available, key=lambda item: item[1] is not Support.NATIVE)


__all__ = ["DEFAULT_COST_TARGET", "TARGETS", "UnknownTarget", "get_target", "providers"]
