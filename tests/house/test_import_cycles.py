"""No import circles inside `ccogen/`: every import that can run (module level or inside a
function) between ccogen modules is an edge; the graph must be acyclic.  Imports under
`if TYPE_CHECKING:` never run (they serve annotations only) and are not edges."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import ccogen

PACKAGE = Path(ccogen.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """The .py modules, and the compiled extensions their .pyi stubs stand for
    (`from ccogen import _ccogen_rt` imports the extension, not the package)."""
    found = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.pyi"))}
    found.update({_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))})
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` (a module or a name inside one) refers to."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` except what sits under `if TYPE_CHECKING:`."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)
    return out


def import_graph() -> nx.DiGraph:
    known = _modules()
    graph = nx.DiGraph()
    for module, path in known.items():
        graph.add_node(module)
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module if is_package else module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != module:
                    graph.add_edge(module, resolved)
    return graph


def test_the_graph_sees_imports() -> None:
    graph = import_graph()
    assert graph.has_edge("ccogen.cli.main", "ccogen.cli.lint")
    assert graph.has_edge("ccogen.rt.native", "ccogen._ccogen_rt")  # the extension, by its stub
    assert graph.number_of_edges() > 100


def test_type_checking_imports_are_not_edges() -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nimport b\n"
    tree = ast.parse(text)
    names = [a.name for n in _runtime_nodes(tree) if isinstance(n, ast.Import) for a in n.names]
    assert names == ["b"]


def test_no_import_cycles() -> None:
    cycles = sorted(sorted(c) for c in nx.simple_cycles(import_graph()))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:20])
