"""`diag.merge`: one finding per mistake, whatever numbers it names."""

from __future__ import annotations

from ccogen.diag import error
from ccogen.diag.merge import FindingSet, is_ranks_note, message_shape, ranks_note, shape_key
from ccogen.source import SourceFile, Span

FILE = SourceFile("p.cco", "x" * 40)


def _span(start: int) -> Span:
    return Span(FILE, start, start + 4)


def test_message_shape_takes_out_numbers_only() -> None:
    assert (message_shape("region `x[262144:786432]` is outside window `x` of 524288 bytes")
            == "region `x[#:#]` is outside window `x` of # bytes")
    assert message_shape("`a` holds bf16 and `b` holds f32") == "`a` holds bf16 and `b` holds f32"
    assert message_shape("peer `nranks + p_1` is -1") == "peer `nranks + p_1` is #"


def test_shape_key_merges_numbers_not_places_or_codes() -> None:
    found: FindingSet[int] = FindingSet(shape_key)
    found.add(error("E003", "region `x[0:8]` is empty", _span(10)), 0)
    found.add(error("E003", "region `x[8:16]` is empty", _span(10)), 1)
    found.add(error("E003", "region `x[8:16]` is empty", _span(20)), 1)
    found.add(error("E010", "region `x[8:16]` is empty", _span(10)), 1)
    found.add(error("E003", "region `x[8:16]` is outside window `x` of 8 bytes", _span(10)), 1)
    entries = list(found)
    assert len(entries) == 4
    assert entries[0].diagnostic.message == "region `x[0:8]` is empty"
    assert entries[0].where == [0, 1]


def test_ranks_notes_are_recognised() -> None:
    for ranks, n in (([1], 4), ([0, 2], 4), ([0, 1, 2, 3], 4)):
        assert is_ranks_note(ranks_note(ranks, n))
    assert not is_ranks_note("in the instance nranks=2")
