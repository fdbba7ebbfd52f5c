"""The checks, as a visible ordered list.

Each check is one module with one class (see `base.Pass`); `PIPELINE` is the order
they run in.  `run_checks(instance, target)` runs them all on one instance and
returns every finding: checks report, they do not raise.
"""

from __future__ import annotations

from ccogen.diag import Diagnostic
from ccogen.ir.instance import Instance
from ccogen.passes.base import Pass, PassContext

PIPELINE: tuple[type[Pass], ...] = ()


def run_checks(instance: Instance, target: str | None = None) -> list[Diagnostic]:
    ctx = PassContext(instance=instance, target=target)
    for check in PIPELINE:
        check().run(ctx)
    return list(ctx.sink)


__all__ = ["PIPELINE", "Pass", "PassContext", "run_checks"]
