"""`parse(print(p)) == p` for every protocol: the library, the spec and random ones."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from ccogen.ir import nodes as ir
from ccogen.syntax import parse_ir, to_source
from tests.strategies import protocols


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_print_then_parse_is_identity(p: ir.Protocol) -> None:
    text = to_source(p)
    assert parse_ir(text, "gen.cco") == p, text


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_printing_is_a_fixed_point(p: ir.Protocol) -> None:
    text = to_source(p)
    assert to_source(parse_ir(text)) == text
