"""The language reference's target table (§14, "Targets") says what the capability
table says: a `reduce` loading a peer's window, `signal` and a converting `reduce`, per
target."""

from __future__ import annotations

import re

from ccogen.targets import TARGETS
from ccogen.targets.base import Feature, Support
from tests.helpers import REPO_ROOT

LANGUAGE = REPO_ROOT / "docs" / "reference" / "language.md"


def _rows() -> dict[str, list[str]]:
    text = LANGUAGE.read_text(encoding="utf-8")
    table = text[text.index("### Targets\n"):]
    table = table[:table.index("\n\n", table.index("| target |"))]
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = re.fullmatch(r"`([\w-]+)`", cells[0])
        if name:
            rows[name.group(1)] = cells[1:]
    return rows


def test_every_target_has_a_row_that_says_what_it_lowers() -> None:
    rows = _rows()
    assert set(rows) == set(TARGETS)
    for name, target in TARGETS.items():
        caps = target.capabilities
        _, peer_reads, signal, converting = rows[name]
        for feature, cell in ((Feature.PEER_READS, peer_reads), (Feature.CREDITS, signal),
                              (Feature.CONVERTING_REDUCE, converting)):
            how: Support = caps.supports(feature)
            assert cell.split(":")[0] == how.value, (name, feature, cell)
            assert (how is Support.NONE) == ("E042" in cell), (name, feature, cell)
