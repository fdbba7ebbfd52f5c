"""No string step kinds in code generation: `ccogen/codegen` and the templates.

A step's kind is a `StepKind` member and a mori-sdma statement's a `StmtKind` member
(`ccogen.codegen.steps`); both are plain `Enum`s, so `s.kind == "copy"` is always false
at run time and would silently skip a branch.  This test reports, in every module of
`ccogen/codegen/`, with no exemption by variable name:

- a comparison (`==`, `!=`, `in`, `not in`, `is`, `is not`) of something named `kind`
  (a name, or an attribute `.kind`) with a string literal, or a literal tuple, list or
  set holding one, and string methods on such a name (`.kind.startswith("c")`);
- a `kind="..."` keyword argument (a rewrite such as `replace(s, kind="csignal")`) and a
  `Step("copy")` / `Stmt("call")` whose kind is a string;
- a literal tuple, list or set of two or more step or statement kind names, or a dict
  keyed by them (a local family of kinds spelled as strings);

and, in every template, a Jinja expression or statement that reads a `.kind` (a kind
ladder: what a step prints is decided in `ccogen/codegen/spell/`).
"""

from __future__ import annotations

import ast
import itertools
import re
import textwrap
from pathlib import Path

from ccogen.codegen.steps import StepKind, StmtKind
from tests.helpers import REPO_ROOT

CODEGEN = REPO_ROOT / "ccogen" / "codegen"
TEMPLATES = REPO_ROOT / "templates"
KIND_NAMES = frozenset(k.value for k in StepKind) | frozenset(k.value for k in StmtKind)
STRING_METHODS = frozenset({"startswith", "endswith", "partition", "split", "find", "index"})
CONSTRUCTORS = frozenset({"Step", "Stmt"})
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
_KIND = re.compile(r"\.kind\b|\bkind\s*(==|!=|\bin\b|\bis\b)")


def _is_kind(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kind") or (
        isinstance(node, ast.Attribute) and node.attr == "kind")


def _has_string(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_has_string(e) for e in node.elts)
    return False


def _kind_names(elts: list[ast.expr] | list[ast.expr | None]) -> bool:
    """Two or more literals, all kind names."""
    names = [e.value for e in elts if isinstance(e, ast.Constant)]
    return (len(names) == len(elts) >= 2
            and all(isinstance(n, str) and n in KIND_NAMES for n in names))


def string_kinds(source: str, path: str) -> list[str]:
    """`path:line: code` of every string use of a kind in `source` (module doc)."""
    found: list[str] = []
    reported: set[int] = set()

    def report(node: ast.AST, text: str) -> None:
        found.append(f"{path}:{getattr(node, 'lineno', 0)}: {text}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for left, right in itertools.pairwise(operands):
                for side, other in ((left, right), (right, left)):
                    if _is_kind(side) and _has_string(other):
                        report(node, ast.unparse(node))
                        reported.add(id(other))
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in STRING_METHODS
                    and _is_kind(func.value)):
                report(node, ast.unparse(node))
            for kw in node.keywords:
                if kw.arg == "kind" and _has_string(kw.value):
                    report(node, ast.unparse(node))
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in CONSTRUCTORS and node.args and _has_string(node.args[0]):
                report(node, ast.unparse(node))
        elif (isinstance(node, ast.Tuple | ast.List | ast.Set) and id(node) not in reported
              and _kind_names(node.elts)):
            report(node, ast.unparse(node))
        elif isinstance(node, ast.Dict) and _kind_names(node.keys):
            report(node, f"{{{ast.unparse(node.keys[0])}: ...}}")  # type: ignore[arg-type]
    return found


def template_kinds(text: str, path: str) -> list[str]:
    """`path:line: tag` of every Jinja tag of `text` that reads a kind."""
    return [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
            for m in _JINJA.finditer(text) if _KIND.search(m[0])]


# ----------------------------------------------------------------------------- the tree


def test_no_codegen_module_uses_a_string_kind() -> None:
    modules = sorted(CODEGEN.rglob("*.py"))
    assert len(modules) > 25 and CODEGEN / "backends" / "mori_sdma.py" in modules
    # the lowering passes (codegen/lower/: mori-sdma's today) and the spelling modules
    assert {CODEGEN / "lower" / "mori.py", CODEGEN / "lower" / "mori_ops.py",
            CODEGEN / "lower" / "mori_lanes.py", CODEGEN / "spell" / "hip.py"} <= set(modules)
    found = [f for m in modules for f in string_kinds(
        m.read_text(encoding="utf-8"), Path(m).relative_to(REPO_ROOT).as_posix())]
    assert not found, (
        "step kinds are StepKind (statement kinds StmtKind) members: compare identity "
        "(`s.kind is StepKind.COPY`), ask a family (`s.kind in MOVES_DATA`), rewrite with "
        "`replace(s, kind=StepKind.CSIGNAL)`:\n" + "\n".join(found))


def test_no_template_reads_a_kind() -> None:
    templates = sorted(TEMPLATES.rglob("*.j2"))
    assert any(t.name == "_steps.j2" for t in templates)
    assert any(t.name == "kernels.hip.j2" for t in templates)
    found = [f for t in templates for f in template_kinds(
        t.read_text(encoding="utf-8"), Path(t).relative_to(REPO_ROOT).as_posix())]
    assert not found, ("a template prints what Python decided (ccogen/codegen/spell/): no "
                       "kind ladder:\n" + "\n".join(found))


# ----------------------------------------------------------------------------- the check itself


def _found(code: str) -> list[str]:
    return string_kinds(textwrap.dedent(code), "ccogen/codegen/x.py")


def test_it_reports_every_string_use_of_a_kind() -> None:
    code = """
        a = s.kind == "put"
        b = "copy" != steps[0].kind
        c = kind in ("sync", "barrier")
        d = st.kind not in {"csignal", "whatever"}
        e = self.steps[-1].kind is "sync"
        f = s.kind.startswith("c")
        g = replace(s, kind="csignal")
        h = Step("copy", nbytes=16)
        i = model.Stmt("call", func="f")
        j = frozenset({"comment", "sync", "signal"})
        k = {("sync", "signal"): "putsig"}
        m = {"sync": 1, "loop": 2}
    """
    found = _found(code)
    assert len(found) == 12, found
    # every receiver name is covered: no exemption for the step variables of codegen
    assert _found('x = window.kind == "put"') and _found('x = out[1].kind in ("copy",)')


def test_it_leaves_enum_kinds_and_other_strings_alone() -> None:
    code = """
        a = s.kind is StepKind.COPY
        b = s.kind in MOVES_DATA
        c = replace(s, kind=StepKind.CSIGNAL)
        d = Step(StepKind.COPY, text="copy")
        e = scope == "warp"
        f = SLOTS = ("dst_off", "src_off", "nbytes")
        g = {"block": "__syncthreads()", "warp": "ccogen_sync_wave()"}
        h = ("copy",)
        i = op.kind is OpKind.PUT
        j = f"ccogen_{s.kind.value}_{scope}"
    """
    assert _found(code) == []


def test_it_reports_a_kind_ladder_in_a_template() -> None:
    ladder = textwrap.dedent("""\
        {% for s in steps %}
        {% if s.kind == "copy" %}
        copy({{ s.dst_off }});
        {% elif s.kind in ("signal", "csignal") %}
        ccogen_{{ s.kind }}_group(c);
        {% endif %}
        {% endfor %}
        r->kind = 4;  // C text, not Jinja
        """)
    found = template_kinds(ladder, "templates/x.j2")
    assert [f.split(": ", 1)[0] for f in found] == ["templates/x.j2:2", "templates/x.j2:4",
                                                    "templates/x.j2:5"]
    assert template_kinds("{{ s | cuda(scope, '  ') }}\nr->kind = 4;\n", "t.j2") == []
