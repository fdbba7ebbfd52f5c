"""Hypothesis strategies: random well-scoped IR protocols and random `.cco` mutations."""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st

from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.opkind import OpKind

NAMES = st.sampled_from(["a", "b", "n", "size", "chunk", "k2", "x_y"])
SMALL = st.integers(min_value=-3, max_value=1 << 20)


@cache  # one strategy object per scope: a new one per draw was validated anew each time
def exprs(params: tuple[str, ...], loop_vars: tuple[str, ...],  # (40 % of a draw)
          depth: int = 3) -> st.SearchStrategy[ir.Expr]:
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
        st.builds(lambda op, a: ir.UnaryOp(op=op, operand=a),
                  st.sampled_from(["-", "+", "not"]), sub)
        .filter(lambda u: not (u.op == "-" and isinstance(u.operand, ir.Const))),  # `-1` is a Const
        st.builds(lambda ops, xs: ir.Compare(ops=tuple(ops), operands=tuple(xs)),
                  st.lists(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]),
                           min_size=1, max_size=2),
                  st.lists(sub, min_size=3, max_size=3)).map(
            lambda c: ir.Compare(ops=c.ops, operands=c.operands[: len(c.ops) + 1])),
        st.builds(lambda op, xs: ir.BoolOp(op=op, values=tuple(xs)), st.sampled_from(["and", "or"]),
                  st.lists(sub, min_size=2, max_size=3)),
        st.builds(lambda c, t, o: ir.IfExp(cond=c, then=t, orelse=o), sub, sub, sub),
        st.builds(lambda f, a: ir.Call(func=f, args=(a,)),
                  st.sampled_from(["len", "abs", "range"]), sub),
        st.builds(lambda a, b: ir.Call(func="min", args=(a, b)), sub, sub),
        st.just(ir.Call(func="peers", args=())),
        st.lists(sub, max_size=3).map(lambda xs: ir.ListExpr(items=tuple(xs))),
    )


def regions(windows: tuple[str, ...],
            e: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Region]:
    return st.builds(lambda w, a, b: ir.Region(window=w, start=a, stop=b),
                     st.sampled_from(windows), st.none() | e, st.none() | e)


def peer_regions(windows: tuple[str, ...],
                 e: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Region]:
    """Regions of `reduce` sources: local, or a peer's (`x@p[a:b]`)."""
    return st.builds(lambda w, a, b, r: ir.Region(window=w, start=a, stop=b, rank=r),
                     st.sampled_from(windows), st.none() | e, st.none() | e, st.none() | e)


WEIGHTS = (st.floats(min_value=-4, max_value=4, allow_nan=False, width=32)
           .map(lambda v: ir.Const(value=v)))


def comprehension(elt: st.SearchStrategy[ir.Region | ir.Expr], var: str,
                  e: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.ListComp]:
    return st.builds(lambda x, it, c: ir.ListComp(elt=x, var=var, iter=it, cond=c),
                     elt, e, st.none() | e)


def op_strategies(windows: tuple[str, ...], counters: tuple[str, ...],
                  e: st.SearchStrategy[ir.Expr],
                  comp_var: str = "c0") -> dict[OpKind, st.SearchStrategy[ir.Op]]:
    """One strategy per op kind (the counter ops only where there are counters).

    `comp_var` names the variable of generated comprehensions (a fresh name)."""
    r = regions(windows, e)
    pr = peer_regions(windows, e)
    # inside a comprehension its variable may be used as the peer
    pr_comp = peer_regions(windows, e | st.just(ir.Var(name=comp_var)))
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
        OpKind.REDUCE: st.builds(
            lambda d, s, o, w: ir.Reduce(dst=d, srcs=s, op=o,
                                         weights=w if o is ir.ReduceOp.SUM else None),
            r,
            st.lists(pr, min_size=1, max_size=3).map(tuple) | comprehension(pr_comp, comp_var, e),
            st.sampled_from(list(ir.ReduceOp)),
            st.none() | st.lists(e | WEIGHTS, max_size=3).map(tuple)
            | comprehension(WEIGHTS, comp_var, e)),
        OpKind.SIGNAL: st.builds(lambda p, qq: ir.Signal(peer=p, queue=qq), e, q),
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


@cache  # as `exprs`: the same scope and name again (every protocol's ops) is one strategy
def ops_named(windows: tuple[str, ...], counters: tuple[str, ...],
              e: st.SearchStrategy[ir.Expr], comp_var: str) -> st.SearchStrategy[ir.Op]:
    return st.one_of(list(op_strategies(windows, counters, e, comp_var).values()))


class Fresh:
    """Fresh names for one generated protocol (assignments, comprehension variables)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


@st.composite
def statements(draw: st.DrawFn, params: tuple[str, ...], windows: tuple[str, ...],
               counters: tuple[str, ...], loop_vars: tuple[str, ...], depth: int,
               in_issuer: bool = False, fresh: Fresh | None = None) -> ir.Stmt:
    fresh = fresh if fresh is not None else Fresh()
    e = exprs(params, loop_vars, 2)
    kind = draw(st.sampled_from(["op", "op", "op", "for", "if", "issuer", "pass", "assign"]
                                if depth > 0 else ["op", "pass"]))
    if kind == "op":
        return draw(ops_named(windows, counters, e, fresh("c")))
    if kind == "pass":
        return ir.Barrier()
    if kind == "assign":  # a fresh name, unused afterwards
        return ir.Assign(var=fresh("a"), value=draw(e))
    var = f"v{len(loop_vars)}"
    inner = (*loop_vars, var)
    scope = inner if kind != "if" else loop_vars
    body = tuple(draw(st.lists(statements(params, windows, counters, scope,
                                          depth - 1, in_issuer or kind == "issuer", fresh),
                               min_size=1, max_size=3)))
    if kind == "for":
        return ir.For(var=var, iter=draw(e), body=body)
    if kind == "issuer":
        return ir.IssuerBlock(kind=draw(st.sampled_from(list(ir.IssuerKind))), var=var,
                              iter=draw(e), body=body)
    orelse = tuple(draw(st.lists(statements(params, windows, counters, loop_vars, depth - 1,
                                            fresh=fresh), max_size=2)))
    return ir.If(cond=draw(e), body=body, orelse=orelse)


@st.composite
def checks(draw: st.DrawFn, params: tuple[str, ...], windows: tuple[str, ...],
           fresh: Fresh | None = None) -> ir.Stmt:
    e = exprs(params, (), 1)
    def region(ee: st.SearchStrategy[ir.Expr] = e) -> ir.Region:
        return ir.Region(window=draw(st.sampled_from(windows)), start=draw(st.none() | ee),
                         stop=draw(st.none() | ee), rank=draw(st.none() | ee),
                         init=draw(st.booleans()))
    right: ir.Region | ir.Reduction = region()
    if draw(st.booleans()):  # sum/max/min of a list or a comprehension
        var = (fresh or Fresh())("g")
        op = draw(st.sampled_from(list(ir.ReduceOp)))
        if draw(st.booleans()):
            terms: tuple[ir.Region, ...] | ir.ListComp = tuple(
                region() for _ in range(draw(st.integers(1, 3))))
        else:
            terms = ir.ListComp(elt=region(e | st.just(ir.Var(name=var))), var=var, iter=draw(e),
                                cond=draw(st.none() | e))
        weights = None
        if op is ir.ReduceOp.SUM and draw(st.booleans()):
            weights = tuple(draw(st.lists(e | WEIGHTS, max_size=3)))
        right = ir.Reduction(op=op, terms=terms, weights=weights)
    return ir.Check(op=draw(st.sampled_from(["==", "!="])), left=region(), right=right)


@st.composite
def protocols(draw: st.DrawFn) -> ir.Protocol:
    names = draw(st.lists(st.sampled_from(["block", "n", "size", "piece", "rounds", "T"]),
                          unique=True, max_size=3))
    params = tuple(
        ir.Param(name=n, type=ir.ParamType.DTYPE, default=draw(st.sampled_from(list(DType))))
        if n == "T" else
        ir.Param(name=n, type=draw(st.sampled_from([ir.ParamType.BYTES, ir.ParamType.INT])),
                 default=ir.Const(value=draw(st.integers(0, 1 << 30)))) for n in names)
    pnames = tuple(p.name for p in params if p.type is not ir.ParamType.DTYPE)
    dtypes = st.sampled_from(list(DType)) | (st.just(ir.ParamRef(name="T")) if "T" in names
                                             else st.nothing())
    windows = tuple(draw(st.lists(st.sampled_from(["send", "recv", "buf", "stage"]), unique=True,
                                  min_size=1, max_size=3)))
    buffers = tuple(draw(st.lists(st.sampled_from(["out", "tmp"]), unique=True, max_size=2)))
    fresh = Fresh()
    counters = tuple(draw(st.lists(st.sampled_from(["landed", "cnt"]), unique=True, max_size=2)))
    e = exprs(pnames, (), 2)
    kernels = tuple(
        ir.Kernel(name=f"k{i}", threads=draw(e), blocks=draw(st.none() | e),
                  body=tuple(draw(st.lists(statements(pnames, windows + buffers, counters, (), 2,
                                                      fresh=fresh), max_size=4))))
        for i in range(draw(st.integers(0, 2))))
    ensure = tuple(draw(st.lists(checks(pnames, windows + buffers, fresh), max_size=2)))
    return ir.Protocol(
        name=draw(st.sampled_from(["p", "alltoall", "x1"])), params=params,
        doc=draw(st.none() | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                                     max_size=20)),
        team=ir.Team(kind=draw(st.sampled_from(list(ir.TeamKind))), size=draw(st.none() | e)),
        queues=draw(st.none() | e),
        windows=tuple(ir.Window(name=w, size=draw(e), align=draw(st.none() | e), dtype=draw(dtypes))
                      for w in windows),
        buffers=tuple(ir.Buffer(name=b, dtype=draw(dtypes), size=draw(e)) for b in buffers),
        counters=tuple(ir.Counter(name=c) for c in counters),
        kernels=kernels, ensure=ensure)
