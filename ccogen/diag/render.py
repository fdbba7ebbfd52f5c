"""The renderers by format name, as the CLI's `--format` offers them.

`render(diagnostics, fmt, color=False)` picks one; only `full` uses colour.  Every
renderer sorts the diagnostics with `sort_key` (stably) and returns text that ends with
a newline (or is empty when a format prints nothing for no diagnostics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ccogen.diag import (
    Diagnostic,
    render_concise,
    render_full,
    render_github,
    render_json,
    render_sarif,
)

Renderer = Callable[..., str]

RENDERERS: dict[str, Renderer] = {
    "full": render_full.render,
    "concise": render_concise.render,
    "json": render_json.render,
    "sarif": render_sarif.render,
    "github": render_github.render,
}


def render(diagnostics: Sequence[Diagnostic], fmt: str, color: bool = False) -> str:
    """Render with the format named `fmt`; `ValueError` for an unknown name."""
    renderer = RENDERERS.get(fmt)
    if renderer is None:
        known = ", ".join(RENDERERS)
        raise ValueError(f"unknown diagnostic format `{fmt}`, expected one of: {known}")
    return renderer(diagnostics, color=color)


__all__ = ["RENDERERS", "Renderer", "render"]
