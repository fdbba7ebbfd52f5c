"""The reference pages hang together: the catalogue lists every rule, links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccogen.diag.codes import RULES

ROOT = Path(__file__).resolve().parent.parent.parent
REFERENCE = ROOT / "docs" / "reference"
PAGES = sorted(REFERENCE.glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_catalogue_lists_every_rule_once_with_its_page_and_slug() -> None:
    text = (REFERENCE / "rules.md").read_text(encoding="utf-8")
    for code, rule in RULES.items():
        rows = [line for line in text.splitlines() if line.startswith(f"| [{code}](")]
        assert len(rows) == 1, code
        assert rows[0].startswith(f"| [{code}](rules/{code}.md) | `{rule.slug}` |"), rows[0]
    listed = set(re.findall(r"^\| \[([EWN]\d{3})\]", text, re.M))
    assert listed == set(RULES)


def test_the_index_names_every_page() -> None:
    index = (REFERENCE / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{page.name}: {target}"
