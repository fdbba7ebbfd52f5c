"""The builder speaks language v2: every construct builds the IR the text gives."""

from __future__ import annotations

import pytest

import ccogen as cg
from ccogen.errors import DiagnosticError
from ccogen.syntax import parse_ir

RING = '''\
protocol ring(chunk: int = 64, T: dtype = f32):
    team lsa
    queues 2
    window x: T[nranks * chunk]
    window slot: f32[2 * chunk]
    buffer out: bf16[chunk]

    kernel k(threads=32):
        right = (me + 1) % nranks
        for s in range(nranks - 1):
            c = (me - s) % nranks
            reduce(dst=x[c * chunk : (c + 1) * chunk],
                srcs=[x[c * chunk : (c + 1) * chunk], (x@right)[c * chunk : (c + 1) * chunk]],
                op="sum", weights=[0.5, 2])
            signal(right, queue=1)
        reduce(dst=slot[0:chunk], srcs=[x@p for p in ranks() if p != me], op="max")

    ensure:
        slot[0:chunk] == max([x@p for p in ranks()])
        x == sum([init(x), x], weights=[1, -1])
        out == min(init(out@q) for q in ranks())
'''


def _ring() -> cg.Protocol:
    p = cg.Protocol("ring")
    p.queues(2)
    chunk = p.param("chunk", cg.int, default=64)
    T = p.param("T", cg.dtype, default=cg.f32)
    x = p.window("x", T[p.nranks * chunk])
    slot = p.window("slot", cg.f32[2 * chunk])
    out = p.buffer("out", cg.bf16[chunk])
    with p.kernel("k", threads=32) as k:
        right = k.let((k.me + 1) % k.nranks)
        with k.for_(k.range(k.nranks - 1)) as s:
            c = k.let((k.me - s) % k.nranks)
            k.reduce(dst=x[c * chunk:(c + 1) * chunk],
                     srcs=[x[c * chunk:(c + 1) * chunk], (x @ right)[c * chunk:(c + 1) * chunk]],
                     op="sum", weights=[0.5, 2])
            k.signal(right, queue=1)
        k.reduce(dst=slot[0:chunk], srcs=k.each(k.ranks(), lambda p: x @ p,
                                                cond=lambda p: p != k.me), op="max")
    with p.ensure() as e:
        e.check(slot[0:chunk] == cg.max(e.each(e.ranks(), lambda p: x @ p)))
        e.check(x == cg.sum([cg.init(x), x], weights=[1, -1]))
        e.check(out == cg.min(e.each(e.ranks(), lambda q: cg.init(out @ q))))
    return p


def test_the_builder_builds_what_the_text_says() -> None:
    built = _ring()
    assert built == parse_ir(RING)
    assert cg.parse(built.to_source()) == built
    assert set(built.params) == {"chunk", "T"} and set(built.buffers) == {"out"}
    assert set(built.windows) == {"x", "slot"}


def test_from_ir_keeps_buffers_and_dtype_parameters() -> None:
    again = cg.Protocol.from_ir(parse_ir(RING))
    assert again == parse_ir(RING)
    assert isinstance(again.params["T"], cg.builder.ElementType)
    assert again.buffers["out"].buffer


@pytest.mark.parametrize(("build", "message"), [
    (lambda p, k, x: k.reduce(dst=x, srcs=[]),
     "`srcs=` takes a non-empty list of regions or `k.each(...)`, not `list`"),
    (lambda p, k, x: k.reduce(dst=x, srcs=[x], op="avg"), '`op=` must be one of "sum", "max", '
                                                            '"min"'),
    (lambda p, k, x: k.put(1, dst=x @ 1, src=x),
     "`w@p` is only allowed in `ensure` and in the `srcs` of `reduce`"),
    (lambda p, k, x: k.reduce(dst=x, srcs=[x], weights=[float("nan")]),
     "a weight must be finite, not nan"),
    (lambda p, k, x: k.let(1), "`let` needs a name"),
    (lambda p, k, x: k.copy(dst=x[0:p.params["T"]], src=x),
     "a region bound must be an integer expression, not `ElementType`"),
])
def test_mistakes(build, message: str) -> None:  # type: ignore[no-untyped-def]
    p = cg.Protocol("p")
    p.param("T", cg.dtype, default=cg.bf16)
    x = p.window("x", cg.f32[16])
    with pytest.raises(DiagnosticError) as info, p.kernel("k", threads=32) as k:
        build(p, k, x)
    assert info.value.diagnostics[0].message == message


def test_a_buffer_needs_a_shape_and_a_dtype_parameter_is_not_a_number() -> None:
    p = cg.Protocol("p")
    T = p.param("T", cg.dtype, default="bf16")
    with pytest.raises(DiagnosticError, match="needs an element type and a count"):
        p.buffer("b", 16)  # type: ignore[arg-type]
    with pytest.raises(DiagnosticError, match="an element type is one of"):
        p.param("U", cg.dtype, default=4)
    assert repr(T) == "T" and repr(cg.bf16) == "bf16"
