"""Run-time values as C expressions: moved to `codegen.spell.c` (`CExpr`).

This module re-exports them for the SM passes that import them from here (`codegen.plan`,
`codegen.require`, `codegen.reduce`): it goes when those move into `codegen/lower/`.
"""

from __future__ import annotations

from ccogen.codegen.spell.c import CExpr, natural, runtime_bounds

__all__ = ["CExpr", "natural", "runtime_bounds"]
