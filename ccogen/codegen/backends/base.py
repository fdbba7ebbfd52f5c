"""The backend interface: lower an instance to a view-model, render its templates."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ccogen.codegen.files import GeneratedFiles
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import LaunchOrder


@dataclass(frozen=True)
class Options:
    """Frozen code-generation options; `hash` keys the runtime's build cache.

    `epoch_from_heap` (nccl-lsa, nvshmem): each kernel takes its epoch from a launch
    counter in the heap instead of its `epoch` parameter (thread 0 of every CTA adds 1;
    the epoch is that ticket / gridDim.x, launches on one stream being ordered), so a
    CUDA graph that captured the launches once can replay them epoch after epoch
    (`ccogen bench`).  The kernel signature and the manifest's `params` are unchanged;
    the runtime must launch every kernel exactly once per epoch, as it does.
    """

    debug: bool = False
    arch: str = "sm_90"
    epoch_from_heap: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The options as data; an option left at its default is omitted when that keeps
        the hash of code generated before the option existed."""
        out = asdict(self)
        if not out["epoch_from_heap"]:
            del out["epoch_from_heap"]
        return out


def manifest_head(target: str, instance: Instance, source: str, arch: object,
                  debug: bool, heap_size: int) -> dict[str, object]:
    """The fields of manifest.json every target writes first (docs/runtime-abi.md);
    `between_launches` only where the protocol needs a host barrier between launches."""
    head: dict[str, object] = {
        "abi": 1,
        "target": target,
        "protocol": instance.protocol.name,
        "source": source,
        "nranks": instance.nranks,
        "params": dict(instance.params),
        "queues": instance.queues,
        "arch": arch,
        "debug": debug,
        "heap_size": heap_size,
    }
    if instance.protocol.between_launches is LaunchOrder.HOST_SYNC:
        head["between_launches"] = LaunchOrder.HOST_SYNC.value
    return head


class Backend(ABC):
    name: ClassVar[str]
    language: ClassVar[str]  # "cuda" or "hip"

    @abstractmethod
    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        """kernels.<ext> + manifest.json for one instance."""
