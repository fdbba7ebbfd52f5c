"""The protocol IR: frozen, slotted, keyword-only dataclasses.

The IR is a resolved model of a protocol as written (loops and `me` still
symbolic); `ccogen.ir.instance` holds the unrolled form.  Every user-authored node
carries a `span` that is excluded from equality and repr, so two protocols are
equal when they mean the same thing, whether they came from text or the builder.

Names are resolved: an expression names a loop variable (`Var`), a parameter
(`ParamRef`) or a built-in (`Me`, `NRanks`); windows and counters are named by
string in `Region` and in `count=`/`wait_count`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias, TypeVar, dataclass_transform

from ccogen.ir.opkind import OpKind
from ccogen.source import Span

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def _node(cls: type[_T]) -> type[_T]:
    """Frozen, slotted, keyword-only dataclass (spans excluded from equality)."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


class TeamKind(str, Enum):
    LSA = "lsa"
    WORLD = "world"


class LaunchOrder(str, Enum):
    """What a protocol assumes between two of its launches (`between_launches:`)."""

    BACK_TO_BACK = "back_to_back"  # nothing: a rank may start launch N+1 while peers run N
    HOST_SYNC = "host_sync"  # a host barrier of every rank between launches


class ParamType(str, Enum):
    BYTES = "bytes"
    INT = "int"


class SignalKind(str, Enum):
    NONE = "none"
    LOCAL = "local"
    REMOTE = "remote"
    BOTH = "both"

    @property
    def remote(self) -> bool:
        return self in (SignalKind.REMOTE, SignalKind.BOTH)

    @property
    def local(self) -> bool:
        return self in (SignalKind.LOCAL, SignalKind.BOTH)


class Mode(str, Enum):
    AUTO = "auto"
    SAME_QUEUE = "same_queue"
    INDEPENDENT = "independent"


class IssuerKind(str, Enum):
    LANES = "lanes"
    WARPS = "warps"
    BLOCKS = "blocks"


# ----------------------------------------------------------------------------- expressions


@_node
class Const:
    """An integer or boolean literal (sizes like `4 KiB` are folded to bytes)."""

    value: int | bool
    span: Span | None = _span()


@_node
class Var:
    """A loop variable bound by `for`, `lanes`, `warps` or `blocks`."""

    name: str
    span: Span | None = _span()


@_node
class ParamRef:
    name: str
    span: Span | None = _span()


@_node
class Me:
    span: Span | None = _span()


@_node
class NRanks:
    span: Span | None = _span()


@_node
class BinOp:
    """`+ - * // % **` with Python semantics (floor division and modulo)."""

    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()


@_node
class UnaryOp:
    """`-`, `+` or `not`."""

    op: str
    operand: Expr
    span: Span | None = _span()


@_node
class Compare:
    """A chained comparison `a < b <= c`: ops[i] compares operands[i] and operands[i+1]."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]
    span: Span | None = _span()


@_node
class BoolOp:
    """`and` / `or` with Python's short-circuit value semantics."""

    op: str
    values: tuple[Expr, ...]
    span: Span | None = _span()


@_node
class IfExp:
    cond: Expr
    then: Expr
    orelse: Expr
    span: Span | None = _span()


@_node
class Call:
    """A built-in: `peers() ranks() range(...) len(x) min(...) max(...) abs(x)`."""

    func: str
    args: tuple[Expr, ...]
    span: Span | None = _span()


@_node
class ListExpr:
    """A list literal `[a, b, c]` (iterable in `for`/issuer blocks)."""

    items: tuple[Expr, ...]
    span: Span | None = _span()


Expr: TypeAlias = Const | Var | ParamRef | Me | NRanks | BinOp | UnaryOp | Compare | BoolOp | IfExp | Call | ListExpr

BUILTIN_FUNCS: tuple[str, ...] = ("peers", "ranks", "range", "len", "min", "max", "abs")


@_node
class Region:
    """Bytes `[start, stop)` of a window; `None` bounds mean the window's ends.

    `rank` (`w@p`) and `init` (`init(w)`) appear only in `ensure`.
    """

    window: str
    start: Expr | None = None
    stop: Expr | None = None
    rank: Expr | None = None
    init: bool = False
    span: Span | None = _span()


# ----------------------------------------------------------------------------- operations


@_node
class Put:
    peer: Expr
    dst: Region
    src: Region
    queue: Expr | None = None  # None: queue=auto
    signal: SignalKind = SignalKind.NONE
    aggregate: bool = False
    signal_per_copy: bool = False
    mode: Mode = Mode.AUTO
    count: str | None = None
    span: Span | None = _span()


@_node
class Get:
    peer: Expr
    dst: Region
    src: Region
    queue: Expr | None = None
    signal: SignalKind = SignalKind.NONE
    aggregate: bool = False
    mode: Mode = Mode.AUTO
    span: Span | None = _span()


@_node
class Copy:
    dst: Region
    src: Region
    span: Span | None = _span()


@_node
class Commit:
    peer: Expr
    queue: Expr | None = None
    span: Span | None = _span()


@_node
class Quiet:
    """`quiet()` (every peer), `quiet(p)` (every queue to p) or `quiet(p, queue=q)`."""

    peer: Expr | None = None
    queue: Expr | None = None
    span: Span | None = _span()


@_node
class WaitSignal:
    src: Expr
    queue: Expr | None = None
    expected: Expr | None = None  # None: computed by the compiler
    span: Span | None = _span()


@_node
class WaitCount:
    counter: str
    expected: Expr | None = None
    span: Span | None = _span()


@_node
class ResetCount:
    """`reset_count(C)`: set this rank's counter `C` to zero (NVSHMEM
    `nvshmemx_signal_counted_reset`); it does not synchronise with producers."""

    counter: str
    span: Span | None = _span()


@_node
class Barrier:
    span: Span | None = _span()


@_node
class Fence:
    span: Span | None = _span()


Op: TypeAlias = (
    Put | Get | Copy | Commit | Quiet | WaitSignal | WaitCount | ResetCount | Barrier | Fence
)

OP_KINDS: dict[type, OpKind] = {
    Put: OpKind.PUT,
    Get: OpKind.GET,
    Copy: OpKind.COPY,
    Commit: OpKind.COMMIT,
    Quiet: OpKind.QUIET,
    WaitSignal: OpKind.WAIT_SIGNAL,
    WaitCount: OpKind.WAIT_COUNT,
    ResetCount: OpKind.RESET_COUNT,
    Barrier: OpKind.BARRIER,
    Fence: OpKind.FENCE,
}
"""The kind of each op node class (`ccogen.ir.signatures.OP_CLASSES` is the inverse)."""

# ----------------------------------------------------------------------------- statements


@_node
class For:
    var: str
    iter: Expr
    body: tuple[Stmt, ...]
    span: Span | None = _span()


@_node
class If:
    """`if`/`elif`/`else`; an `elif` is an `If` alone in `orelse`.

    `pass` lowers to nothing: an empty body is an empty tuple.
    """

    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    span: Span | None = _span()


@_node
class IssuerBlock:
    """`lanes x in E:`, `warps w in E:` or `blocks b in E:`."""

    kind: IssuerKind
    var: str
    iter: Expr
    body: tuple[Stmt, ...]
    span: Span | None = _span()


@_node
class Check:
    """A postcondition `left == right` (or `!=`) on regions, inside `ensure`."""

    op: str
    left: Region
    right: Region
    span: Span | None = _span()


Stmt: TypeAlias = For | If | IssuerBlock | Check | Op

# ----------------------------------------------------------------------------- declarations


@_node
class Param:
    name: str
    type: ParamType
    default: Expr
    span: Span | None = _span()


@_node
class Team:
    kind: TeamKind = TeamKind.LSA
    size: Expr | None = None  # None: any size the checker instantiates
    span: Span | None = _span()


@_node
class Window:
    name: str
    size: Expr
    align: Expr | None = None
    span: Span | None = _span()


@_node
class Counter:
    name: str
    span: Span | None = _span()


@_node
class Kernel:
    name: str
    threads: Expr
    blocks: Expr | None
    body: tuple[Stmt, ...]
    span: Span | None = _span()


@_node
class Protocol:
    """A whole protocol.  `queues` is `None` for `queues auto`; `between_launches` is
    what it assumes between two launches (language reference section 4)."""

    name: str
    params: tuple[Param, ...] = ()
    doc: str | None = None
    team: Team = field(default_factory=Team)
    queues: Expr | None = field(default_factory=lambda: Const(value=1))
    windows: tuple[Window, ...] = ()
    counters: tuple[Counter, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    ensure: tuple[Stmt, ...] = ()
    span: Span | None = _span()
    queues_span: Span | None = _span()
    between_launches: LaunchOrder = LaunchOrder.BACK_TO_BACK
    between_launches_span: Span | None = _span()

    def window(self, name: str) -> Window | None:
        return next((w for w in self.windows if w.name == name), None)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)
