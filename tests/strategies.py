"""Hypothesis strategies: random well-scoped IR protocols and random `.cco` mutations."""

from __future__ import annotations

from hypothesis import strategies as st

from ccogen.ir import nodes as ir
from ccogen.ir.opkind import OpKind

NAMES = st.sampled_from(["a", "b", "n", "size", "chunk", "k2", "x_y"])
SMALL = st.integers(min_value=-3, max_value=1 << 20)


def exprs(params: tuple[str, ...], loop_vars: tuple[str, ...], depth: int = 3) -> st.SearchStrategy[ir.Expr]:
    leaves: list[st.SearchStrategy[ir.Expr]] = [
        SMALL.map(lambda v: ir.Const(value=v)),
        st.booleans().map(lambda v: ir.Const(value=v)),
        st.just(ir.Me()),
        st.just(ir.NRanks()),
    ]
    if params:
        leaves.append(st.sampled_from(params).map(lambda n: ir.ParamRef(name=n)))
    if loop_vars:
        leaves.append(st.sampled_from(loop_vars).map(lambda n: ir.Var(name=n)))
    leaf = st.one_of(leaves)
    if depth <= 0:
        return leaf
    sub = exprs(params, loop_vars, depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda op, a, b: ir.BinOp(op=op, left=a, right=b),
                  st.sampled_from(["+", "-", "*", "//", "%", "**"]), sub, sub),
        st.builds(lambda op, a: ir.UnaryOp(op=op, operand=a), st.sampled_from(["-", "+", "not"]), sub)
        .filter(lambda u: not (u.op == "-" and isinstance(u.operand, ir.Const))),  # `-1` is a Const
        st.builds(lambda ops, xs: ir.Compare(ops=tuple(ops), operands=tuple(xs)),
                  st.lists(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]), min_size=1, max_size=2),
                  st.lists(sub, min_size=3, max_size=3)).map(
            lambda c: ir.Compare(ops=c.ops, operands=c.operands[: len(c.ops) + 1])),
        st.builds(lambda op, xs: ir.BoolOp(op=op, values=tuple(xs)), st.sampled_from(["and", "or"]),
                  st.lists(sub, min_size=2, max_size=3)),
        st.builds(lambda c, t, o: ir.IfExp(cond=c, then=t, orelse=o), sub, sub, sub),
        st.builds(lambda f, a: ir.Call(func=f, args=(a,)), st.sampled_from(["len", "abs", "range"]), sub),
        st.builds(lambda a, b: ir.Call(func="min", args=(a, b)), sub, sub),
        st.just(ir.Call(func="peers", args=())),
        st.lists(sub, max_size=3).map(lambda xs: ir.ListExpr(items=tuple(xs))),
    )


def regions(windows: tuple[str, ...], e: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Region]:
    return st.builds(lambda w, a, b: ir.Region(window=w, start=a, stop=b),
                     st.sampled_from(windows), st.none() | e, st.none() | e)


def op_strategies(windows: tuple[str, ...], counters: tuple[str, ...],
                  e: st.SearchStrategy[ir.Expr]) -> dict[OpKind, st.SearchStrategy[ir.Op]]:
    """One strategy per op kind (the counter ops only where there are counters)."""
    r = regions(windows, e)
    q = st.none() | e
    signal = st.sampled_from(list(ir.SignalKind))
    mode = st.sampled_from(list(ir.Mode))
    count = st.none() | (st.sampled_from(counters) if counters else st.none())
    found: dict[OpKind, st.SearchStrategy[ir.Op]] = {
        OpKind.PUT: st.builds(
            lambda p, d, s, qq, sg, ag, spc, m, c: ir.Put(
                peer=p, dst=d, src=s, queue=qq, signal=sg, aggregate=ag, signal_per_copy=spc,
                mode=m, count=c),
            e, r, r, q, signal, st.booleans(), st.booleans(), mode, count),
        OpKind.GET: st.builds(
            lambda p, d, s, qq, sg, ag, m: ir.Get(
                peer=p, dst=d, src=s, queue=qq, signal=sg, aggregate=ag, mode=m),
            e, r, r, q, signal, st.booleans(), mode),
        OpKind.COPY: st.builds(lambda d, s: ir.Copy(dst=d, src=s), r, r),
        OpKind.COMMIT: st.builds(lambda p, qq: ir.Commit(peer=p, queue=qq), e, q),
        OpKind.QUIET: (st.builds(lambda p, qq: ir.Quiet(peer=p, queue=qq), e, q)
                       | st.just(ir.Quiet())),
        OpKind.WAIT_SIGNAL: st.builds(lambda s, qq, x: ir.WaitSignal(src=s, queue=qq, expected=x),
                                      e, q, st.none() | e),
        OpKind.BARRIER: st.just(ir.Barrier()),
        OpKind.FENCE: st.just(ir.Fence()),
    }
    if counters:
        found[OpKind.WAIT_COUNT] = st.builds(lambda c, x: ir.WaitCount(counter=c, expected=x),
                                             st.sampled_from(counters), st.none() | e)
        found[OpKind.RESET_COUNT] = st.builds(lambda c: ir.ResetCount(counter=c),
                                              st.sampled_from(counters))
    return found


def ops(windows: tuple[str, ...], counters: tuple[str, ...],
        e: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Op]:
    return st.one_of(list(op_strategies(windows, counters, e).values()))


@st.composite
def statements(draw: st.DrawFn, params: tuple[str, ...], windows: tuple[str, ...],
               counters: tuple[str, ...], loop_vars: tuple[str, ...], depth: int,
               in_issuer: bool = False) -> ir.Stmt:
    e = exprs(params, loop_vars, 2)
    kind = draw(st.sampled_from(["op", "op", "op", "for", "if", "issuer", "pass"] if depth > 0 else ["op", "pass"]))
    if kind == "op":
        return draw(ops(windows, counters, e))
    if kind == "pass":
        return ir.Barrier()
    var = f"v{len(loop_vars)}"
    inner = loop_vars + (var,)
    body = tuple(draw(st.lists(statements(params, windows, counters, inner if kind != "if" else loop_vars,
                                          depth - 1, in_issuer or kind == "issuer"), min_size=1, max_size=3)))
    if kind == "for":
        return ir.For(var=var, iter=draw(e), body=body)
    if kind == "issuer":
        return ir.IssuerBlock(kind=draw(st.sampled_from(list(ir.IssuerKind))), var=var, iter=draw(e), body=body)
    orelse = tuple(draw(st.lists(statements(params, windows, counters, loop_vars, depth - 1), max_size=2)))
    return ir.If(cond=draw(e), body=body, orelse=orelse)


@st.composite
def checks(draw: st.DrawFn, params: tuple[str, ...], windows: tuple[str, ...]) -> ir.Stmt:
    e = exprs(params, (), 1)
    def region() -> ir.Region:
        return ir.Region(window=draw(st.sampled_from(windows)), start=draw(st.none() | e),
                         stop=draw(st.none() | e), rank=draw(st.none() | e), init=draw(st.booleans()))
    return ir.Check(op=draw(st.sampled_from(["==", "!="])), left=region(), right=region())


@st.composite
def protocols(draw: st.DrawFn) -> ir.Protocol:
    names = draw(st.lists(st.sampled_from(["block", "n", "size", "piece", "rounds"]), unique=True, max_size=3))
    params = tuple(ir.Param(name=n, type=draw(st.sampled_from(list(ir.ParamType))),
                            default=ir.Const(value=draw(st.integers(0, 1 << 30)))) for n in names)
    pnames = tuple(p.name for p in params)
    windows = tuple(draw(st.lists(st.sampled_from(["send", "recv", "buf", "stage"]), unique=True,
                                  min_size=1, max_size=3)))
    counters = tuple(draw(st.lists(st.sampled_from(["landed", "cnt"]), unique=True, max_size=2)))
    e = exprs(pnames, (), 2)
    kernels = tuple(
        ir.Kernel(name=f"k{i}", threads=draw(e), blocks=draw(st.none() | e),
                  body=tuple(draw(st.lists(statements(pnames, windows, counters, (), 2), max_size=4))))
        for i in range(draw(st.integers(0, 2))))
    ensure = tuple(draw(st.lists(checks(pnames, windows), max_size=2)))
    return ir.Protocol(
        name=draw(st.sampled_from(["p", "alltoall", "x1"])), params=params,
        doc=draw(st.none() | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)),
        team=ir.Team(kind=draw(st.sampled_from(list(ir.TeamKind))), size=draw(st.none() | e)),
        queues=draw(st.none() | e),
        windows=tuple(ir.Window(name=w, size=draw(e), align=draw(st.none() | e)) for w in windows),
        counters=tuple(ir.Counter(name=c) for c in counters),
        kernels=kernels, ensure=ensure)
