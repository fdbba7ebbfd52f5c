"""codegen.spell.c: the C literals both languages share."""

from __future__ import annotations

from ccogen.codegen.spell.c import cbool, i64, u64


def test_literals() -> None:
    assert (u64(0), u64(4096), i64(-3)) == ("0ULL", "4096ULL", "-3LL")
    assert (cbool(True), cbool(0)) == ("true", "false")
