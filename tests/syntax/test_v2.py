"""Language v2 in the text front end: typed windows, dtype parameters, buffers, reduce,
signal, assignments, comprehensions, float weights, `sum/max/min` in `ensure`, and
`ccogen fmt` keeping literals as written."""

from __future__ import annotations

import pytest

from ccogen.errors import DiagnosticError
from ccogen.instantiate import instantiate, parse_param_value
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.syntax import parse_ir, to_source
from ccogen.syntax.format import format_text

HEAD = "protocol p(n: int = 16, T: dtype = bf16):\n    team lsa(2)\n"


def _parse(body: str, decls: str = "    window x: T[n]\n    window y: T[n]\n") -> ir.Protocol:
    return parse_ir(HEAD + decls + "\n    kernel k(threads=32):\n" + body)


def _error(text: str) -> tuple[str, str]:
    with pytest.raises(DiagnosticError) as info:
        parse_ir(text)
    d = info.value.diagnostics[0]
    return d.code, d.message


def test_typed_windows_dtype_parameters_and_buffers() -> None:
    p = _parse("        pass\n",
               "    window x: T[n]\n    window raw: 64\n    buffer out: f32[2 * n]\n")
    assert p.param("T") == ir.Param(name="T", type=ir.ParamType.DTYPE, default=DType.BF16)
    x, raw = p.windows
    assert x.dtype == ir.ParamRef(name="T") and x.size == ir.ParamRef(name="n")
    assert raw.dtype is DType.U8
    assert p.buffers == (ir.Buffer(name="out", dtype=DType.F32,
                                   size=ir.BinOp(op="*", left=ir.Const(value=2),
                                                 right=ir.ParamRef(name="n"))),)
    # `u8[64]` and `64` are one window; the printer writes the untyped form
    assert parse_ir(to_source(p)) == p
    assert "window raw: 64" in to_source(p)


def test_slices_of_typed_windows_count_elements() -> None:
    p = _parse("        copy(dst=y[2:4], src=x[0:2])\n")
    inst, diags = instantiate(p, 2, {"T": DType.F32})
    assert inst is not None and not diags
    op = inst.ranks[0][0]
    assert (op.dst.start, op.dst.stop, op.src.start, op.src.stop) == (8, 16, 0, 8)
    assert inst.dtype("x") is DType.F32 and dict(inst.dtype_params) == {"T": DType.F32}
    assert inst.label() == "nranks=2, n=16, T=f32"


def test_reduce_with_peer_sources_weights_and_comprehensions() -> None:
    p = _parse('        reduce(dst=y, srcs=[x@q for q in ranks() if q != me], op="sum", '
               'weights=[0.5])\n        reduce(dst=y, srcs=[y, (x@1)[0:n]], op="max")\n')
    first, second = p.kernels[0].body
    assert isinstance(first, ir.Reduce) and isinstance(first.srcs, ir.ListComp)
    assert first.weights == (ir.Const(value=0.5),)
    assert isinstance(second, ir.Reduce) and second.op is ir.ReduceOp.MAX
    assert parse_ir(to_source(p)) == p
    inst, _ = instantiate(p, 2, {})
    assert inst is not None
    op = inst.ranks[0][0]
    assert [s.rank for s in op.srcs] == [1] and op.weights == (0.5,)
    assert op.dtype is DType.BF16 and op.reduce_op is ir.ReduceOp.SUM


def test_signal_and_assignments() -> None:
    p = _parse("        right = (me + 1) % nranks\n        signal(right, queue=0)\n"
               "        wait_signal(right, queue=0)\n")
    assign, sig, _ = p.kernels[0].body
    assert assign == ir.Assign(var="right", value=ir.BinOp(
        op="%", left=ir.BinOp(op="+", left=ir.Me(), right=ir.Const(value=1)),
        right=ir.NRanks()))
    assert sig == ir.Signal(peer=ir.Var(name="right"), queue=ir.Const(value=0))
    assert parse_ir(to_source(p)) == p
    inst, _ = instantiate(p, 2, {})
    assert inst is not None
    s = inst.ranks[0][0]
    assert (s.peer, s.queue, s.signal) == (1, 0, ir.SignalKind.REMOTE)


def test_reductions_in_ensure() -> None:
    text = (HEAD + "    window x: T[n]\n    buffer out: T[n]\n\n    kernel k(threads=32):\n"
            "        pass\n\n    ensure:\n        out == sum(init(x@q) for q in ranks())\n"
            "        out != max([init(x), x])\n        sum([init(x), x], weights=[2, 1]) == out\n")
    p = parse_ir(text)
    first, second, third = p.ensure
    assert isinstance(first, ir.Check) and isinstance(first.right, ir.Reduction)
    assert isinstance(second.right, ir.Reduction) and second.right.op is ir.ReduceOp.MAX
    assert third.left == ir.Region(window="out")  # the reduction goes right
    assert parse_ir(to_source(p)) == p
    inst, _ = instantiate(p, 2, {})
    assert inst is not None
    c = inst.checks[0]
    assert c.right is None and c.reduction is not None
    assert [t.rank for t in c.reduction.terms] == [0, 1] and all(c.reduction.init)
    assert inst.checks[2].reduction is not None and inst.checks[2].reduction.weights == (2, 1)


@pytest.mark.parametrize(("text", "code", "message"), [
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        copy(dst=x[0:T], src=x[0:1])\n",
     "E002", "`T` is an element type, not a number"),
    (HEAD + "    window x: bf16\n", "E002", "`bf16` is an element type, not a size"),
    (HEAD + "    buffer b: n\n", "E002", "buffer `b` needs an element type and a count"),
    ("protocol p(T: dtype = 4):\n    team lsa\n", "E002",
     "a `dtype` parameter's default is an element type"),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        copy(dst=x[0:1.5], src=x)\n",
     "E002", "a float is only allowed as a `reduce` weight"),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        put(1, dst=x@1, src=x)\n",
     "E002", "`w@p` is only allowed in `ensure` and in the `srcs` of `reduce`"),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n"
     "        reduce(dst=x, srcs=[x], op=\"max\", weights=[1])\n",
     "E002", '`weights=` only goes with `op="sum"`, not `"max"`'),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        reduce(dst=x, srcs=[])\n",
     "E002", "an empty list of regions"),
    (HEAD + "    window x: n\n\n    ensure:\n        sum([x]) == max([x])\n",
     "E002", "a comparison of two reductions"),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        n2 = sum(1)\n",
     "E002", "`sum` is only allowed on the right of an `ensure` comparison"),
    (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        x = 1\n",
     "E002", "name `x` shadows another name"),
])
def test_mistakes_are_E002(text: str, code: str, message: str) -> None:
    assert _error(text) == (code, message)


def test_a_name_is_bound_for_the_rest_of_its_block() -> None:
    text = (HEAD + "    window x: n\n\n    kernel k(threads=32):\n        if me == 0:\n"
            "            a = 1\n            a = 2\n        copy(dst=x[0:a], src=x[1:2])\n")
    assert _error(text) == ("E002", "unknown name `a`")


def test_instantiation_errors() -> None:
    def diags(body: str, decls: str) -> list[tuple[str, str]]:
        p = _parse(body, decls)
        _, found = instantiate(p, 2, {})
        return [(d.code, d.message) for d in found]

    assert diags("        copy(dst=y, src=x)\n", "    window x: f32[n]\n    window y: i32[n]\n"
                 ) == [("E003", "`y` holds i32 and `x` holds f32")]
    assert diags("        copy(dst=y, src=x)\n", "    window x: f32[n]\n    window y: 4 * n\n"
                 ) == []
    assert diags("        if me == 0:\n            put(1, dst=b, src=x)\n",
                 "    window x: f32[n]\n    buffer b: f32[n]\n") == [
        ("E010", "buffer `b` is local: it cannot be the destination of a `put` (the peer's "
                 "memory)")]
    assert diags("        reduce(dst=y, srcs=[b@(1 - me)])\n",
                 "    window y: f32[n]\n    buffer b: f32[n]\n") == [
        ("E010", "buffer `b` is local: it cannot be read on another rank")]
    assert diags("        reduce(dst=y[0:2], srcs=[y[0:3]])\n", "    window y: f32[n]\n") == [
        ("E003", "`dst` and a source differ in length: 8 and 12 bytes")]
    assert diags("        reduce(dst=y, srcs=[y, y], weights=[1])\n",
                 "    window y: f32[n]\n") == [("E003", "`reduce` has 2 sources and 1 weights")]
    assert diags("        copy(dst=y[0:n + 1], src=y[0:1])\n", "    window y: f32[n]\n") == [
        ("E003", "region `y[0:17]` is outside window `y` of 16 f32 elements")]


def test_dtype_parameters_from_the_command_line() -> None:
    assert parse_param_value("f16", ir.ParamType.DTYPE) is DType.F16
    with pytest.raises(ValueError, match="not an element type"):
        parse_param_value("float", ir.ParamType.DTYPE)
    p = _parse("        pass\n")
    _, diags = instantiate(p, 2, {"T": "fp8"})
    assert [d.message for d in diags] == ["parameter `T` is an element type, not `'fp8'`"]


def test_fmt_keeps_literals_as_written() -> None:
    text = ("protocol p(block: bytes = 0x1000, k: int = 1_024):\n    team lsa(2)\n"
            "    window w: 4 KiB\n    window v: 0b1000_0000\n\n    kernel k(threads=0x20):\n"
            "        copy(dst=w[0:0x10], src=w[0o20:32])\n")
    assert format_text(text) == text
    assert "0x1000" in to_source(parse_ir(text))


def test_fmt_rewrites_a_literal_whose_value_changed() -> None:
    import dataclasses

    p = parse_ir("protocol p(k: int = 0x10):\n    team lsa(2)\n")
    changed = dataclasses.replace(p, params=(dataclasses.replace(
        p.params[0], default=dataclasses.replace(p.params[0].default, value=17)),))
    assert "k: int = 17" in to_source(changed)
