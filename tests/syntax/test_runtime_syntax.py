"""Run-time values in the text (language v2 §3): `load`, `require`, generator sums,
single elements in `ensure`; the printer writes them back, the builder builds the same."""

from __future__ import annotations

from pathlib import Path

import pytest

import ccogen.builder as cg
from ccogen.errors import DiagnosticError
from ccogen.ir import nodes as ir
from ccogen.syntax import load_ir, parse_ir, to_source

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''protocol gather(cap: int = 64):
    team lsa
    window got: i32[nranks]
    window inbox: u8[nranks * cap]
    buffer counts: i32[nranks]
    buffer data: u8[cap]

    require:
        for p in ranks():
            0 <= counts[p] <= cap
        counts[me] == 0

    kernel k(threads=64):
        total = sum(load(got[p]) for p in peers())
        n = max(load((got@p)[0]) for p in peers())
        copy(dst=inbox[0:total], src=data[0:total])

    ensure:
        for p in peers():
            got[p] == init(counts@p)[me]
            inbox[0 : got[p]] == init(data@p)[0 : init(counts@p)[me]]
'''


def test_parse_lowers_run_time_forms() -> None:
    p = parse_ir(SOURCE, "g.cco")
    cond = p.require[0].body[0]  # type: ignore[union-attr]
    assert isinstance(cond, ir.Require) and isinstance(cond.cond, ir.Compare)
    load = cond.cond.operands[1]
    assert load == ir.Load(window="counts", index=ir.Var(name="p"), init=True)
    total = p.kernels[0].body[0]
    assert isinstance(total, ir.Assign) and isinstance(total.value, ir.GenExpr)
    assert total.value.elt == ir.Load(window="got", index=ir.Var(name="p"))
    check = p.ensure[0].body[0]  # type: ignore[union-attr]
    assert isinstance(check, ir.Check) and check.left.single and check.right.init  # type: ignore[union-attr]


def test_printer_round_trips() -> None:
    p = parse_ir(SOURCE, "g.cco")
    text = to_source(p)
    assert "load(got[p])" in text and "0 <= counts[p] <= cap" in text
    assert "init(counts@p)[me]" in text
    assert parse_ir(text, "again.cco") == p


@pytest.mark.parametrize("name", ["alltoallv", "moe_dispatch", "moe_combine"])
def test_library_protocols_round_trip(name: str) -> None:
    p = load_ir(ROOT / "protocols" / f"{name}.cco")
    assert parse_ir(to_source(p), "again.cco") == p


@pytest.mark.parametrize(("text", "message"), [
    ("    require:\n        0 <= load(counts[0]) <= 1\n", "`load` is for kernels"),
    ("    kernel k(threads=32):\n        n = counts[0]\n", "read with `load(...)` in a kernel"),
    ("    kernel k(threads=32):\n        n = load(counts[0:2])\n", "`load` reads one element"),
    ("    require:\n        counts[0]\n", "expected a condition"),
    ("    require:\n        lanes p in peers():\n            0 <= counts[p]\n",
     "`lanes` is not allowed in `require`"),
])
def test_misplaced_run_time_forms_are_e002(text: str, message: str) -> None:
    source = "protocol t():\n    team lsa\n    buffer counts: i32[4]\n\n" + text
    with pytest.raises(DiagnosticError) as info:
        parse_ir(source, "t.cco")
    diags = info.value.diagnostics
    assert any(d.code == "E002" and message in d.message for d in diags), diags


def test_a_peer_buffer_cannot_be_loaded() -> None:
    source = ("protocol t():\n    team lsa\n    buffer counts: i32[4]\n\n"
              "    kernel k(threads=32):\n        n = load(counts@0[1])\n")
    with pytest.raises(DiagnosticError) as info:
        parse_ir(source, "t.cco")
    assert [d.code for d in info.value.diagnostics] == ["E010"]


def test_builder_builds_what_the_text_says() -> None:
    p = cg.Protocol("gather", team=cg.lsa())
    cap = p.param("cap", cg.int_, default=64)
    got = p.window("got", cg.i32[p.nranks])
    inbox = p.window("inbox", cg.u8[p.nranks * cap])
    counts = p.buffer("counts", cg.i32[p.nranks])
    data = p.buffer("data", cg.u8[cap])
    with p.require() as r:
        with r.for_(r.ranks(), name="p") as q:
            r.check(cg.chain(0, "<=", cg.load(counts, q), "<=", cap))
        r.check(cg.load(counts, r.me) == 0)
    with p.kernel("k", threads=64) as k:
        total = k.let(cg.sum(k.each(k.peers(), lambda p: cg.load(got, p))), name="total")
        k.let(cg.max(k.each(k.peers(), lambda p: cg.load(got @ p, 0))), name="n")
        k.copy(dst=inbox[0:total], src=data[0:total])
    with p.ensure() as e, e.for_(e.peers(), name="p") as q:
        e.check(got[q] == cg.init(counts @ q)[e.me])
        e.check(inbox[0:cg.load(got, q)]
                == cg.init(data @ q)[0:cg.load(cg.init(counts @ q), e.me)])
    assert p.ir == parse_ir(SOURCE, "g.cco")
