"""Rule explanations: `ccogen explain CODE` reads them from one Markdown file per rule.

The files are `docs/reference/rules/CODE.md` in a checkout and `ccogen/rules/CODE.md` in a
wheel (`ccogen._resources.rules_dir`).  Each starts with the title line
`# CODE (slug): summary` (the registry's, `ccogen.diag.codes`, which imports this module:
never the other way round), followed by four
sections: `## What it catches`, `## Why it matters` (with the figure a warning rests on),
`## Example` (a protocol that reports the rule, fenced as ```` ```python fails ````) and
`## Fixed` (the corrected protocol, ```` ```python passes ````).  The tests lint every
example, so the files cannot drift from the checks.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ccogen._resources import rules_dir
from ccogen.errors import InternalError


def rule_file(code: str) -> Path:
    """The Markdown file that explains rule `code` (which need not exist)."""
    return rules_dir() / f"{code}.md"


@functools.cache
def explanation(code: str) -> str:
    """The explanation of rule `code`: its file without the title line, stripped.

    Raises `InternalError` when the file is missing or does not start with the rule's
    title: ccogen was installed without its rule files, or they disagree with the registry.
    """
    path = rule_file(code)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InternalError(f"the explanation of {code} is missing: cannot read {path} "
                            f"({exc.strerror or exc})") from None
    title, _, body = text.partition("\n")
    if not title.startswith(f"# {code} "):
        raise InternalError(f"{path} does not start with `# {code} (...)`")
    return body.strip()



__all__ = ["explanation", "rule_file"]
