"""torch is optional: `import ccogen` never imports it, no module outside ccogen/torch
imports it at module level, the torch-free parts of ccogen.torch never import it, and the
torch-facing names say how to install it when it is absent."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ccogen
from tests.helpers import run_child

PACKAGE = Path(ccogen.__file__).resolve().parent
TORCH_FREE = ("__init__.py", "errors.py", "spec.py", "args.py", "loader.py", "device.py")


def _imports_torch(node: ast.AST) -> bool:
    """An `import torch...` or `from torch... import` statement."""
    if isinstance(node, ast.Import):
        return any(a.name == "torch" or a.name.startswith("torch.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == "torch"
    return False


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """Statements that run at import: the top level, and inside its if/try/with blocks."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []))
        if isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)
    return out


def test_no_module_outside_ccogen_torch_imports_torch_at_import_time() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "torch":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{rel}:{getattr(n, 'lineno', 0)}" for n in _module_level(tree)
                      if _imports_torch(n)]
    assert offenders == []


def test_the_torch_free_parts_of_the_binding_never_import_torch() -> None:
    for name in TORCH_FREE:
        tree = ast.parse((PACKAGE / "torch" / name).read_text(encoding="utf-8"))
        found = [getattr(n, "lineno", 0) for n in ast.walk(tree) if _imports_torch(n)]
        if name == "__init__.py":  # the lazy check of __getattr__, nothing else
            assert len(found) <= 1, found
        else:
            assert found == [], (name, found)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return run_child([sys.executable, "-c", code], cpu_s=120)


def test_importing_ccogen_and_the_torch_free_parts_loads_no_torch() -> None:
    done = _run("import sys, ccogen, ccogen.rt, ccogen.torch, ccogen.torch.spec, "
                "ccogen.torch.args, ccogen.torch.loader, ccogen.torch.device; "
                "print('torch' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_without_torch_the_binding_says_how_to_install_it() -> None:
    done = _run("import sys; sys.modules['torch'] = None\n"
                "from ccogen.torch import ArgumentError\n"
                "try:\n"
                "    from ccogen.torch import Communicator\n"
                "except ImportError as exc:\n"
                "    print(exc)\n")
    assert done.returncode == 0, done.stderr
    assert "pip install 'ccogen[torch]'" in done.stdout
