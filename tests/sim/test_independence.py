"""The simulator is an independent judge: it must not use the checker."""

from __future__ import annotations

import ast

from tests.helpers import REPO_ROOT

FORBIDDEN = ("ccogen.analysis", "ccogen.passes", "ccogen.driver", "ccogen.codegen")


def _imports(path: str) -> set[str]:
    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_simulator_imports_no_checker_module() -> None:
    modules = sorted((REPO_ROOT / "ccogen" / "sim").glob("*.py"))
    assert modules
    for path in modules:
        used = _imports(str(path.relative_to(REPO_ROOT)))
        bad = [m for m in used if m.startswith(FORBIDDEN)]
        assert not bad, f"{path.name} imports {bad}"
