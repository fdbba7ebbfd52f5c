"""IR -> canonical `.cco` text (used by `ccogen fmt` and `Protocol.to_source()`).

Canonical form: four-space indentation; declarations in the order docstring, team,
queues, windows, buffers, counters, require, kernels, ensure; defaults omitted (`queues 1`,
`queue="auto"`, `signal="none"`...) except `reduce`'s `op=`, always written; the
fewest parentheses Python's precedence allows; byte-sized parameter defaults with a
unit (`1 MiB`); integer literals as written (`0x1000`, `4 KiB`, `1_024`) when they
came from text; a `u8` window in the untyped form (`window w: SIZE`); a call longer
than the line limit wrapped after a comma with a four-space continuation indent.
`parse(print_protocol(p)) == p` for every protocol.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.signatures import SIGNATURES
from ccogen.source import Span

if TYPE_CHECKING:
    from ccogen.syntax.format import Comments

INDENT = "    "
LINE_LIMIT = 100

_BIN_PREC = {"+": 6, "-": 6, "*": 7, "//": 7, "%": 7, "**": 9}
_ATOM = 10

_LOADS = ["kernel"]  # where loads print: `load(x[i])` in kernels, `x[i]` in require/ensure


def _prec(e: ir.Expr) -> int:
    if isinstance(e, ir.IfExp):
        return 1
    if isinstance(e, ir.BoolOp):
        return 2 if e.op == "or" else 3
    if isinstance(e, ir.UnaryOp):
        return 4 if e.op == "not" else 8
    if isinstance(e, ir.Compare):
        return 5
    if isinstance(e, ir.BinOp):
        return _BIN_PREC[e.op]
    if isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value < 0:
        return 8
    return _ATOM


def _literal(c: ir.Const) -> str:
    """The literal as written when it still says the same value, else canonical."""
    if c.text is not None and _literal_value(c.text) == c.value:
        return c.text
    return repr(c.value) if isinstance(c.value, float) else str(c.value)


def _literal_value(text: str) -> int | float | None:
    """The value of an integer, size or float literal's text (None if it is none)."""
    from ccogen.syntax.to_ast import UNITS, int_literal

    body, sign = (text[1:], -1) if text.startswith("-") else (text, 1)
    try:
        return sign * int_literal(body)
    except ValueError:
        pass
    sized = re.fullmatch(r"(\w+?)\s*(KiB|MiB|GiB|B)", body)
    try:
        if sized:
            return sign * int_literal(sized[1]) * UNITS[sized[2]]
        return sign * float(body.replace("_", ""))
    except ValueError:
        return None


def expr(e: ir.Expr, need: int = 0) -> str:
    text = _expr(e)
    return f"({text})" if _prec(e) < need else text


def _expr(e: ir.Expr) -> str:
    match e:
        case ir.Const(value=bool() as b):
            return "True" if b else "False"
        case ir.Const():
            return _literal(e)
        case ir.Var(name=n) | ir.ParamRef(name=n):
            return n
        case ir.Me():
            return "me"
        case ir.NRanks():
            return "nranks"
        case ir.Launch():
            return "launch"
        case ir.BinOp(op="**", left=left, right=right):
            return f"{expr(left, _ATOM)} ** {expr(right, 8)}"
        case ir.BinOp(op=op, left=left, right=right):
            p = _BIN_PREC[op]
            return f"{expr(left, p)} {op} {expr(right, p + 1)}"
        case ir.UnaryOp(op="not", operand=x):
            return f"not {expr(x, 4)}"
        case ir.UnaryOp(op=op, operand=x):
            return f"{op}{expr(x, 8)}"
        case ir.Compare(ops=ops, operands=xs):
            parts = [expr(xs[0], 6)]
            for op, x in zip(ops, xs[1:], strict=True):
                parts += [op, expr(x, 6)]
            return " ".join(parts)
        case ir.BoolOp(op=op, values=xs):
            need = 3 if op == "or" else 4
            return f" {op} ".join(expr(x, need) for x in xs)
        case ir.IfExp(cond=c, then=t, orelse=o):
            return f"{expr(t, 2)} if {expr(c, 2)} else {expr(o, 1)}"
        case ir.Call(func=f, args=args):
            return f"{f}({', '.join(expr(a) for a in args)})"
        case ir.ListExpr(items=items):
            return f"[{', '.join(expr(i) for i in items)}]"
        case ir.Load():
            return _load(e)
        case ir.GenExpr(func=f, elt=elt, var=v, iter=it, cond=cond):
            tail = f" if {expr(cond, 2)}" if cond is not None else ""
            return f"{f}({expr(elt, 2)} for {v} in {expr(it, 2)}{tail})"
    raise AssertionError(f"unknown expression {e!r}")


def _load(e: ir.Load) -> str:
    where = _LOADS[0]
    element = region(ir.Region(window=e.window, start=e.index, rank=e.rank, single=True,
                               init=e.init and where == "ensure"))
    return f"load({element})" if where == "kernel" else element


def size_literal(value: ir.Expr) -> str:
    """`1 MiB` for a byte count that is a whole number of a unit, else the number
    (a literal as written stays as written)."""
    if isinstance(value, ir.Const) and value.text is not None and \
            _literal_value(value.text) == value.value:
        return value.text
    if isinstance(value, ir.Const) and not isinstance(value.value, bool) and value.value > 0:
        for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value.value % scale == 0:
                return f"{value.value // scale} {unit}"
        return f"{value.value} B"
    return expr(value)


def region(r: ir.Region) -> str:
    base = r.window
    if r.rank is not None:
        rank = expr(r.rank)
        simple = isinstance(r.rank, (ir.Var, ir.ParamRef, ir.Me, ir.NRanks)) or (
            isinstance(r.rank, ir.Const) and _prec(r.rank) == _ATOM)
        base = f"{r.window}@{rank}" if simple else f"{r.window}@({rank})"
    if r.init:
        base = f"init({base})"
    elif r.rank is not None and (r.start is not None or r.stop is not None):
        base = f"({base})"
    if r.single and r.start is not None:
        return f"{base}[{expr(r.start)}]"
    if r.start is None and r.stop is None:
        return base
    lo = expr(r.start) if r.start is not None else ""
    hi = expr(r.stop) if r.stop is not None else ""
    return f"{base}[{lo} : {hi}]" if _spaced(r) else f"{base}[{lo}:{hi}]"


def listcomp(c: ir.ListComp, *, brackets: bool = True) -> str:
    elt = region(c.elt) if isinstance(c.elt, ir.Region) else expr(c.elt)
    text = f"{elt} for {c.var} in {expr(c.iter, 2)}"
    if c.cond is not None:
        text += f" if {expr(c.cond, 2)}"
    return f"[{text}]" if brackets else text


def region_list(items: tuple[ir.Region, ...] | ir.ListComp) -> str:
    if isinstance(items, ir.ListComp):
        return listcomp(items)
    return f"[{', '.join(region(r) for r in items)}]"


def weight_list(items: tuple[ir.Expr, ...] | ir.ListComp) -> str:
    if isinstance(items, ir.ListComp):
        return listcomp(items)
    return f"[{', '.join(expr(w) for w in items)}]"


def reduction(r: ir.Reduction) -> str:
    if isinstance(r.terms, ir.ListComp) and r.weights is None:
        return f"{r.op.value}({listcomp(r.terms, brackets=False)})"
    weights = f", weights={weight_list(r.weights)}" if r.weights is not None else ""
    return f"{r.op.value}({region_list(r.terms)}{weights})"


def dtype_spec(d: DType | ir.ParamRef) -> str:
    return d.name if isinstance(d, ir.ParamRef) else d.value


def _spaced(r: ir.Region) -> bool:
    """Slices of compound bounds get spaces around `:` (PEP 8)."""
    return any(b is not None and _prec(b) < _ATOM for b in (r.start, r.stop))


def _string(value: str) -> str:
    return f'"{value}"'


def _op_args(op: ir.Op) -> list[str]:
    name = ir.OP_KINDS[type(op)]
    args: list[str] = []
    for spec in SIGNATURES[name]:
        value = getattr(op, spec.name)
        text = _arg(spec.kind, value)
        if text is None:
            continue
        if spec.positional and spec.kind in ("rank", "counter") and len(args) == _npos(args):
            args.append(text)
        else:
            args.append(f"{spec.name}={text}")
    return args


def _npos(args: list[str]) -> int:
    return sum(1 for a in args if "=" not in a.split("(")[0].split("[")[0])


def _arg(kind: str, value: object) -> str | None:
    if value is None or value is False:
        return None
    if kind == "region":
        assert isinstance(value, ir.Region)
        return region(value)
    if kind in ("signal", "mode"):
        assert isinstance(value, (ir.SignalKind, ir.Mode))
        return None if value.value in ("none", "auto") else _string(value.value)
    if kind == "bool":
        return "True"
    if kind == "counter":
        assert isinstance(value, str)
        return value
    if kind == "regions":
        return region_list(value)  # type: ignore[arg-type]
    if kind == "weights":
        return weight_list(value)  # type: ignore[arg-type]
    if kind == "reduce_op":
        assert isinstance(value, ir.ReduceOp)
        return _string(value.value)  # always written: `reduce` reads better with its op
    assert not isinstance(value, (str, bool))
    return expr(value)  # type: ignore[arg-type]


def _call(indent: str, name: str, args: list[str]) -> list[str]:
    line = f"{indent}{name}({', '.join(args)})"
    if len(line) <= LINE_LIMIT or not args:
        return [line]
    lines: list[str] = []
    current = f"{indent}{name}("
    cont = indent + INDENT
    for i, arg in enumerate(args):
        piece = arg + (")" if i == len(args) - 1 else ",")
        if current.endswith(("(", ",")) is False and len(current) + 1 + len(piece) > LINE_LIMIT:
            lines.append(current)
            current = cont + piece
        elif current.endswith("("):
            current += piece
        elif len(current) + 1 + len(piece) > LINE_LIMIT:
            lines.append(current)
            current = cont + piece
        else:
            current += " " + piece
    lines.append(current)
    return lines


class Printer:
    """Prints statements and declarations; `comments` re-inserts the source's comments."""

    def __init__(self, comments: Comments | None = None) -> None:
        self.comments = comments

    def _lead(self, span: Span | None, depth: int) -> Iterator[str]:
        if self.comments is not None and span is not None:
            for text in self.comments.before(span.line):
                yield INDENT * depth + text

    def _trail(self, lines: list[str], span: Span | None,
               last_line: int | None = None) -> list[str]:
        if self.comments is not None and span is not None and lines:
            text = self.comments.inline(span.line, last_line or span.end_line)
            if text:
                lines[-1] += "  " + text
        return lines

    def statements(self, body: tuple[ir.Stmt, ...], depth: int) -> Iterator[str]:
        if not body:
            yield INDENT * depth + "pass"
        for s in body:
            yield from self._lead(s.span, depth)
            yield from self.statement(s, depth)

    def statement(self, s: ir.Stmt, depth: int) -> Iterator[str]:
        ind = INDENT * depth
        match s:
            case ir.For(var=v, iter=it, body=body):
                yield from self._trail([f"{ind}for {v} in {expr(it)}:"], s.span, _line(s.span))
                yield from self.statements(body, depth + 1)
            case ir.IssuerBlock(kind=k, var=v, iter=it, body=body):
                yield from self._trail([f"{ind}{k.value} {v} in {expr(it)}:"], s.span,
                                       _line(s.span))
                yield from self.statements(body, depth + 1)
            case ir.If():
                yield from self._if(s, depth, "if")
            case ir.Check(op=op, left=left, right=ir.Reduction() as right):
                yield from self._trail([f"{ind}{region(left)} {op} {reduction(right)}"], s.span)
            case ir.Check(op=op, left=left, right=ir.Region() as right):
                yield from self._trail([f"{ind}{region(left)} {op} {region(right)}"], s.span)
            case ir.Assign(var=v, value=value):
                yield from self._trail([f"{ind}{v} = {expr(value)}"], s.span)
            case ir.Require(cond=cond):
                yield from self._trail([f"{ind}{expr(cond)}"], s.span)
            case _:
                lines = _call(ind, ir.OP_KINDS[type(s)], _op_args(s))  # type: ignore[arg-type]
                yield from self._trail(lines, s.span)

    def _if(self, s: ir.If, depth: int, keyword: str) -> Iterator[str]:
        ind = INDENT * depth
        yield from self._trail([f"{ind}{keyword} {expr(s.cond)}:"], s.span, _line(s.span))
        yield from self.statements(s.body, depth + 1)
        if len(s.orelse) == 1 and isinstance(s.orelse[0], ir.If):
            yield from self._lead(s.orelse[0].span, depth)
            yield from self._if(s.orelse[0], depth, "elif")
        elif s.orelse:
            yield f"{ind}else:"
            yield from self.statements(s.orelse, depth + 1)

    def header(self, p: ir.Protocol) -> Iterator[str]:
        yield from self._lead(p.span, 0)
        yield f"protocol {p.name}({', '.join(_param(x) for x in p.params)}):"
        if p.doc is not None:
            yield INDENT + _docstring(p.doc)
        team = p.team.kind.value
        yield from self._lead(p.team.span, 1)
        size = f"({expr(p.team.size)})" if p.team.size is not None else ""
        yield from self._trail([f"{INDENT}team {team}{size}"], p.team.span)
        if p.queues is None or p.queues != ir.Const(value=1):
            yield from self._lead(p.queues_span, 1)
            count = "auto" if p.queues is None else expr(p.queues)
            yield from self._trail([f"{INDENT}queues {count}"], p.queues_span)
        if p.between_launches is not ir.LaunchOrder.BACK_TO_BACK:
            yield from self._lead(p.between_launches_span, 1)
            yield from self._trail([f"{INDENT}between_launches: {p.between_launches.value}"],
                                   p.between_launches_span)
        for w in p.windows:
            yield from self._lead(w.span, 1)
            align = f", align={expr(w.align)}" if w.align is not None else ""
            size = expr(w.size) if w.dtype is DType.U8 else \
                f"{dtype_spec(w.dtype)}[{expr(w.size)}]"
            yield from self._trail([f"{INDENT}window {w.name}: {size}{align}"], w.span)
        for b in p.buffers:
            yield from self._lead(b.span, 1)
            yield from self._trail([f"{INDENT}buffer {b.name}: {dtype_spec(b.dtype)}"
                                    f"[{expr(b.size)}]"], b.span)
        for c in p.counters:
            yield from self._lead(c.span, 1)
            yield from self._trail([f"{INDENT}counter {c.name}"], c.span)

    def kernel(self, k: ir.Kernel) -> Iterator[str]:
        yield from self._lead(k.span, 1)
        args = f"threads={expr(k.threads)}"
        if k.blocks is not None:
            args += f", blocks={expr(k.blocks)}"
        yield from self._trail([f"{INDENT}kernel {k.name}({args}):"], k.span, _line(k.span))
        yield from self.statements(k.body, 2)

    def protocol(self, p: ir.Protocol) -> str:
        lines = list(self.header(p))
        try:
            _LOADS[0] = "require"
            if p.require:
                lines += ["", f"{INDENT}require:", *self.statements(p.require, 2)]
            _LOADS[0] = "kernel"
            for k in p.kernels:
                lines.append("")
                lines.extend(self.kernel(k))
            _LOADS[0] = "ensure"
            if p.ensure:
                lines += ["", f"{INDENT}ensure:", *self.statements(p.ensure, 2)]
        finally:
            _LOADS[0] = "kernel"
        if self.comments is not None:
            rest = list(self.comments.before(None))
            if rest:
                lines += ["", *rest]
        return "\n".join(lines) + "\n"


def _line(span: Span | None) -> int | None:
    return span.line if span is not None else None


def _docstring(doc: str) -> str:
    if '"""' in doc or "\\" in doc or doc.endswith('"') or not (doc.isprintable() or
                                                                 set(doc) <= {"\n", "\t"}):
        return repr(doc)
    return f'"""{doc}"""'


def _param(p: ir.Param) -> str:
    if isinstance(p.default, DType):
        return f"{p.name}: {p.type.value} = {p.default.value}"
    default = size_literal(p.default) if p.type is ir.ParamType.BYTES else expr(p.default)
    return f"{p.name}: {p.type.value} = {default}"


def print_protocol(p: ir.Protocol, comments: Comments | None = None) -> str:
    return Printer(comments).protocol(p)
