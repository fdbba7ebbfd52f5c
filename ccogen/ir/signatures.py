"""The call signatures of the operations, shared by the text lowering and the builder.

Each parameter has a kind that says how its value is read:

| kind      | value in the IR                                        |
|-----------|--------------------------------------------------------|
| `rank`    | an integer `Expr` (a team rank)                        |
| `region`  | a `Region` of a window                                 |
| `queue`   | an integer `Expr`, or `None` for `"auto"`              |
| `int`     | an integer `Expr`                                      |
| `signal`  | a `SignalKind` (from a string)                         |
| `mode`    | a `Mode` (from a string)                               |
| `bool`    | a Python bool (a literal `True`/`False`)               |
| `counter` | the name of a declared counter                         |
| `regions` | `tuple[Region, ...]` or a `ListComp` of regions (`srcs=`) |
| `reduce_op` | a `ReduceOp` (from a string)                           |
| `weights` | `tuple[Expr, ...]` or a `ListComp` of numbers          |

`bind()` maps positional and keyword arguments to parameter names and reports
unknown, duplicate and missing arguments as E002.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.ir import nodes as ir
from ccogen.ir.opkind import OpKind
from ccogen.source import Span


@dataclass(frozen=True, slots=True)
class ParamSpec:
    name: str
    kind: str
    required: bool = False
    positional: bool = False


def _p(name: str, kind: str, *, required: bool = False, positional: bool = False) -> ParamSpec:
    return ParamSpec(name, kind, required, positional)


_TRANSFER = (
    _p("peer", "rank", required=True, positional=True),
    _p("dst", "region", required=True),
    _p("src", "region", required=True),
    _p("queue", "queue"),
    _p("signal", "signal"),
    _p("aggregate", "bool"),
)

SIGNATURES: dict[OpKind, tuple[ParamSpec, ...]] = {
    OpKind.PUT: (*_TRANSFER, _p("signal_per_copy", "bool"), _p("mode", "mode"),
                 _p("count", "counter")),
    OpKind.GET: (*_TRANSFER, _p("mode", "mode")),
    OpKind.COPY: (_p("dst", "region", required=True), _p("src", "region", required=True)),
    OpKind.COMMIT: (_p("peer", "rank", required=True, positional=True),
                    _p("queue", "queue", positional=True)),
    OpKind.QUIET: (_p("peer", "rank", positional=True), _p("queue", "queue", positional=True)),
    OpKind.WAIT_SIGNAL: (
        _p("src", "rank", required=True, positional=True),
        _p("queue", "queue", positional=True),
        _p("expected", "int"),
    ),
    OpKind.WAIT_COUNT: (_p("counter", "counter", required=True, positional=True),
                        _p("expected", "int")),
    OpKind.RESET_COUNT: (_p("counter", "counter", required=True, positional=True),),
    OpKind.BARRIER: (),
    OpKind.FENCE: (),
    OpKind.REDUCE: (_p("dst", "region", required=True), _p("srcs", "regions", required=True),
                    _p("op", "reduce_op"), _p("weights", "weights")),
    OpKind.SIGNAL: (_p("peer", "rank", required=True, positional=True),
                    _p("queue", "queue", positional=True)),
}
"""The parameters of each op, in the order the language lists them (text order)."""

OP_CLASSES: dict[OpKind, type] = {kind: cls for cls, kind in ir.OP_KINDS.items()}
"""The IR node class of each op kind."""

CHOICES: dict[str, tuple[str, ...]] = {
    "signal": tuple(s.value for s in ir.SignalKind),
    "mode": tuple(m.value for m in ir.Mode),
    "reduce_op": tuple(o.value for o in ir.ReduceOp),
}


def signature_text(name: OpKind) -> str:
    """`put(peer, dst=..., src=..., ...)` as shown in help texts."""
    parts = []
    for p in SIGNATURES[name]:
        parts.append(p.name if p.positional and p.required else f"{p.name}=...")
    return f"{name}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument as written: `keyword` is None for a positional one."""

    keyword: str | None
    value: Any
    span: Span | None


def bind(
    name: OpKind, args: Sequence[Arg], span: Span | None
) -> tuple[dict[str, Arg], list[Diagnostic]]:
    """Match arguments to the parameters of op `name`."""
    params = SIGNATURES[name]
    by_name = {p.name: p for p in params}
    positional = [p for p in params if p.positional]
    bound: dict[str, Arg] = {}
    diags: list[Diagnostic] = []
    hint = f"the signature is `{signature_text(name)}`"
    for i, arg in enumerate(a for a in args if a.keyword is None):
        if i >= len(positional):
            diags.append(error("E002", f"`{name}` takes at most {len(positional)} positional "
                               f"argument{'s' if len(positional) != 1 else ''}", arg.span,
                               "unexpected argument", help=hint))
            continue
        bound[positional[i].name] = arg
    for arg in (a for a in args if a.keyword is not None):
        assert arg.keyword is not None
        if arg.keyword not in by_name:
            diags.append(error("E002", f"`{name}` has no argument `{arg.keyword}`", arg.span,
                               "unknown keyword", help=hint))
        elif arg.keyword in bound:
            diags.append(error("E002", f"argument `{arg.keyword}` given twice", arg.span,
                               "given again here", help=hint))
        else:
            bound[arg.keyword] = arg
    for p in params:
        if p.required and p.name not in bound:
            diags.append(error("E002", f"`{name}` needs argument `{p.name}`", span,
                               f"`{p.name}` missing", help=hint))
    return bound, diags


def make_op(name: OpKind, values: Mapping[str, Any], span: Span | None) -> ir.Op:
    """Construct the IR op from converted values (missing optional ones default)."""
    cls = OP_CLASSES[name]
    return cls(**values, span=span)  # type: ignore[no-any-return]
