"""Who imports torch (docs/design.md, "Who imports torch"): `ccogen/torch/` alone imports it
at module level; outside it, exactly the functions named below import it, when called,
and each of them works without it.  Any other import of torch fails here, as does a
listed function that no longer imports it or that docs/design.md stops naming."""

from __future__ import annotations

import ast
from pathlib import Path

import ccogen
from tests.helpers import REPO_ROOT

PACKAGE = Path(ccogen.__file__).resolve().parent

# module (under ccogen/) -> the functions in it that import torch when called
OUTSIDE = {
    "rt/rendezvous.py": {"TorchRendezvous._broadcast", "from_environment"},
    "bench/collective.py": {"run_collectives"},
    "bench/ceiling.py": {"_measure_torch"},
}


def _is_torch(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "torch" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == "torch"
    return False


def torch_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(qualified name of the enclosing function, or "" at module level, line) of every
    import of torch in `tree`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, scope: tuple[str, ...], in_function: bool) -> None:
        if _is_torch(node):
            found.append((".".join(scope) if in_function else "", getattr(node, "lineno", 0)))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, (*scope, child.name), True)
            elif isinstance(child, ast.ClassDef):
                visit(child, (*scope, child.name), in_function)
            else:
                visit(child, scope, in_function)

    visit(tree, (), False)
    return found


def _all() -> dict[str, list[tuple[str, int]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = torch_imports(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            out[path.relative_to(PACKAGE).as_posix()] = found
    return out


def test_the_scan_sees_imports_at_module_level_and_in_functions() -> None:
    text = ("import torch\nclass A:\n    def f(self):\n        from torch import cuda\n"
            "def g():\n    import torch.distributed as dist\n    import numpy\n")
    assert torch_imports(ast.parse(text)) == [("", 1), ("A.f", 4), ("g", 6)]


def test_only_ccogen_torch_imports_torch_at_module_level() -> None:
    offenders = [f"ccogen/{rel}:{line}" for rel, found in _all().items()
                 if not rel.startswith("torch/") for scope, line in found if scope == ""]
    assert offenders == []


def test_outside_ccogen_torch_only_the_listed_functions_import_torch() -> None:
    outside = {rel: {scope for scope, _ in found} for rel, found in _all().items()
               if not rel.startswith("torch/")}
    assert outside == OUTSIDE


def test_docs_design_names_every_function_that_imports_torch() -> None:
    design = (REPO_ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for rel, functions in OUTSIDE.items():
        module = rel.removesuffix(".py").replace("/", ".")
        for function in functions:
            assert f"`{module}.{function}`" in design, (module, function)
