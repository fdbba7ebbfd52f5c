"""The pass protocol: one check per module, reporting into a shared sink; `analysis_of`
gives a check the instance's analysis (`ccogen.analysis`), computed once per context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ccogen.analysis import Analysis, analyse
from ccogen.diag import DiagnosticSink
from ccogen.ir.instance import Instance
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits


@dataclass
class PassContext:
    """What a check sees: the instance, the target (if any), the sink, cached analyses."""

    instance: Instance
    target: str | None = None
    sink: DiagnosticSink = field(default_factory=DiagnosticSink)
    cache: dict[str, Any] = field(default_factory=dict)
    limits: Limits = DEFAULT_LIMITS


def analysis_of(ctx: PassContext) -> Analysis:
    """The analysis of the context's instance, cached in `ctx.cache["analysis"]`."""
    found: Analysis | None = ctx.cache.get("analysis")
    if found is None:
        found = ctx.cache["analysis"] = analyse(ctx.instance, ctx.limits.analysis_bytes)
    return found


@dataclass(frozen=True)
class Pass:
    """Requires an instance; emits the codes in `codes`; never raises for user mistakes."""

    name: ClassVar[str] = ""
    codes: ClassVar[tuple[str, ...]] = ()

    def run(self, ctx: PassContext) -> None:
        raise NotImplementedError
