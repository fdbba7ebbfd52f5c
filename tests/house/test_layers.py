"""Layer rules that the import-cycle test does not see (docs/design.md):

* `ccogen/toolchains` (`ccogen build`, no GPU) imports nothing of `ccogen/rt` (the GPU
  runtime), not even inside a function: the runtime builds through the toolchains, never
  the other way round;
* `ccogen/bench` uses the runtime through its public names only: no `_name` of `ccogen.rt`,
  imported or reached as an attribute of an imported rt module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ccogen

PACKAGE = Path(ccogen.__file__).resolve().parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(tree: ast.Module, package: str) -> list[str]:
    """`module.name` of every private name of `package` (`ccogen.rt`) that `tree` imports,
    or reaches as an attribute of a module of `package` it imported."""
    modules: set[str] = set()  # local names bound to a module of `package`
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == package or node.module.startswith(package + ".")):
            for a in node.names:
                if _private(a.name) or any(_private(p) for p in node.module.split(".")):
                    found.append(f"{node.module}.{a.name}")
                elif node.module == package:
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + ".") and a.asname:
                    modules.add(a.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in modules and _private(node.attr):
            found.append(f"{node.value.id}.{node.attr}")
    return sorted(found)


def imported_modules(tree: ast.Module) -> set[str]:
    """Every absolute module an import statement of `tree` names (module level or not)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_the_toolchains_import_nothing_of_the_runtime() -> None:
    offenders = {}
    for path in sorted((PACKAGE / "toolchains").rglob("*.py")):
        used = imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        bad = sorted(m for m in used if m == "ccogen.rt" or m.startswith("ccogen.rt."))
        if bad:
            offenders[path.name] = bad
    assert offenders == {}
    text = "def f():\n    from ccogen import rt\n    from ccogen.rt.native import load\n"
    assert {"ccogen.rt", "ccogen.rt.native"} <= imported_modules(ast.parse(text))


def test_the_scan_sees_private_names() -> None:
    text = ("from ccogen.rt.launch import RunConfig, _spawn\nfrom ccogen.rt import launch\n"
            "from ccogen.rt._x import y\nlaunch._Rank(1)\nlaunch.run()\n")
    assert private_uses(ast.parse(text), "ccogen.rt") == [
        "ccogen.rt._x.y", "ccogen.rt.launch._spawn", "launch._Rank"]


def test_bench_uses_only_the_public_names_of_the_runtime() -> None:
    offenders = {}
    for path in sorted((PACKAGE / "bench").rglob("*.py")):
        found = private_uses(ast.parse(path.read_text(encoding="utf-8")), "ccogen.rt")
        if found:
            offenders[path.name] = found
    assert offenders == {}
