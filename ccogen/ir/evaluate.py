"""Evaluation of IR expressions at instantiation.

Every `Expr` is compiled once into a Python closure `fn(env) -> Value` and cached
by node identity (not by equality: two equal expressions at different places must
report errors at their own spans), so unrolling a loop of 20k ops evaluates
closures, not trees.

Values are Python's: `int`, `bool` (an `int`, as in Python) and tuples of ints
(sequences: `peers()`, `ranks()`, `range(...)`, list literals).  Semantics are
Python's: `//` and `%` floor, `**`, chained comparisons, `and`/`or` return an
operand, conditional expressions, truthiness of sequences.  Arithmetic takes
integers only (no tuple concatenation); results of `*` and `**` must lie in
(-2**63, 2**63).  A sequence is at most `MAX_SEQUENCE` elements long.

Whatever cannot be evaluated raises `EvalError` (E004 by default) carrying the span
of the offending sub-expression; the caller turns it into a diagnostic and adds the
bound values (`Env.bindings`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, cast

from ccogen.ir import nodes as ir
from ccogen.ir import runtime as _rt
from ccogen.ir.evalerror import EvalError

Value: TypeAlias = int | bool | tuple[int, ...]
Fn: TypeAlias = Callable[["Env"], Value]
IntFn: TypeAlias = Callable[["Env"], int]
SeqFn: TypeAlias = Callable[["Env"], tuple[int, ...]]

MAX_SEQUENCE = 1_000_000
INT_LIMIT = 2**63


class Env:
    """The bound names: team size, `me`, parameters and loop variables.

    `me` (or `nranks`) is None where it must not be used (window sizes, launch
    sizes, parameter defaults); using it raises `EvalError(me_error)`.
    """

    __slots__ = ("launch", "loader", "me", "me_error", "moduli", "nranks", "nranks_error",
                 "params", "vars")

    def __init__(
        self, nranks: int | None, me: int | None, params: Mapping[str, int], *,
        me_error: str = "`me` is not bound here",
        nranks_error: str = "`nranks` is not bound here",
    ) -> None:
        self.nranks = nranks
        self.me = me
        self.params = params
        self.vars: dict[str, Value] = {}
        self.me_error = me_error
        self.nranks_error = nranks_error
        # run-time values: `loader(load, rank, index)` gives what `load(...)` reads (an int,
        # a float, or an `Rt` when symbolic); None where run-time values are not allowed
        self.loader: Callable[[ir.Load, int, int], Any] | None = None
        # `launch % K` (language reference section 8): the launch's index, None where
        # `launch` is not allowed; every K met is added to `moduli` (the instance's period)
        self.launch: int | None = None
        self.moduli: set[int] | None = None

    def bindings(self) -> str:
        """`with nranks=3, me=1, p=2`: the values an error depends on."""
        parts = []
        if self.nranks is not None:
            parts.append(f"nranks={self.nranks}")
        if self.me is not None:
            parts.append(f"me={self.me}")
        parts.extend(f"{k}={_short(v)}" for k, v in self.vars.items())
        return "with " + ", ".join(parts) if parts else "with nothing bound"


# ----------------------------------------------------------------------------- value helpers


def _short(v: Value) -> str:
    if isinstance(v, _rt.Rt):
        bounds = "unbounded" if not v.bounded else f"{v.lo} to {v.hi}"
        return f"{v.text()} (run-time, {bounds})"
    if isinstance(v, tuple) and len(v) > 8:
        return "(" + ", ".join(map(str, v[:8])) + ", ...)"
    return str(v)


def describe(v: Value) -> str:
    """How a value is shown in a label: `` `3` ``, `` `(0, 2, 3)` ``."""
    return f"`{_short(v)}`"


def _kind(v: Value) -> str:
    if isinstance(v, tuple):
        return "a sequence"
    return "a boolean" if isinstance(v, bool) else "an integer"


def as_int(v: Value, node: ir.Expr, what: str) -> int:
    """`v` as an int (bools are ints, as in Python), else E004 at `node`.

    A run-time value (`ccogen.ir.runtime.Rt`, or a float read from a float element)
    passes through: it stands for a number that is only known on the device; where
    a static int is needed, the caller says so (`Evaluating._int`)."""
    if isinstance(v, int):
        return int(v) if isinstance(v, bool) else v
    if isinstance(v, _rt.Rt | float):
        return v  # type: ignore[return-value]
    raise EvalError(f"{what} must be an integer, not {_kind(v)}", node.span,
                    f"this is {describe(v)}")


def as_seq(v: Value, node: ir.Expr, what: str) -> tuple[int, ...]:
    """`v` as a sequence, else E004 at `node`."""
    if isinstance(v, tuple):
        return v
    raise EvalError(f"{what} needs a sequence, not {_kind(v)}", node.span,
                    f"this is {describe(v)}", help="iterate over `range(...)`, `peers()`, "
                    "`ranks()` or a list `[a, b]`")


def _checked(result: int, node: ir.BinOp, text: str) -> int:
    if result.__class__ is not int or -INT_LIMIT < result < INT_LIMIT:
        return result
    raise EvalError(f"the result of `{node.op}` does not fit in 64 bits", node.span,
                    f"`{text}` is too large")


# ----------------------------------------------------------------------------- arithmetic


def _arith(op: str, a: int, b: int, node: ir.BinOp) -> int:
    if op in ("//", "%") and b == 0:
        raise EvalError("division by zero", node.span, f"`{expr_text(node.right)}` is 0")
    if op == "**":
        return _power(a, b, node)
    result: int = _ARITH[op](a, b)
    return _checked(result, node, f"{a} {op} {b}") if op == "*" else result


def _power(a: int, b: int, node: ir.BinOp) -> int:
    if b < 0:
        raise EvalError("`**` with a negative exponent", node.span,
                        f"`{expr_text(node.right)}` is {b}",
                        help="only integer results are allowed")
    if abs(a) >= 2 and b >= 64:
        raise EvalError("the result of `**` does not fit in 64 bits", node.span,
                        f"`{a} ** {b}` is too large")
    return _checked(a**b, node, f"{a} ** {b}")


_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}

_COMPARE: dict[str, Callable[[Value, Value], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
    "in": lambda a, b: operator.contains(b, a),  # type: ignore[arg-type]
    "not in": lambda a, b: not operator.contains(b, a),  # type: ignore[arg-type]
}

# ----------------------------------------------------------------------------- the compiler


class Compiler:
    """Compiles expressions into closures, once per node (cached by identity)."""

    def __init__(self) -> None:
        self._fns: dict[int, tuple[object, Fn]] = {}
        self._ints: dict[tuple[int, str], tuple[object, IntFn]] = {}
        self._seqs: dict[tuple[int, str], tuple[object, SeqFn]] = {}

    def value(self, e: ir.Expr) -> Fn:
        hit = self._fns.get(id(e))
        if hit is None:
            fn = _generate(self, e, None) if _arithmetic(e) else _COMPILE[type(e)](self, e)
            hit = self._fns[id(e)] = (e, fn)
        return hit[1]

    def closure(self, e: ir.Expr) -> Fn:
        """The node-by-node closure of `e` (what generated functions fall back to)."""
        return _COMPILE[type(e)](self, e)

    def integer(self, e: ir.Expr, what: str) -> IntFn:
        """A function that evaluates `e` and insists on an int (`what` names it)."""
        key = (id(e), what)
        hit = self._ints.get(key)
        if hit is None:
            hit = (e, _generate(self, e, what))
            self._ints[key] = hit
        return hit[1]

    def sequence(self, e: ir.Expr, what: str) -> SeqFn:
        """A closure that evaluates `e` and insists on a sequence."""
        key = (id(e), what)
        hit = self._seqs.get(key)
        if hit is None:
            hit = (e, _seq_fn(self.value(e), e, what))
            self._seqs[key] = hit
        return hit[1]

    def eval(self, e: ir.Expr, env: Env) -> Value:
        return self.value(e)(env)


# ----------------------------------------------------------------------------- generated code
#
# Integer arithmetic over names and literals (the bulk of region bounds and peers) is
# compiled into one Python function per expression, with the checks inline: one call
# per evaluation instead of one per node.  Anything else is called as a closure; on any
# failure the generated code calls the node's closure or checker, which raises the
# precise `EvalError`.


def _arithmetic(e: ir.Expr) -> bool:
    if isinstance(e, ir.BinOp) and isinstance(e.left, ir.Launch):  # `launch % K`: _binop
        return False
    return (isinstance(e, ir.BinOp) and e.op in _ARITH) or (
        isinstance(e, ir.UnaryOp) and e.op in ("-", "+"))


class _Gen:
    """Emits the body of `def _f(env)`: one line per step, results in temporaries."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler
        self.lines: list[str] = []
        self.ns: dict[str, object] = {"_as_int": as_int, "_arith": _arith, "_power": _power,
                                      "_L": INT_LIMIT, "_M": _MISSING}

    def obj(self, value: object) -> str:
        name = f"_o{len(self.ns)}"
        self.ns[name] = value
        return name

    def tmp(self, code: str) -> str:
        name = f"t{len(self.lines)}"
        self.lines.append(f"{name} = {code}")
        return name

    def emit(self, e: ir.Expr) -> tuple[str, bool]:
        """Code for the value of `e` (a name or literal) and whether it is surely an int."""
        if isinstance(e, ir.Const) and e.value.__class__ is int:
            return repr(e.value), True
        if isinstance(e, ir.Var | ir.ParamRef):
            table = "env.vars" if isinstance(e, ir.Var) else "env.params"
            t = self.tmp(f"{table}.get({e.name!r}, _M)")
            self.lines.append(f"if {t} is _M: {t} = {self.obj(self.compiler.closure(e))}(env)")
            return t, isinstance(e, ir.ParamRef)
        if isinstance(e, ir.Me | ir.NRanks):
            t = self.tmp("env.me" if isinstance(e, ir.Me) else "env.nranks")
            self.lines.append(f"if {t} is None: {t} = {self.obj(self.compiler.closure(e))}(env)")
            return t, True
        if isinstance(e, ir.BinOp) and e.op in _ARITH and not isinstance(e.left, ir.Launch):
            return self._binop(e), True
        if isinstance(e, ir.UnaryOp) and e.op in ("-", "+"):
            a = self.as_int(e.operand, f"the operand of unary `{e.op}`")
            return self.tmp(f"{e.op}{a}"), True
        return self.tmp(f"{self.obj(self.compiler.value(e))}(env)"), False

    def as_int(self, e: ir.Expr, what: str) -> str:
        code, is_int = self.emit(e)
        if is_int:
            return code
        return self.tmp(f"{code} if {code}.__class__ is int else "
                        f"_as_int({code}, {self.obj(e)}, {what!r})")

    def _binop(self, e: ir.BinOp) -> str:
        what = f"an operand of `{e.op}`"
        a, b = self.as_int(e.left, what), self.as_int(e.right, what)
        node = self.obj(e)
        if e.op == "**":
            return self.tmp(f"_power({a}, {b}, {node})")
        if e.op in ("//", "%") and not (b.lstrip("-").isdigit() and int(b) != 0):
            self.lines.append(f"if not {b}: _arith({e.op!r}, {a}, {b}, {node})")
        t = self.tmp(f"{a} {e.op} {b}")
        if e.op == "*":
            self.lines.append(f"if {t}.__class__ is int and not -_L < {t} < _L: "
                              f"_arith('*', {a}, {b}, {node})")
        return t


_MISSING = object()


def _generate(compiler: Compiler, e: ir.Expr, what: str | None) -> Callable[[Env], Any]:
    gen = _Gen(compiler)
    result = gen.as_int(e, what) if what is not None else gen.emit(e)[0]
    source = "def _f(env):\n" + "".join(f"    {line}\n" for line in gen.lines)
    source += f"    return {result}\n"
    exec(compile(source, f"<expr {expr_text(e)}>", "exec"), gen.ns)
    return cast(Callable[[Env], Any], gen.ns["_f"])


def _seq_fn(fn: Fn, e: ir.Expr, what: str) -> SeqFn:
    def run(env: Env) -> tuple[int, ...]:
        return as_seq(fn(env), e, what)
    return run


def _raiser(error: EvalError) -> Fn:
    def run(env: Env) -> Value:
        raise error
    return run


def _const(c: Compiler, e: ir.Const) -> Fn:
    value = e.value  # a float only as a `reduce` weight, which is read as a number
    return lambda env: value  # type: ignore[return-value]


def _var(c: Compiler, e: ir.Var) -> Fn:
    name, span = e.name, e.span

    def run(env: Env) -> Value:
        try:
            return env.vars[name]
        except KeyError:
            raise EvalError(f"`{name}` has no value here", span, "not bound") from None
    return run


def _param(c: Compiler, e: ir.ParamRef) -> Fn:
    name, span = e.name, e.span

    def run(env: Env) -> Value:
        try:
            return env.params[name]
        except KeyError:
            raise EvalError(f"parameter `{name}` has no value here", span, "not bound",
                            help="a parameter default may only use earlier parameters") from None
    return run


def _me(c: Compiler, e: ir.Me) -> Fn:
    span = e.span

    def run(env: Env) -> Value:
        me = env.me
        if me is None:
            raise EvalError(env.me_error, span, "`me` used here")
        return me
    return run


def _nranks(c: Compiler, e: ir.NRanks) -> Fn:
    span = e.span

    def run(env: Env) -> Value:
        n = env.nranks
        if n is None:
            raise EvalError(env.nranks_error, span, "`nranks` used here")
        return n
    return run


LAUNCH_USE = ("`launch` is only usable as `launch % K`, K a positive integer known at "
              "instantiation")
LAUNCH_HELP = ("write `launch % 2` to pick one of two landing slots by the launch's parity; "
               "`launch` never decides control flow, a peer or a queue")


def _launch(c: Compiler, e: ir.Launch) -> Fn:
    return _raiser(EvalError(LAUNCH_USE, e.span, "`launch` used here", help=LAUNCH_HELP))


def _launch_mod(c: Compiler, e: ir.BinOp) -> Fn:
    """`launch % K`: the launch's index modulo K (a rotation of K landing slots)."""
    modulus = c.value(e.right)
    span = e.left.span or e.span

    def run(env: Env) -> Value:
        k = as_int(modulus(env), e.right, "the modulus of `launch % K`")
        if not isinstance(k, int) or k < 1:
            raise EvalError(LAUNCH_USE, e.right.span or span, f"K is {k}", help=LAUNCH_HELP)
        if env.launch is None:
            raise EvalError("`launch` is not bound here: only kernels and `ensure` may use "
                            "it", span, "`launch` used here")
        if env.moduli is not None:
            env.moduli.add(k)
        return env.launch % k
    return run


def _binop(c: Compiler, e: ir.BinOp) -> Fn:
    if e.op not in _ARITH:
        return _raiser(EvalError(f"unknown operator `{e.op}`", e.span, code="E002"))
    if e.op == "%" and isinstance(e.left, ir.Launch):
        return _launch_mod(c, e)
    left, right, op = c.value(e.left), c.value(e.right), e.op
    what = f"an operand of `{op}`"
    fast = _ARITH[op] if op in ("+", "-") else None

    def run(env: Env) -> Value:
        a, b = left(env), right(env)
        x = a if isinstance(a, int) and a.__class__ is int else as_int(a, e.left, what)
        y = b if isinstance(b, int) and b.__class__ is int else as_int(b, e.right, what)
        return fast(x, y) if fast is not None else _arith(op, x, y, e)
    return run


def _unary(c: Compiler, e: ir.UnaryOp) -> Fn:
    operand = c.value(e.operand)
    if e.op == "not":
        return lambda env: not operand(env)
    if e.op not in ("-", "+"):
        return _raiser(EvalError(f"unknown operator `{e.op}`", e.span, code="E002"))
    sign = -1 if e.op == "-" else 1
    what = f"the operand of unary `{e.op}`"
    return lambda env: sign * as_int(operand(env), e.operand, what)


def _compare(c: Compiler, e: ir.Compare) -> Fn:
    unknown = [op for op in e.ops if op not in _COMPARE]
    if unknown:
        return _raiser(EvalError(f"unknown comparison `{unknown[0]}`", e.span, code="E002"))
    steps = tuple(zip(e.ops, (_COMPARE[op] for op in e.ops),
                      (c.value(o) for o in e.operands[1:]), strict=True))
    first = c.value(e.operands[0])

    def run(env: Env) -> Value:
        a = first(env)
        if len(steps) == 1:  # one comparison: a run-time operand gives a run-time truth
            op, cmp, fn = steps[0]
            return _compare_one(op, cmp, a, fn(env), e)
        for op, cmp, fn in steps:
            b = fn(env)
            if not _compare_one(op, cmp, a, b, e):
                return False
            a = b
        return True
    return run


def _compare_one(op: str, cmp: Callable[[Value, Value], bool], a: Value, b: Value,
                 e: ir.Compare) -> bool:
    if op in ("in", "not in") and not isinstance(b, tuple):
        raise EvalError(f"`{op}` needs a sequence on its right, not {_kind(b)}", e.span,
                        f"the right side is {describe(b)}")
    try:
        return cmp(a, b)  # an `Rt` (a run-time 0/1) when the operands are run-time values
    except TypeError:
        raise EvalError(f"cannot compare {_kind(a)} with {_kind(b)} using `{op}`", e.span,
                        f"{describe(a)} {op} {describe(b)}") from None


def _boolop(c: Compiler, e: ir.BoolOp) -> Fn:
    fns = tuple(c.value(v) for v in e.values)
    if e.op not in ("and", "or"):
        return _raiser(EvalError(f"unknown operator `{e.op}`", e.span, code="E002"))
    stop_on = e.op == "or"  # `or` stops at the first truthy value, `and` at the first falsy

    def run(env: Env) -> Value:
        v: Value = False
        for fn in fns:
            v = fn(env)
            if bool(v) is stop_on:
                return v
        return v
    return run


def _ifexp(c: Compiler, e: ir.IfExp) -> Fn:
    cond, then, orelse = c.value(e.cond), c.value(e.then), c.value(e.orelse)
    return lambda env: then(env) if cond(env) else orelse(env)


def _list(c: Compiler, e: ir.ListExpr) -> Fn:
    items = tuple(c.integer(i, "a list item") for i in e.items)
    return lambda env: tuple(item(env) for item in items)


# ----------------------------------------------------------------------------- built-ins


_ARITY: dict[str, tuple[int, int]] = {
    "peers": (0, 0), "ranks": (0, 0), "range": (1, 3), "len": (1, 1),
    "min": (1, 1 << 30), "max": (1, 1 << 30), "abs": (1, 1),
}


def _call(c: Compiler, e: ir.Call) -> Fn:
    if e.func not in _ARITY:
        return _raiser(EvalError(f"unknown function `{e.func}`", e.span, "not a built-in",
                                 code="E002"))
    lo, hi = _ARITY[e.func]
    if not lo <= len(e.args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}" if hi < 99 else f"at least {lo}"
        return _raiser(EvalError(f"`{e.func}` takes {want} argument{'' if want == '1' else 's'}",
                                 e.span, f"{len(e.args)} given", code="E002"))
    return _BUILTINS[e.func](c, e)


def _peers(c: Compiler, e: ir.Call) -> Fn:
    me_fn, n_fn = _me(c, ir.Me(span=e.span)), _nranks(c, ir.NRanks(span=e.span))

    def run(env: Env) -> Value:
        me, n = me_fn(env), n_fn(env)
        return tuple(r for r in range(n) if r != me)  # type: ignore[arg-type]
    return run


def _ranks(c: Compiler, e: ir.Call) -> Fn:
    n_fn = _nranks(c, ir.NRanks(span=e.span))
    return lambda env: tuple(range(n_fn(env)))  # type: ignore[arg-type]


def _range(c: Compiler, e: ir.Call) -> Fn:
    args = tuple(c.integer(a, "`range`") for a in e.args)

    def run(env: Env) -> Value:
        values = [a(env) for a in args]
        for v, a in zip(values, e.args, strict=True):
            if v.__class__ is not int:
                raise EvalError("a `range` bound must be a static integer", a.span,
                                "a run-time value" if isinstance(v, _rt.Rt) else "not an integer",
                                help="a kernel's `for t in range(n)` may run to a run-time "
                                     "count `n` (one argument, bounded in `require:`, e.g. "
                                     "`0 <= ntok[0] <= tokens`): it is instantiated to the "
                                     "bound, each op guarded by `t < n` (language reference "
                                     "§14); other `range` forms, and comprehensions, need "
                                     "static bounds")
        if len(values) == 3 and values[2] == 0:
            raise EvalError("`range` step must not be zero", e.args[2].span, "this is 0")
        r = range(*values)
        size = _range_len(r)
        if size > MAX_SEQUENCE:
            raise EvalError(f"`range` of {size:,} elements is too long to unroll", e.span,
                            f"at most {MAX_SEQUENCE:,} elements")
        return tuple(r)
    return run


def _range_len(r: range) -> int:
    """`len(r)`, also past 64 bits (where `len` raises OverflowError)."""
    try:
        return len(r)
    except OverflowError:
        return max(0, -(-(r.stop - r.start) // r.step))


def _len(c: Compiler, e: ir.Call) -> Fn:
    arg = c.sequence(e.args[0], "`len`")
    return lambda env: len(arg(env))


def _abs(c: Compiler, e: ir.Call) -> Fn:
    arg = c.integer(e.args[0], "the argument of `abs`")
    return lambda env: abs(arg(env))


def _minmax(c: Compiler, e: ir.Call) -> Fn:
    pick = min if e.func == "min" else max
    if len(e.args) == 1:
        seq = c.sequence(e.args[0], f"`{e.func}` of one argument")

        def one(env: Env) -> Value:
            values = seq(env)
            if not values:
                raise EvalError(f"`{e.func}` of an empty sequence", e.args[0].span,
                                "this is empty")
            return pick(values)
        return one
    args = tuple(c.integer(a, f"an argument of `{e.func}`") for a in e.args)

    def several(env: Env) -> Value:
        values = [a(env) for a in args]
        if any(isinstance(v, _rt.Rt) for v in values):
            return _rt.rt_min_max(e.func, values)  # type: ignore[return-value]
        return pick(values)
    return several


def _load(c: Compiler, e: ir.Load) -> Fn:
    index = c.integer(e.index, "the index of `load`")
    rank = c.integer(e.rank, "the rank of `load`") if e.rank is not None else None
    me_fn = _me(c, ir.Me(span=e.span))

    def run(env: Env) -> Value:
        loader = env.loader
        if loader is None:
            raise EvalError("a run-time value cannot be used here", e.span,
                            "only known on the device",
                            help="sizes of windows and buffers, launch sizes, queues and "
                                 "parameters are static")
        i = index(env)
        r = rank(env) if rank is not None else me_fn(env)
        if isinstance(i, _rt.Rt) or isinstance(r, _rt.Rt):
            raise EvalError("the element a run-time value reads must be static", e.span,
                            "this index or rank is itself a run-time value",
                            help="index `load(x[i])` with loop variables and parameters")
        return loader(e, r, i)  # type: ignore[arg-type, no-any-return]
    return run


def _genexpr(c: Compiler, e: ir.GenExpr) -> Fn:
    seq = c.sequence(e.iter, f"`{e.func}(... for ...)`")
    elt = c.value(e.elt)
    cond = c.value(e.cond) if e.cond is not None else None
    name = e.var

    def run(env: Env) -> Value:
        saved = env.vars.get(name, _MISSING)
        values: list[Any] = []
        try:
            for v in seq(env):
                env.vars[name] = v
                if cond is not None and not cond(env):
                    continue
                values.append(elt(env))
        finally:
            if saved is _MISSING:
                env.vars.pop(name, None)
            else:
                env.vars[name] = saved  # type: ignore[assignment]
        if e.func == "sum":
            if any(isinstance(v, _rt.Rt) for v in values) and \
                    not any(isinstance(v, float) for v in values):
                return _rt.rt_sum(values)  # type: ignore[return-value]
            total: Any = 0
            for v in values:
                total = total + v
            return total  # type: ignore[no-any-return]
        if not values:
            raise EvalError(f"`{e.func}` of an empty sequence", e.span, "nothing to compare")
        if any(isinstance(v, _rt.Rt) for v in values):
            return _rt.rt_min_max(e.func, values)  # type: ignore[return-value]
        return (min if e.func == "min" else max)(values)  # type: ignore[no-any-return]
    return run


_BUILTINS: dict[str, Callable[[Compiler, ir.Call], Fn]] = {
    "peers": _peers, "ranks": _ranks, "range": _range, "len": _len,
    "min": _minmax, "max": _minmax, "abs": _abs,
}

_COMPILE: dict[type, Callable[[Compiler, Any], Fn]] = {
    ir.Const: _const, ir.Var: _var, ir.ParamRef: _param, ir.Me: _me, ir.NRanks: _nranks,
    ir.Launch: _launch,
    ir.BinOp: _binop, ir.UnaryOp: _unary, ir.Compare: _compare, ir.BoolOp: _boolop,
    ir.IfExp: _ifexp, ir.Call: _call, ir.ListExpr: _list, ir.Load: _load, ir.GenExpr: _genexpr,
}

# ----------------------------------------------------------------------------- printing


_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 6, "-": 6, "*": 7, "//": 7, "%": 7,
         "unary": 8, "**": 9}
_ATOM = 10


def expr_text(e: ir.Expr) -> str:
    """Python-like source text of an expression, for messages."""
    return _text(e)[0]


def _wrap(e: ir.Expr, at_least: int) -> str:
    text, prec = _text(e)
    return f"({text})" if prec < at_least else text


def _text(e: ir.Expr) -> tuple[str, int]:
    match e:
        case ir.Const(value=v):
            return (str(v), _ATOM) if v >= 0 else (str(v), _PREC["unary"])
        case ir.Var(name=n) | ir.ParamRef(name=n):
            return n, _ATOM
        case ir.Me():
            return "me", _ATOM
        case ir.NRanks():
            return "nranks", _ATOM
        case ir.Launch():
            return "launch", _ATOM
        case ir.BinOp(op=op, left=a, right=b):
            p = _PREC.get(op, 6)
            if op == "**":
                return f"{_wrap(a, p + 1)} ** {_wrap(b, _PREC['unary'])}", p
            return f"{_wrap(a, p)} {op} {_wrap(b, p + 1)}", p
        case ir.UnaryOp(op="not", operand=a):
            return f"not {_wrap(a, _PREC['not'])}", _PREC["not"]
        case ir.UnaryOp(op=op, operand=a):
            return f"{op}{_wrap(a, _PREC['unary'])}", _PREC["unary"]
        case ir.Compare(ops=ops, operands=xs):
            rest = [f"{o} {_wrap(x, 5)}" for o, x in zip(ops, xs[1:], strict=True)]
            parts = [_wrap(xs[0], 5), *rest]
            return " ".join(parts), _PREC["cmp"]
        case ir.BoolOp(op=op, values=vs):
            p = _PREC.get(op, 1)
            return f" {op} ".join(_wrap(v, p + 1) for v in vs), p
        case ir.IfExp(cond=c, then=t, orelse=o):
            return f"{_wrap(t, 1)} if {_wrap(c, 1)} else {_wrap(o, 0)}", 0
        case ir.Call(func=f, args=args):
            return f"{f}({', '.join(expr_text(a) for a in args)})", _ATOM
        case ir.ListExpr(items=items):
            return f"[{', '.join(expr_text(i) for i in items)}]", _ATOM
        case ir.Load(window=w, index=i, rank=r, init=init):
            base = w if r is None else f"{w}@{_wrap(r, _ATOM)}"
            return (f"init({base})[{expr_text(i)}]" if init
                    else f"load({base}[{expr_text(i)}])"), _ATOM
        case ir.GenExpr(func=f, elt=elt, var=v, iter=it):
            return f"{f}({expr_text(elt)} for {v} in {expr_text(it)})", _ATOM
    return "?", _ATOM


__all__ = [
    "MAX_SEQUENCE",
    "Compiler",
    "Env",
    "EvalError",
    "Value",
    "as_int",
    "as_seq",
    "describe",
    "expr_text",
]
