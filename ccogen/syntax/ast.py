"""The surface syntax of `.cco` as frozen dataclasses, each with its span.

The AST is what was written, names unresolved; `ccogen.syntax.lower` resolves it
into the IR.  Spans are excluded from equality like in the IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar, dataclass_transform

from ccogen.source import Span

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def _node(cls: type[_T]) -> type[_T]:
    """Frozen, slotted, keyword-only dataclass (spans excluded from equality)."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)


def _span() -> Span:
    return field(compare=False, repr=False)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- expressions


@_node
class Name:
    id: str
    span: Span = _span()


@_node
class Number:
    value: int
    span: Span = _span()
    text: str | None = field(default=None, compare=False, repr=False)  # as written


@_node
class Float:
    """A float literal (`0.5`, `1e-3`): only a `reduce` weight may be one."""

    value: float
    span: Span = _span()
    text: str | None = field(default=None, compare=False, repr=False)


@_node
class Size:
    """`4 KiB`: `value` is already in bytes."""

    value: int
    span: Span = _span()


@_node
class String:
    value: str
    span: Span = _span()


@_node
class Bool:
    value: bool
    span: Span = _span()


@_node
class BinOp:
    op: str
    left: AExpr
    right: AExpr
    span: Span = _span()


@_node
class Unary:
    op: str
    operand: AExpr
    span: Span = _span()


@_node
class Compare:
    ops: tuple[str, ...]
    operands: tuple[AExpr, ...]
    span: Span = _span()


@_node
class BoolOp:
    op: str
    values: tuple[AExpr, ...]
    span: Span = _span()


@_node
class IfExp:
    cond: AExpr
    then: AExpr
    orelse: AExpr
    span: Span = _span()


@_node
class Argument:
    keyword: str | None
    value: AExpr
    span: Span = _span()


@_node
class Call:
    func: AExpr
    args: tuple[Argument, ...]
    span: Span = _span()


@_node
class Subscript:
    """`x[a:b]` (`is_slice`) or `x[i]`."""

    value: AExpr
    start: AExpr | None
    stop: AExpr | None
    is_slice: bool
    span: Span = _span()


@_node
class Remote:
    """`w@p`: window `w` on rank `p`."""

    window: Name
    rank: AExpr
    span: Span = _span()


@_node
class List:
    items: tuple[AExpr, ...]
    span: Span = _span()


@_node
class ListComp:
    """`[elt for var in iter if cond]`, or a generator `f(elt for var in iter)`
    (`generator`: the sole argument of a call)."""

    elt: AExpr
    var: Name
    iter: AExpr
    cond: AExpr | None
    generator: bool
    span: Span = _span()


AExpr: TypeAlias = (
    Name | Number | Float | Size | String | Bool | BinOp | Unary | Compare | BoolOp | IfExp
    | Call | Subscript | Remote | List | ListComp
)

# ----------------------------------------------------------------------------- statements


@_node
class ExprStmt:
    value: AExpr
    span: Span = _span()


@_node
class PassStmt:
    span: Span = _span()


@_node
class AssignStmt:
    """`name = EXPR`."""

    var: Name
    value: AExpr
    span: Span = _span()


@_node
class IfStmt:
    """`if`/`elif`/`else`: `branches` are (condition, body) pairs in order."""

    branches: tuple[tuple[AExpr, tuple[AStmt, ...]], ...]
    orelse: tuple[AStmt, ...] | None
    span: Span = _span()


@_node
class ForStmt:
    var: Name
    iter: AExpr
    body: tuple[AStmt, ...]
    span: Span = _span()


@_node
class IssuerStmt:
    kind: str
    var: Name
    iter: AExpr
    body: tuple[AStmt, ...]
    span: Span = _span()


AStmt: TypeAlias = ExprStmt | PassStmt | AssignStmt | IfStmt | ForStmt | IssuerStmt

# ----------------------------------------------------------------------------- declarations


@_node
class ParamDecl:
    name: Name
    type: Name
    default: AExpr
    span: Span = _span()


@_node
class TeamDecl:
    kind: Name
    size: AExpr | None
    span: Span = _span()


@_node
class QueuesDecl:
    count: AExpr
    span: Span = _span()


@_node
class SettingDecl:
    """`name: value` (`between_launches: host_sync`)."""

    name: Name
    value: Name
    span: Span = _span()


@_node
class WindowDecl:
    name: Name
    size: AExpr
    option: Name | None
    option_value: AExpr | None
    span: Span = _span()


@_node
class BufferDecl:
    """`buffer NAME: DTYPE[COUNT]` (`type` is the subscript as written)."""

    name: Name
    type: AExpr
    span: Span = _span()


@_node
class CounterDecl:
    name: Name
    span: Span = _span()


@_node
class KernelDecl:
    name: Name
    args: tuple[Argument, ...]
    body: tuple[AStmt, ...]
    span: Span = _span()


@_node
class EnsureDecl:
    body: tuple[AStmt, ...]
    span: Span = _span()


@_node
class RequireDecl:
    """`require:` preconditions over the initial contents (language v2 §3)."""

    body: tuple[AStmt, ...]
    span: Span = _span()


ADecl: TypeAlias = (
    TeamDecl | QueuesDecl | SettingDecl | WindowDecl | BufferDecl | CounterDecl | KernelDecl
    | EnsureDecl | RequireDecl
)


@_node
class ProtocolDecl:
    name: Name
    params: tuple[ParamDecl, ...]
    doc: String | None
    decls: tuple[ADecl, ...]
    span: Span = _span()
