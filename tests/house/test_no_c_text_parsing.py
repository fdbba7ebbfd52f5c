"""Code generation decides on typed values, never on printed C (issue 26 item 2).

A pass is a function from steps to steps: what it decides (a row's stride, a source's
peer, a loop's trip count) it reads from typed fields (`steps.Step`, `steps.Affine`), and
C text is written once, by the spelling modules (`ccogen/codegen/spell/`).  This test
reports every module of `ccogen/codegen/` outside `spell/` that uses `re` (the module,
imported by any name, or a name imported from it): a regular expression there matches
text, and the only text a pass sees is what was spelled.

Two kinds of modules are listed below with their reason, and the list must stay exact (a
module that no longer uses `re` must leave it):

- `USER_TEXT`: modules that handle the protocol's own text (its name, its source shown in
  comments), never a spelled expression;
- `PENDING`: the literal-template passes that still fold by the integer literals of
  printed C texts (docs/design.md, "Typed values, not C text"): they shrink to nothing as
  their run-time texts become typed trees.
"""

from __future__ import annotations

import ast
import textwrap

from tests.helpers import REPO_ROOT

CODEGEN = REPO_ROOT / "ccogen" / "codegen"
USER_TEXT = {
    "naming.py": "a C identifier made of a protocol's name",
    "text.py": "the protocol's source, escaped for C comments and string literals",
}
PENDING = {
    "reroll.py": "the literals of run-time texts (`rt`, `let`, weights) moved by the trip",
    "loops.py": "a sampled loop's run-time texts moved to iteration k",
    "ranks.py": "the literals of every printed slot fitted to `c.rank`, and `at_rank`",
}


def regex_uses(source: str) -> list[int]:
    """The lines of `source` that import `re` or a name of it, or use the module."""
    tree = ast.parse(source)
    names: set[str] = set()
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "re":
                    names.add(a.asname or "re")
                    lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "re" and node.level == 0:
            lines.append(node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in names:
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_pass_matches_c_text() -> None:
    modules = sorted(p for p in CODEGEN.rglob("*.py")
                     if "spell" not in p.relative_to(CODEGEN).parts)
    assert CODEGEN / "spread.py" in modules and CODEGEN / "backends" / "sm.py" in modules
    found = {p.relative_to(CODEGEN).as_posix(): regex_uses(p.read_text(encoding="utf-8"))
             for p in modules}
    found = {name: lines for name, lines in found.items() if lines}
    listed = USER_TEXT | PENDING
    unexpected = {name: lines for name, lines in found.items() if name not in listed}
    assert not unexpected, (
        "a pass decides on typed values (steps.Step, steps.Affine), not on printed C: no `re` "
        "outside ccogen/codegen/spell/ (lines): " + repr(unexpected))
    stale = sorted(name for name in listed if name not in found)
    assert not stale, f"these modules no longer use `re`: take them off the list: {stale}"


def test_the_scan_sees_every_spelling_of_a_regex() -> None:
    code = textwrap.dedent("""\
        import re
        import re as regex
        from re import fullmatch
        _ROW = re.compile(r"(\\d+)LL")
        m = regex.match("a", "b")
        def f(text):
            import re
            return re.sub("x", "y", text)
        """)
    assert regex_uses(code) == [1, 2, 3, 4, 5, 7, 8]
    assert regex_uses("import itertools\nx = text.split(': ')\nre = 3\n") == []
