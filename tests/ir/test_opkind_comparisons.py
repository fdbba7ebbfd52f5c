"""No code of the `ccogen` package tests an op's kind against a string.

Op kinds are `OpKind` members and what they are is a trait (`ccogen.ir.opkind`):
`op.kind.traits.queued`, `op.kind is OpKind.PUT`.  Because `OpKind` is a `StrEnum`,
`op.kind == "put"` still works at run time, so only this test keeps it out.

It walks every module's syntax tree and reports a comparison (`==`, `!=`, `in`,
`not in`) of something named `kind` (a name, or an attribute `.kind`) with a string
literal, or a literal tuple, list or set of strings, where one of the strings is an
op kind's name; string methods (`.kind.startswith("wait")`) on such a name; and any
literal tuple, list or set of two or more op names (a local set of kinds, such as
`TRANSFERS = frozenset({"put", "get"})`, is a trait the table lacks) or dict literal
keyed by two or more op names (a table keyed by `OpKind` instead).

Other vocabularies share the name `kind` (diagnostic labels, trace records, a
signature's argument kinds, issuer blocks, ...); their strings are not op names,
so they are left alone.  Codegen's step kinds share op names (`copy`, `barrier`,
`quiet`, `fence` are also steps) but are `StepKind` members, never strings
(`ccogen.codegen.steps`; tests/house/test_step_kinds.py): `ccogen/codegen` is checked
like every other package, with no exemption.  Since the
`signal` op (language v2), two more vocabularies share the word `signal`: a wait's
kind (`WaitMatch.kind`, `"signal"` or `"count"`, receiver `w`) and a signature's
argument kind (`"signal"` for `signal=`, receiver `kind` in the modules that read
signatures); `OTHER_VOCABULARIES` names those receivers per module.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ccogen.ir.opkind import OpKind
from tests.helpers import REPO_ROOT

OP_NAMES = frozenset(k.value for k in OpKind)
STRING_METHODS = frozenset({"startswith", "endswith", "partition", "split", "find", "index"})

@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def _receiver(node: ast.expr) -> str | None:
    """`op` for `op.kind`, `self.steps` for `self.steps[-1].kind`, `kind` for `kind`."""
    if isinstance(node, ast.Name):
        return node.id if node.id == "kind" else None
    if not (isinstance(node, ast.Attribute) and node.attr == "kind"):
        return None
    base = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return ast.unparse(base)


def _op_names(node: ast.expr) -> set[str]:
    """The op names among a string literal or a literal tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & OP_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_op_names(e) for e in node.elts)) if node.elts else set()
    return set()


OTHER_VOCABULARIES: dict[str, frozenset[str]] = {
    "ccogen/analysis/matching.py": frozenset({"w"}),
    "ccogen/passes/check_signals.py": frozenset({"w"}),
    "ccogen/builder/scopes.py": frozenset({"kind"}),
    "ccogen/syntax/lower.py": frozenset({"kind"}),
    "ccogen/syntax/printer.py": frozenset({"kind"}),
}
"""Receivers of another vocabulary that shares the op name `signal`, per module."""


def _allowed(path: str, receiver: str) -> bool:
    return receiver in OTHER_VOCABULARIES.get(path, frozenset())


def _comparisons(tree: ast.AST, path: str) -> list[Finding]:
    found: list[Finding] = []
    reported: set[int] = set()  # literals already reported with their comparison
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                    continue
                for side, other in ((left, right), (right, left)):
                    who = _receiver(side)
                    if who is not None and _op_names(other) and not _allowed(path, who):
                        found.append(Finding(path, node.lineno, ast.unparse(node)))
                        reported.add(id(other))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in STRING_METHODS):
            who = _receiver(node.func.value)
            if who is not None and not _allowed(path, who):
                found.append(Finding(path, node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Tuple | ast.List | ast.Set) and id(node) not in reported
              and _all_op_names(node.elts)):
            found.append(Finding(path, node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Dict) and _all_op_names(node.keys):
            found.append(Finding(path, node.lineno, f"{{{ast.unparse(node.keys[0])}: ...}}"))
    return found


def _all_op_names(elts: list[ast.expr] | list[ast.expr | None]) -> bool:
    """Two or more literals, all op names: a local set of kinds (or a table keyed by them)."""
    names = [e.value for e in elts if isinstance(e, ast.Constant)]
    return (len(names) == len(elts) >= 2
            and all(isinstance(n, str) and n in OP_NAMES for n in names))


def string_kind_tests(source: str, path: str) -> list[Finding]:
    return _comparisons(ast.parse(source), path)


# ----------------------------------------------------------------------------- the package


def test_no_module_compares_an_op_kind_with_a_string() -> None:
    modules = sorted((REPO_ROOT / "ccogen").rglob("*.py"))
    assert len(modules) > 50
    found: list[Finding] = []
    for module in modules:
        path = Path(module).relative_to(REPO_ROOT).as_posix()
        found += string_kind_tests(module.read_text(encoding="utf-8"), path)
    assert not found, (
        "op kinds are OpKind members: ask a trait (`op.kind.traits.queued`) or compare "
        "identity (`op.kind is OpKind.PUT`):\n" + "\n".join(map(str, found)))


# ----------------------------------------------------------------------------- the check itself


def _found(code: str, path: str = "ccogen/passes/x.py") -> list[str]:
    return [f.text for f in string_kind_tests(textwrap.dedent(code), path)]


def test_it_reports_every_form_of_string_test() -> None:
    code = """
        a = op.kind == "put"
        b = "fence" != ops[0].kind
        c = kind in ("put", "get")
        d = o.kind not in {"wait_signal", "barrier"}
        e = op.kind in ["copy"]
        f = op.kind.startswith("wait")
        g = 0 < n == kind == "quiet"
    """
    assert len(_found(code)) == 7


def test_it_reports_local_sets_of_kinds() -> None:
    code = """
        TRANSFERS = frozenset({"put", "get"})
        WAITS = ("wait_signal", "wait_count", "barrier")
        batches(ops, ["put", "get"])
    """
    assert len(_found(code)) == 3
    assert _found('T = {"put": 1, "get": 2}') == ["{'put': ...}"]
    assert _found('a = ("sync", "barrier")\nb = ("barrier",)\nc = {"put": 1, "sync": 2}') == []


def test_it_leaves_other_vocabularies_and_enum_tests_alone() -> None:
    code = """
        a = op.kind is OpKind.PUT
        b = op.kind.traits.queued
        c = r.kind == "xfer"
        d = w.kind in ("slot", "counter")
        e = frame.kind in ("lanes", "warps", "blocks")
        f = spec.kind == "region"
        g = op.kind in kinds
        h = name == "put"
        i = op.kind == other.kind
    """
    assert _found(code) == []


def test_codegen_has_no_exemption() -> None:
    code = """
        a = s.kind == "barrier"
        b = self.steps[-1].kind in ("copy", "sync")
        c = window[3].kind == "put"
        d = s.kind is StepKind.BARRIER
    """
    assert len(_found(code, "ccogen/codegen/ctasplit.py")) == 3
    assert len(_found(code, "ccogen/passes/x.py")) == 3
    assert len(_found('a = op.kind == "copy"', "ccogen/codegen/plan.py")) == 1
