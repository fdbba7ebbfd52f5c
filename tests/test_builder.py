"""The builder API: the same IR as the text, and errors that point at the caller."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import ccogen.builder as cg
from ccogen.diag import Diagnostic
from ccogen.errors import DiagnosticError
from ccogen.ir import nodes as ir

_LINES = Path(__file__).read_text(encoding="utf-8").splitlines()


# ----------------------------------------------------------------------------- helpers


def C(value: int | bool) -> ir.Const:
    return ir.Const(value=value)


def B(op: str, left: ir.Expr, right: ir.Expr) -> ir.BinOp:
    return ir.BinOp(op=op, left=left, right=right)


def V(name: str) -> ir.Var:
    return ir.Var(name=name)


def P(name: str) -> ir.ParamRef:
    return ir.ParamRef(name=name)


def call(func: str, *args: ir.Expr) -> ir.Call:
    return ir.Call(func=func, args=args)


def cmp(op: str, left: ir.Expr, right: ir.Expr) -> ir.Compare:
    return ir.Compare(ops=(op,), operands=(left, right))


def block_of(i: ir.Expr, size: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
    """`i*size : (i+1)*size`."""
    return B("*", i, size), B("*", B("+", i, C(1)), size)


def site(marker: str, expr: str) -> tuple[int, int]:
    """1-based (line, column) of `expr` on the line of this file ending in `# <marker>`."""
    pattern = re.compile(rf"# {re.escape(marker)}(\s|$)")
    hits = [n for n, line in enumerate(_LINES, 1) if pattern.search(line)]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0], _LINES[hits[0] - 1].index(expr) + 1


def only(info: pytest.ExceptionInfo[DiagnosticError]) -> Diagnostic:
    (diag,) = info.value.diagnostics
    return diag


def assert_diag(info: pytest.ExceptionInfo[DiagnosticError], code: str, message: str,
                marker: str, expr: str) -> Diagnostic:
    """One diagnostic, verbatim, whose span starts at `expr` on the marked line."""
    diag = only(info)
    assert (diag.code, diag.message) == (code, message)
    assert diag.span is not None and diag.span.path == __file__
    assert (diag.span.line, diag.span.column) == site(marker, expr)
    return diag


def kernel_body(build: Callable[[cg.Kernel, cg.Window, cg.Counter], None]) -> tuple[ir.Stmt, ...]:
    """The body of a one-kernel protocol with window `w` (64 B) and counter `c`."""
    p = cg.Protocol("t")
    w = p.window("w", 64)
    c = p.counter("c")
    with p.kernel("k", threads=32) as k:
        build(k, w, c)
    return p.ir.kernels[0].body


def expr_of(build: Callable[[cg.Kernel], cg.Value]) -> ir.Expr:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        value = build(k)
    return value.expr


# ----------------------------------------------------------------------------- alltoall

DOC = "Every rank sends one block to every other rank: one lane per peer."


def alltoall_ir(var: str = "p", *, doc: str | None = DOC, ensure: bool = True) -> ir.Protocol:
    """Spec section 3, built node by node."""
    block, me, p = P("block"), ir.Me(), V(var)
    size = B("*", ir.NRanks(), block)
    lanes = ir.IssuerBlock(
        kind=ir.IssuerKind.LANES, var=var, iter=call("peers"),
        body=(
            ir.Put(peer=p, dst=ir.Region(window="recv", start=B("*", me, block),
                                         stop=B("*", B("+", me, C(1)), block)),
                   src=ir.Region(window="send", start=B("*", p, block),
                                 stop=B("*", B("+", p, C(1)), block)),
                   queue=C(0), signal=ir.SignalKind.REMOTE),
            ir.Quiet(peer=p),
            ir.WaitSignal(src=p, queue=C(0)),
        ),
    )
    check = ir.Check(
        op="==",
        left=ir.Region(window="recv", start=B("*", p, block), stop=B("*", B("+", p, C(1)), block)),
        right=ir.Region(window="send", start=B("*", me, block),
                        stop=B("*", B("+", me, C(1)), block), rank=p, init=True),
    )
    return ir.Protocol(
        name="alltoall",
        params=(ir.Param(name="block", type=ir.ParamType.BYTES, default=C(1 << 20)),),
        doc=doc,
        team=ir.Team(kind=ir.TeamKind.LSA),
        queues=C(1),
        windows=(ir.Window(name="send", size=size), ir.Window(name="recv", size=size)),
        kernels=(ir.Kernel(name="exchange", threads=C(64), blocks=None, body=(lanes,)),),
        ensure=(ir.For(var=var, iter=call("peers"), body=(check,)),) if ensure else (),
    )


def build_alltoall() -> cg.Protocol:
    proto = cg.Protocol("alltoall", team=cg.lsa(), doc=DOC)
    block = proto.param("block", cg.bytes, default=cg.MiB)
    proto.queues(1)
    send = proto.window("send", proto.nranks * block)
    recv = proto.window("recv", proto.nranks * block)
    with proto.kernel("exchange", threads=64) as k, k.lanes(k.peers()) as p:
        k.put(p, dst=recv[k.me * block:(k.me + 1) * block],
              src=send[p * block:(p + 1) * block], queue=0, signal="remote")
        k.quiet(p)
        k.wait_signal(p, queue=0)
    with proto.ensure() as e, e.for_(e.peers()) as p:
        e.check(recv[p * block:(p + 1) * block]
                == cg.init(send.at(p))[e.me * block:(e.me + 1) * block])
    return proto


def test_alltoall_equals_the_spec_ir() -> None:
    p = build_alltoall()
    assert p == alltoall_ir()
    assert p.ir == alltoall_ir()
    assert alltoall_ir() == p


def test_spec_section_11_verbatim() -> None:
    p = cg.Protocol("alltoall", team=cg.lsa())
    block = p.param("block", cg.bytes, default=cg.MiB)
    send = p.window("send", p.nranks * block)
    recv = p.window("recv", p.nranks * block)
    with p.kernel("exchange", threads=64) as k, k.lanes(k.peers()) as peer:
        k.put(peer, dst=recv[k.me * block:(k.me + 1) * block],
              src=send[peer * block:(peer + 1) * block], queue=0, signal="remote")
        k.quiet(peer)
        k.wait_signal(peer, queue=0)
    assert p == alltoall_ir("peer", doc=None, ensure=False)
    assert alltoall_ir("peer", doc=None, ensure=False) == p


def test_loop_names_come_from_the_with_target() -> None:
    p = cg.Protocol("alltoall", team=cg.lsa(), doc=DOC)
    block = p.param("block", cg.bytes, default=cg.MiB)
    send = p.window("send", p.nranks * block)
    recv = p.window("recv", p.nranks * block)
    with p.kernel("exchange", threads=64) as k, k.lanes(k.peers()) as peer:
        k.put(peer, dst=recv[k.me * block:(k.me + 1) * block],
              src=send[peer * block:(peer + 1) * block], queue=0, signal="remote")
        k.quiet(peer)
        k.wait_signal(peer, queue=0)
    with p.ensure() as e, e.for_(e.peers()) as peer:
        e.check(recv[peer * block:(peer + 1) * block]
                == cg.init(send @ peer)[e.me * block:(e.me + 1) * block])
    assert p == alltoall_ir("peer")


# ----------------------------------------------------------------------------- text ≡ builder

SPEC_TEXT = {
    "alltoall": '''
        protocol alltoall(block: bytes = 1 MiB):
            """Every rank sends one block to every other rank: one lane per peer."""
            team lsa
            queues 1
            window send: nranks * block
            window recv: nranks * block

            kernel exchange(threads=64):
                lanes p in peers():
                    put(p, dst=recv[me*block : (me+1)*block], src=send[p*block : (p+1)*block],
                        queue=0, signal="remote")
                    quiet(p)
                    wait_signal(p, queue=0)

            ensure:
                for p in peers():
                    recv[p*block : (p+1)*block] == init(send@p)[me*block : (me+1)*block]
        ''',
    "pack_then_send": '''
        protocol pack_then_send(piece: bytes = 4 KiB, pieces: int = 64):
            """Gather every other piece into a staging window, ship it in one put."""
            team lsa(2)
            window table: 2 * pieces * piece
            window stage: pieces * piece
            window inbox: pieces * piece

            kernel ship(threads=256):
                if me == 0:
                    for i in range(pieces):
                        copy(dst=stage[i*piece : (i+1)*piece], src=table[2*i*piece : (2*i+1)*piece])
                    put(1, dst=inbox, src=stage, signal="remote")
                    quiet(1)
                else:
                    wait_signal(0)

            ensure:
                if me == 1:
                    for i in range(pieces):
                        inbox[i*piece : (i+1)*piece] == init(table@0)[2*i*piece : (2*i+1)*piece]
        ''',
    "counted_broadcast": '''
        protocol counted_broadcast(size: bytes = 8 MiB):
            team lsa
            queues 1
            window payload: size
            counter landed

            kernel bcast(threads=32):
                if me == 0:
                    for p in peers():
                        put(p, dst=payload, src=payload, queue=0, count=landed, aggregate=True)
                    for p in peers():
                        commit(p, queue=0)
                    quiet()
                else:
                    wait_count(landed)

            ensure:
                payload == init(payload@0)
        ''',
    "striped_put": '''
        protocol striped_put(stripe: bytes = 2 MiB, stripes: int = 4):
            team lsa(2)
            queues auto
            window src: stripes * stripe
            window dst: stripes * stripe

            kernel push(threads=128):
                if me == 0:
                    warps w in range(stripes):
                        put(1, dst=dst[w*stripe : (w+1)*stripe], src=src[w*stripe : (w+1)*stripe],
                            signal="remote")
                else:
                    for w in range(stripes):
                        wait_signal(0, queue=w)

            ensure:
                if me == 1:
                    dst == init(src@0)
        ''',
}


def build_pack_then_send() -> cg.Protocol:
    p = cg.Protocol("pack_then_send", team=cg.lsa(2),
                    doc="Gather every other piece into a staging window, ship it in one put.")
    piece = p.param("piece", cg.bytes, default=4 * cg.KiB)
    pieces = p.param("pieces", cg.int_, default=64)
    table = p.window("table", 2 * pieces * piece)
    stage = p.window("stage", pieces * piece)
    inbox = p.window("inbox", pieces * piece)
    with p.kernel("ship", threads=256) as k:
        with k.if_(k.me == 0):
            with k.for_(k.range(pieces)) as i:
                k.copy(dst=stage[i * piece:(i + 1) * piece],
                       src=table[2 * i * piece:(2 * i + 1) * piece])
            k.put(1, dst=inbox, src=stage, signal="remote")
            k.quiet(1)
        with k.else_():
            k.wait_signal(0)
    with p.ensure() as e, e.if_(e.me == 1), e.for_(e.range(pieces)) as i:
        e.check(inbox[i * piece:(i + 1) * piece]
                == cg.init(table @ 0)[2 * i * piece:(2 * i + 1) * piece])
    return p


def build_counted_broadcast() -> cg.Protocol:
    p = cg.Protocol("counted_broadcast", team=cg.lsa())
    size = p.param("size", cg.bytes, default=8 * cg.MiB)
    p.queues(1)
    payload = p.window("payload", size)
    landed = p.counter("landed")
    with p.kernel("bcast", threads=32) as k:
        with k.if_(k.me == 0):
            with k.for_(k.peers(), name="p") as peer:
                k.put(peer, dst=payload, src=payload, queue=0, count=landed, aggregate=True)
            with k.for_(k.peers(), name="p") as peer:
                k.commit(peer, queue=0)
            k.quiet()
        with k.else_():
            k.wait_count(landed)
    with p.ensure() as e:
        e.check(payload == cg.init(payload @ 0))
    return p


def build_striped_put() -> cg.Protocol:
    p = cg.Protocol("striped_put", team=cg.lsa(2))
    stripe = p.param("stripe", cg.bytes, default=2 * cg.MiB)
    stripes = p.param("stripes", cg.int_, default=4)
    p.queues("auto")
    src = p.window("src", stripes * stripe)
    dst = p.window("dst", stripes * stripe)
    with p.kernel("push", threads=128) as k:
        with k.if_(k.me == 0), k.warps(k.range(stripes)) as w:
            k.put(1, dst=dst[w * stripe:(w + 1) * stripe], src=src[w * stripe:(w + 1) * stripe],
                  signal="remote")
        with k.else_(), k.for_(k.range(stripes)) as w:
            k.wait_signal(0, queue=w)
    with p.ensure() as e, e.if_(e.me == 1):
        e.check(dst == cg.init(src @ 0))
    return p


BUILDERS: dict[str, Callable[[], cg.Protocol]] = {
    "alltoall": build_alltoall,
    "pack_then_send": build_pack_then_send,
    "counted_broadcast": build_counted_broadcast,
    "striped_put": build_striped_put,
}


@pytest.mark.parametrize("name", sorted(SPEC_TEXT))
def test_builder_equals_parsed_spec_text(name: str) -> None:
    from ccogen.syntax import parse_ir

    assert BUILDERS[name]() == parse_ir(textwrap.dedent(SPEC_TEXT[name]))


@pytest.mark.parametrize("name", sorted(SPEC_TEXT))
def test_to_source_round_trips(name: str) -> None:
    from ccogen.syntax import parse_ir

    p = BUILDERS[name]()
    assert parse_ir(p.to_source()) == p


# ----------------------------------------------------------------------------- declarations


def test_declaration_forms() -> None:
    p = cg.Protocol("decls", team=cg.world(8), doc="all forms")
    n = p.param("n", cg.int_, default=4)
    size = p.param("size", "bytes", default=n * cg.KiB)
    p.param("other", int, default=-1)
    p.queues("auto")
    p.window("a", size, align=256)
    p.window("b", 2 * size)
    p.counter("c1")
    p.counter("c2")
    with p.kernel("k1", threads=n * 32, blocks=2) as k:
        k.barrier()
    with p.kernel("k2", threads=32):
        pass
    assert p.ir == ir.Protocol(
        name="decls",
        params=(
            ir.Param(name="n", type=ir.ParamType.INT, default=C(4)),
            ir.Param(name="size", type=ir.ParamType.BYTES, default=B("*", P("n"), C(1024))),
            ir.Param(name="other", type=ir.ParamType.INT, default=C(-1)),
        ),
        doc="all forms",
        team=ir.Team(kind=ir.TeamKind.WORLD, size=C(8)),
        queues=None,
        windows=(ir.Window(name="a", size=P("size"), align=C(256)),
                 ir.Window(name="b", size=B("*", C(2), P("size")))),
        counters=(ir.Counter(name="c1"), ir.Counter(name="c2")),
        kernels=(ir.Kernel(name="k1", threads=B("*", P("n"), C(32)), blocks=C(2),
                           body=(ir.Barrier(),)),
                 ir.Kernel(name="k2", threads=C(32), blocks=None, body=())),
    )
    assert list(p.params) == ["n", "size", "other"]
    assert list(p.windows) == ["a", "b"]
    assert list(p.counters) == ["c1", "c2"]


@pytest.mark.parametrize(
    ("team", "expected"),
    [
        (lambda: cg.lsa(), ir.Team(kind=ir.TeamKind.LSA)),
        (lambda: cg.lsa(4), ir.Team(kind=ir.TeamKind.LSA, size=C(4))),
        (lambda: cg.world(), ir.Team(kind=ir.TeamKind.WORLD)),
        (lambda: cg.world(8), ir.Team(kind=ir.TeamKind.WORLD, size=C(8))),
    ],
)
def test_teams(team: Callable[[], ir.Team], expected: ir.Team) -> None:
    assert cg.Protocol("t", team=team()).ir.team == expected


def test_defaults_and_team_setter() -> None:
    p = cg.Protocol("t")
    assert p.ir == ir.Protocol(name="t")
    n = p.param("n", cg.int_, default=4)
    p.team = cg.lsa(n)
    p.queues(2)
    assert (p.ir.team, p.ir.queues) == (ir.Team(size=P("n")), C(2))
    assert cg.int is cg.int_ is ir.ParamType.INT
    assert cg.bytes is ir.ParamType.BYTES


def test_declaration_spans_point_at_the_call() -> None:
    p = cg.Protocol("t")
    p.window("w", 64)  # decl-span
    span = p.ir.windows[0].span
    assert span is not None and (span.line, span.column) == site("decl-span", "p.window")
    assert span.text == 'p.window("w", 64)'


def test_from_ir_wraps_and_grows() -> None:
    p = cg.Protocol.from_ir(alltoall_ir())
    assert p == alltoall_ir()
    with p.kernel("again", threads=32) as k:
        k.put(1, dst=p.windows["recv"], src=p.windows["send"][0:p.params["block"]])
    assert p.ir.kernels[1].body == (
        ir.Put(peer=C(1), dst=ir.Region(window="recv"),
               src=ir.Region(window="send", start=C(0), stop=P("block"))),)
    with pytest.raises(DiagnosticError):
        p.window("send", 64)


# ----------------------------------------------------------------------------- operations


def test_every_operation() -> None:
    def build(k: cg.Kernel, w: cg.Window, c: cg.Counter) -> None:
        k.put(1, dst=w[0:8], src=w[8:16], queue=1, signal="both", aggregate=True,
              signal_per_copy=True, mode="same_queue", count=c)
        k.put(1, dst=w, src=w, queue="auto", signal=ir.SignalKind.LOCAL, count="c")
        k.get(1, dst=w[:8], src=w[8:], queue=0, signal="local", aggregate=False,
              mode="independent")
        k.copy(dst=w[0:4], src=w[4:8])
        k.commit(1, queue=0)
        k.commit(1, 0)
        k.quiet()
        k.quiet(1)
        k.quiet(1, queue=0)
        k.wait_signal(1)
        k.wait_signal(1, queue=0, expected=2)
        k.wait_count(c)
        k.wait_count("c", expected=64)
        k.barrier()
        k.fence()
        k.pass_()

    whole = ir.Region(window="w")
    assert kernel_body(build) == (
        ir.Put(peer=C(1), dst=ir.Region(window="w", start=C(0), stop=C(8)),
               src=ir.Region(window="w", start=C(8), stop=C(16)), queue=C(1),
               signal=ir.SignalKind.BOTH, aggregate=True, signal_per_copy=True,
               mode=ir.Mode.SAME_QUEUE, count="c"),
        ir.Put(peer=C(1), dst=whole, src=whole, signal=ir.SignalKind.LOCAL, count="c"),
        ir.Get(peer=C(1), dst=ir.Region(window="w", stop=C(8)),
               src=ir.Region(window="w", start=C(8)), queue=C(0), signal=ir.SignalKind.LOCAL,
               mode=ir.Mode.INDEPENDENT),
        ir.Copy(dst=ir.Region(window="w", start=C(0), stop=C(4)),
                src=ir.Region(window="w", start=C(4), stop=C(8))),
        ir.Commit(peer=C(1), queue=C(0)),
        ir.Commit(peer=C(1), queue=C(0)),
        ir.Quiet(),
        ir.Quiet(peer=C(1)),
        ir.Quiet(peer=C(1), queue=C(0)),
        ir.WaitSignal(src=C(1)),
        ir.WaitSignal(src=C(1), queue=C(0), expected=C(2)),
        ir.WaitCount(counter="c"),
        ir.WaitCount(counter="c", expected=C(64)),
        ir.Barrier(),
        ir.Fence(),
    )


def test_op_span_covers_the_call() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        k.fence()  # op-span
    span = p.ir.kernels[0].body[0].span
    assert span is not None and (span.line, span.column) == site("op-span", "k.fence")
    assert span.text == "k.fence()"


def test_src_loc_at_blames_the_wrapper_caller() -> None:
    def fence_twice(k: cg.Kernel) -> None:
        k.fence(src_loc_at=1)
        k.fence(src_loc_at=1)

    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        fence_twice(k)  # wrapped
    spans = [s.span for s in p.ir.kernels[0].body]
    assert all(s is not None and (s.line, s.column) == site("wrapped", "fence_twice")
               for s in spans)


# ----------------------------------------------------------------------------- expressions

me, nranks = ir.Me(), ir.NRanks()


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda k: k.me + 1, B("+", me, C(1))),
        (lambda k: 1 + k.me, B("+", C(1), me)),
        (lambda k: k.me - 1, B("-", me, C(1))),
        (lambda k: 1 - k.me, B("-", C(1), me)),
        (lambda k: k.me * 2, B("*", me, C(2))),
        (lambda k: 2 * k.me, B("*", C(2), me)),
        (lambda k: k.me // 2, B("//", me, C(2))),
        (lambda k: 8 // k.nranks, B("//", C(8), nranks)),
        (lambda k: (k.me - 1) % k.nranks, B("%", B("-", me, C(1)), nranks)),
        (lambda k: 7 % k.nranks, B("%", C(7), nranks)),
        (lambda k: k.me ** 2, B("**", me, C(2))),
        (lambda k: 2 ** k.me, B("**", C(2), me)),
        (lambda k: -k.me, ir.UnaryOp(op="-", operand=me)),
        (lambda k: +k.me, ir.UnaryOp(op="+", operand=me)),
        (lambda k: k.me + -3, B("+", me, C(-3))),
        (lambda k: k.me == 0, cmp("==", me, C(0))),
        (lambda k: k.me == 0, cmp("==", me, C(0))),
        (lambda k: k.me != 0, cmp("!=", me, C(0))),
        (lambda k: k.me < 1, cmp("<", me, C(1))),
        (lambda k: k.me <= 1, cmp("<=", me, C(1))),
        (lambda k: k.me > 1, cmp(">", me, C(1))),
        (lambda k: k.me >= 1, cmp(">=", me, C(1))),
        (lambda k: cg.and_(k.me > 0, k.me < 3, True),
         ir.BoolOp(op="and", values=(cmp(">", me, C(0)), cmp("<", me, C(3)), C(True)))),
        (lambda k: cg.or_(k.me == 0, False),
         ir.BoolOp(op="or", values=(cmp("==", me, C(0)), C(False)))),
        (lambda k: cg.not_(k.me), ir.UnaryOp(op="not", operand=me)),
        (lambda k: cg.where(k.me == 0, 1, k.nranks),
         ir.IfExp(cond=cmp("==", me, C(0)), then=C(1), orelse=nranks)),
        (lambda k: cg.min(k.me, 3), call("min", me, C(3))),
        (lambda k: cg.max(k.me, 3, k.nranks), call("max", me, C(3), nranks)),
        (lambda k: cg.abs(k.me - 2), call("abs", B("-", me, C(2)))),
        (lambda k: abs(k.me), call("abs", me)),
        (lambda k: k.len(k.peers()), call("len", call("peers"))),
        (lambda k: k.ranks(), call("ranks")),
        (lambda k: k.range(4), call("range", C(4))),
        (lambda k: k.range(1, k.nranks, 2), call("range", C(1), nranks, C(2))),
        (lambda k: k.len([1, k.me]), call("len", ir.ListExpr(items=(C(1), me)))),
    ],
)
def test_expressions(build: Callable[[cg.Kernel], cg.Value], expected: ir.Expr) -> None:
    assert expr_of(build) == expected


@pytest.mark.parametrize(
    ("iterable", "expected"),
    [
        (range(4), call("range", C(4))),
        (range(1, 4), call("range", C(1), C(4))),
        (range(0, 8, 2), call("range", C(0), C(8), C(2))),
        ([0, 1], ir.ListExpr(items=(C(0), C(1)))),
    ],
)
def test_python_iterables(iterable: object, expected: ir.Expr) -> None:
    def build(k: cg.Kernel, w: cg.Window, c: cg.Counter) -> None:
        with k.for_(iterable, name="i"):  # type: ignore[arg-type]
            k.fence()

    assert kernel_body(build) == (ir.For(var="i", iter=expected, body=(ir.Fence(),)),)


# ----------------------------------------------------------------------------- statements


def test_if_elif_else_chain() -> None:
    def build(k: cg.Kernel, w: cg.Window, c: cg.Counter) -> None:
        with k.if_(k.me == 0):
            k.barrier()
        with k.elif_(k.me == 1):
            k.fence()
        with k.elif_(k.me == 2):
            pass
        with k.else_():
            k.quiet()
        with k.if_(k.me == 3):
            k.fence()
        with k.else_():
            k.barrier()

    assert kernel_body(build) == (
        ir.If(cond=cmp("==", me, C(0)), body=(ir.Barrier(),), orelse=(
            ir.If(cond=cmp("==", me, C(1)), body=(ir.Fence(),), orelse=(
                ir.If(cond=cmp("==", me, C(2)), body=(), orelse=(ir.Quiet(),)),)),)),
        ir.If(cond=cmp("==", me, C(3)), body=(ir.Fence(),), orelse=(ir.Barrier(),)),
    )


def test_issuer_nesting() -> None:
    def build(k: cg.Kernel, w: cg.Window, c: cg.Counter) -> None:
        with k.blocks(k.range(2)) as b, k.warps(k.range(4)) as wp:  # noqa: SIM117
            with k.lanes(k.range(32)) as ln, k.for_(k.range(2)) as i:
                k.put(k.me + 1, dst=w[i:i + 1], src=w[ln:ln + 1], queue=b + wp)

    lanes = ir.IssuerBlock(kind=ir.IssuerKind.LANES, var="ln", iter=call("range", C(32)), body=(
        ir.For(var="i", iter=call("range", C(2)), body=(
            ir.Put(peer=B("+", me, C(1)),
                   dst=ir.Region(window="w", start=V("i"), stop=B("+", V("i"), C(1))),
                   src=ir.Region(window="w", start=V("ln"), stop=B("+", V("ln"), C(1))),
                   queue=B("+", V("b"), V("wp"))),)),))
    assert kernel_body(build) == (
        ir.IssuerBlock(kind=ir.IssuerKind.BLOCKS, var="b", iter=call("range", C(2)), body=(
            ir.IssuerBlock(kind=ir.IssuerKind.WARPS, var="wp", iter=call("range", C(4)),
                           body=(lanes,)),)),)


def test_generated_loop_names() -> None:
    p = cg.Protocol("t")
    p.param("i0", cg.int_, default=1)
    with p.kernel("k", threads=32) as k:
        with k.for_(k.range(2)):  # noqa: SIM117
            with k.for_(k.range(2)) as i0:  # taken by the parameter: generated instead
                k.fence()
        with k.for_(k.range(2)) as put:  # noqa: F841  (a built-in name of the language)
            pass
    body = p.ir.kernels[0].body
    assert body == (
        ir.For(var="i1", iter=call("range", C(2)), body=(
            ir.For(var="i2", iter=call("range", C(2)), body=(ir.Fence(),)),)),
        ir.For(var="i3", iter=call("range", C(2)), body=()),
    )
    assert isinstance(i0, cg.Value) and i0.expr == V("i2")


def test_ensure_forms() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    v = p.window("v", 64)
    with p.ensure() as e:
        e.check(w == v)
        e.check(w[0:8] != cg.init(v)[8:16])
        e.check(w.at(1) == cg.init(v @ 0))
        e.check(w.at(e.nranks - 1)[0:4] == w[:4])
    assert p.ir.ensure == (
        ir.Check(op="==", left=ir.Region(window="w"), right=ir.Region(window="v")),
        ir.Check(op="!=", left=ir.Region(window="w", start=C(0), stop=C(8)),
                 right=ir.Region(window="v", start=C(8), stop=C(16), init=True)),
        ir.Check(op="==", left=ir.Region(window="w", rank=C(1)),
                 right=ir.Region(window="v", rank=C(0), init=True)),
        ir.Check(op="==", left=ir.Region(window="w", start=C(0), stop=C(4),
                                         rank=B("-", nranks, C(1))),
                 right=ir.Region(window="w", stop=C(4))),
    )


# ----------------------------------------------------------------------------- errors


def test_error_bad_signal_string() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k, pytest.raises(DiagnosticError) as info:
        k.put(1, dst=w, src=w, signal="remot")  # bad-signal
    diag = assert_diag(info, "E002", '`signal=` must be one of "none", "local", "remote", "both"',
                       "bad-signal", "k.put")
    assert diag.help == 'did you mean `"remote"`?'


def test_error_unknown_keyword() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k, pytest.raises(DiagnosticError) as info:
        k.put(1, dst=w, src=w, sigal="remote")  # unknown-keyword
    assert_diag(info, "E002", "`put` has no argument `sigal`", "unknown-keyword", "k.put")


def test_error_missing_argument() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k, pytest.raises(DiagnosticError) as info:
        k.put(1, dst=w)  # missing-argument
    assert_diag(info, "E002", "`put` needs argument `src`", "missing-argument", "k.put")


def test_error_op_outside_kernel() -> None:
    p = cg.Protocol("t")
    with p.kernel("exchange", threads=32) as k:
        k.fence()
    with pytest.raises(DiagnosticError) as info:
        k.barrier()  # op-outside
    assert_diag(info, "E002", "`barrier` is outside kernel `exchange`", "op-outside", "k.barrier")


def test_error_bool_of_value() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k, pytest.raises(DiagnosticError) as info:
        if k.me == 0:  # truth-value
            k.fence()
    assert_diag(info, "E004", "a symbolic value has no truth value here: use `k.if_(...)`",
                "truth-value", "k.me == 0")


def test_error_duplicate_window() -> None:
    p = cg.Protocol("t")
    p.window("w", 64)  # first-window
    with pytest.raises(DiagnosticError) as info:
        p.window("w", 128)  # duplicate-window
    diag = assert_diag(info, "E002", "`w` is declared twice", "duplicate-window", "p.window")
    first = diag.labels[1].span
    assert (first.line, first.column) == site("first-window", "p.window")


def test_error_undeclared_counter() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k, pytest.raises(DiagnosticError) as info:
        k.wait_count("landed")  # undeclared-counter
    assert_diag(info, "E002", "`landed` is not a declared counter", "undeclared-counter",
                "k.wait_count")


def test_error_step_slice_and_index() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with pytest.raises(DiagnosticError) as info:
        w[0:8:2]  # step-slice
    assert_diag(info, "E003", "a region has no step", "step-slice", "w[0:8:2]")
    with pytest.raises(DiagnosticError) as info:
        w[3]  # int-index
    assert_diag(info, "E002", "a window is sliced by a byte range `w[a:b]`, not indexed",
                "int-index", "w[3]")


def test_error_issuer_nesting() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        with k.for_(k.range(2)), pytest.raises(DiagnosticError) as info:  # noqa: SIM117
            with k.blocks(k.range(2)):  # nested-blocks
                pass
        assert_diag(info, "E002", "`blocks` must be at the top level of kernel `k`",
                    "nested-blocks", "k.blocks")
        with k.lanes(k.range(2)), pytest.raises(DiagnosticError) as info:  # noqa: SIM117
            with k.warps(k.range(2)):  # warps-in-lanes
                pass
        assert_diag(info, "E002", "`warps` cannot be nested inside `lanes`", "warps-in-lanes",
                    "k.warps")


def test_error_elif_without_if() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        with k.if_(k.me == 0):
            k.fence()
        k.barrier()
        with pytest.raises(DiagnosticError) as info, k.elif_(k.me == 1):  # lonely-elif
            pass
    assert_diag(info, "E002", "`elif_` must directly follow an `if_` or `elif_` block",
                "lonely-elif", "k.elif_")


def test_error_loop_variable_shadows() -> None:
    p = cg.Protocol("t")
    p.param("n", cg.int_, default=2)
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k:
        with k.for_(k.range(2)) as i, pytest.raises(DiagnosticError) as info:  # noqa: SIM117
            with k.for_(k.range(2), name="i"):  # shadow-loop
                pass
        assert_diag(info, "E002", "loop variable `i` shadows another name", "shadow-loop",
                    "k.for_")
        with pytest.raises(DiagnosticError) as info:  # noqa: SIM117
            with k.lanes(k.range(2), name="n"):  # shadow-param
                pass
        assert_diag(info, "E002", "loop variable `n` shadows another name", "shadow-param",
                    "k.lanes")
        with pytest.raises(DiagnosticError) as info:
            k.put(i, dst=w, src=w)  # escaped-var
    assert_diag(info, "E002", "loop variable `i` is used outside its `with` block",
                "escaped-var", "k.put")


def test_error_region_misuse_in_kernel() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k:
        with pytest.raises(DiagnosticError) as info:
            k.copy(dst=w, src=cg.init(w))  # init-in-kernel
        assert_diag(info, "E002", "`init(...)` is only allowed in `ensure`", "init-in-kernel",
                    "cg.init")
        with pytest.raises(DiagnosticError) as info:
            k.copy(dst=w @ 1, src=w)  # remote-in-kernel
        assert_diag(info, "E002",
                    "`w@p` is only allowed in `ensure` and in the `srcs` of `reduce`",
                    "remote-in-kernel",
                    "w @ 1")
        with pytest.raises(DiagnosticError) as info:
            k.copy(dst=w, src=5)  # not-region
        assert_diag(info, "E002", "`src` must be a region of a window (`w` or `w[a:b]`), not `int`",
                    "not-region", "k.copy")


def test_error_bad_bool_and_queue() -> None:
    p = cg.Protocol("t")
    w = p.window("w", 64)
    with p.kernel("k", threads=32) as k:
        with pytest.raises(DiagnosticError) as info:
            k.put(1, dst=w, src=w, aggregate=1)  # bad-bool
        assert_diag(info, "E002", "`aggregate=` must be `True` or `False`", "bad-bool", "k.put")
        with pytest.raises(DiagnosticError) as info:
            k.put(1, dst=w, src=w, queue="first")  # bad-queue
        assert_diag(info, "E002",
                    '`queue` must be an integer expression, not the string "first"',
                    "bad-queue", "k.put")


def test_error_declarations() -> None:
    with pytest.raises(DiagnosticError) as info:
        cg.Protocol("me")  # reserved-name
    assert_diag(info, "E002", "`me` is a built-in name", "reserved-name", "cg.Protocol")
    p = cg.Protocol("t")
    with pytest.raises(DiagnosticError) as info:
        p.param("n", cg.int_)  # no-default
    assert_diag(info, "E002", "parameter `n` needs a default", "no-default", "p.param")
    with pytest.raises(DiagnosticError) as info:
        p.kernel("k")  # no-threads
    assert_diag(info, "E002", "kernel `k` needs `threads=`", "no-threads", "p.kernel")
    with p.kernel("k", threads=32), pytest.raises(DiagnosticError) as info:
        p.counter("c")  # decl-inside
    assert_diag(info, "E002", "`counter` cannot be declared inside kernel `k`", "decl-inside",
                "p.counter")


def test_error_ir_while_open() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32), pytest.raises(DiagnosticError) as info:
        p.ir  # ir-open  # noqa: B018
    assert_diag(info, "E002", "kernel `k` is not finished", "ir-open", "p.ir")


def test_error_python_operators() -> None:
    p = cg.Protocol("t")
    with p.kernel("k", threads=32) as k:
        with pytest.raises(DiagnosticError) as info:
            k.me / 2  # true-div
        assert_diag(info, "E002", "`/` is not an operator of the protocol language", "true-div",
                    "k.me / 2")
        with pytest.raises(DiagnosticError) as info:
            range(k.nranks)  # python-range
        assert_diag(info, "E004", "a symbolic value is not a Python integer", "python-range",
                    "range(k.nranks)")
        with pytest.raises(DiagnosticError) as info:
            k.me + "x"  # type: ignore[operator]  # str-operand
        assert_diag(info, "E002",
                    'an operand of `+` must be an integer expression, not the string "x"',
                    "str-operand", 'k.me + "x"')


def test_no_state_left_after_an_error() -> None:
    p = cg.Protocol("t")
    with pytest.raises(DiagnosticError), p.kernel("k", threads=32) as k:
        k.barrier(1)
    with p.kernel("k", threads=32) as k:  # the name is free again
        k.barrier()
    assert [kn.name for kn in p.ir.kernels] == ["k"]
