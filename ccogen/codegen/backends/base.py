"""The backend interface: lower an instance to a view-model, render its templates."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ccogen.codegen.files import GeneratedFiles
from ccogen.ir.instance import Instance


@dataclass(frozen=True)
class Options:
    """Frozen code-generation options; `hash` keys the runtime's build cache."""

    debug: bool = False
    arch: str = "sm_90"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(ABC):
    name: ClassVar[str]
    language: ClassVar[str]  # "cuda" or "hip"

    @abstractmethod
    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        """kernels.<ext> + manifest.json for one instance."""
