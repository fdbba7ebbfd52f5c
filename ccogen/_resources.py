"""Where the data directories shipped with ccogen live (templates/, protocols/, the rules).

In a wheel they are inside the package (`ccogen/templates`, `ccogen/protocols`, `ccogen/rules`,
placed there by `wheel.force-include` in pyproject.toml).  In a source checkout or an editable
install they are directories of the repository (the rules: docs/reference/rules/), which are
preferred so that edits are seen without reinstalling (an editable install holds only a copy
made at install time).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str, source: str | None = None) -> Path:
    """`ccogen/NAME` in a wheel; `SOURCE` (default NAME) of the repository in a checkout."""
    source_tree = _PACKAGE_DIR.parent / (source or name)
    if (_PACKAGE_DIR.parent / "pyproject.toml").is_file() and source_tree.is_dir():
        return source_tree
    return _PACKAGE_DIR / name


def templates_dir() -> Path:
    """Root of the Jinja templates (contains common/ and one directory per backend)."""
    return _data_dir("templates")


def protocols_dir() -> Path:
    """Root of the example protocols (*.cco)."""
    return _data_dir("protocols")


def rules_dir() -> Path:
    """The rule explanations, `CODE.md` per rule (docs/reference/rules/ in a checkout)."""
    return _data_dir("rules", "docs/reference/rules")
