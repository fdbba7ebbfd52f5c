"""The protocol IR: frozen, slotted, keyword-only dataclasses.

The IR is a resolved model of a protocol as written (loops and `me` still
symbolic); `ccogen.ir.instance` holds the unrolled form.  Every user-authored node
carries a `span` that is excluded from equality and repr, so two protocols are
equal when they mean the same thing, whether they came from text or the builder.

Names are resolved: an expression names a loop variable or an assigned name
(`Var`), a parameter (`ParamRef`) or a built-in (`Me`, `NRanks`); windows, buffers
and counters are named by string in `Region` and in `count=`/`wait_count`.

Language v2 (typed data, reductions, credits): `DType` element types on `Window`
and `Buffer` (a dtype or a dtype parameter, `DTypeSpec`), `Reduce` and `Signal`
ops, `Assign` statements, `ListComp` for `[x@p for p in ranks()]`, and
`Reduction` (`sum(...)`, `max(...)`, `min(...)`) on the right of an `ensure` check.

Run-time values (language v2 §3, §4): `Load` (`load(x[i])`), `GenExpr`
(`sum(... for p in peers())` in expressions), `Require` statements in
`Protocol.require`, and single-element regions (`got[p]`) in `ensure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias, TypeVar, dataclass_transform

from ccogen.ir.dtype import DType
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
    DTYPE = "dtype"  # an element type: its default is a `DType`, not an `Expr`


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


class ReduceOp(str, Enum):
    """The combining operation of `reduce` and of `sum`/`max`/`min` in `ensure`."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


class IssuerKind(str, Enum):
    LANES = "lanes"
    WARPS = "warps"
    BLOCKS = "blocks"


# ----------------------------------------------------------------------------- expressions


@_node
class Const:
    """An integer, boolean or float literal (sizes like `4 KiB` are folded to bytes).

    Floats appear only as `reduce` weights.  `text` is the literal as written
    (`0x1000`, `1_024`) when it came from text, so that `ccogen fmt` keeps it; it
    takes no part in equality.
    """

    value: int | bool | float
    span: Span | None = _span()
    text: str | None = field(default=None, compare=False, repr=False)


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
class Launch:
    """`launch`: the index of the current launch (0, 1, 2, ...), counted on the device.
    Only usable as `launch % K` with `K` a positive static integer (language reference
    section 8): it rotates landing slots, it never decides control flow."""

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


@_node
class Load:
    """A run-time value: element `index` of window or buffer `window` (on rank
    `rank`, `me` when None), read on the device.

    Text: `load(x[i])` / `load(x@p[i])` in kernels (the contents when the issuer
    reads them); `x[i]` in `require` (the initial contents: `init` is True) and in
    `ensure` (the final contents, or the initial ones written `init(x@p)[i]`).
    """

    window: str
    index: Expr
    rank: Expr | None = None
    init: bool = False
    span: Span | None = _span()


@_node
class GenExpr:
    """`sum(elt for var in iter if cond)` (also `min`, `max`) in an expression:
    static or run-time, as its elements are."""

    func: str
    elt: Expr
    var: str
    iter: Expr
    cond: Expr | None = None
    span: Span | None = _span()


Expr: TypeAlias = (Const | Var | ParamRef | Me | NRanks | Launch | BinOp | UnaryOp | Compare
                   | BoolOp | IfExp | Call | ListExpr | Load | GenExpr)

BUILTIN_FUNCS: tuple[str, ...] = ("peers", "ranks", "range", "len", "min", "max", "abs")


@_node
class Region:
    """Elements `[start, stop)` of a window or buffer; `None` bounds mean its ends.

    Bounds count elements of the window's dtype (bytes for an untyped window).
    `rank` (`w@p`) appears in `ensure` and in the `srcs` of `reduce` (a peer's
    region read over the link); `init` (`init(w)`) only in `ensure`.
    """

    window: str
    start: Expr | None = None
    stop: Expr | None = None
    rank: Expr | None = None
    init: bool = False
    single: bool = False  # `x[i]` in `ensure`: the one element `start` (`stop` is None)
    span: Span | None = _span()


@_node
class ListComp:
    """`[elt for var in iter]` or `[elt for var in iter if cond]`: a list of regions
    (`srcs=`, `ensure` terms) or of numbers (`weights=`), unrolled at instantiation."""

    elt: Region | Expr
    var: str
    iter: Expr
    cond: Expr | None = None
    span: Span | None = _span()


RegionList: TypeAlias = tuple[Region, ...] | ListComp
"""Sources of a `reduce`, terms of a `Reduction`: a list literal or a comprehension."""

WeightList: TypeAlias = tuple[Expr, ...] | ListComp
"""`weights=`: numbers (integer expressions or float literals), one per source."""


@_node
class Reduction:
    """`sum(terms)`, `max(terms)` or `min(terms)` on the right of an `ensure` check.

    Text: `sum(init(x@p) for p in ranks())`, `sum([a, b], weights=[1, 2])`.
    """

    op: ReduceOp
    terms: tuple[Region, ...] | ListComp
    weights: tuple[Expr, ...] | ListComp | None = None
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
class Reduce:
    """`reduce(dst=, srcs=[...], op="sum", weights=[...])`: `dst` := the element-wise
    combination of `srcs` in list order, by the issuer's threads (loads, arithmetic,
    stores; f32 accumulation for f16/bf16, rounded once).  A source `x@p[a:b]` is
    rank p's region read over the link; `dst` may be among `srcs`."""

    dst: Region
    srcs: tuple[Region, ...] | ListComp
    op: ReduceOp = ReduceOp.SUM
    weights: tuple[Expr, ...] | ListComp | None = None
    span: Span | None = _span()


@_node
class Signal:
    """`signal(peer, queue=Q)`: add one to the peer's slot `[me, Q]` after every earlier
    op of this issuer on `(peer, Q)` has delivered; no data (a credit)."""

    peer: Expr
    queue: Expr | None = None  # None: queue=auto
    span: Span | None = _span()


@_node
class Barrier:
    span: Span | None = _span()


@_node
class Fence:
    span: Span | None = _span()


Op: TypeAlias = (
    Put | Get | Copy | Commit | Quiet | WaitSignal | WaitCount | ResetCount | Barrier | Fence
    | Reduce | Signal
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
    Reduce: OpKind.REDUCE,
    Signal: OpKind.SIGNAL,
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
class Assign:
    """`name = EXPR`: binds `name` for the rest of its block (kernels and `ensure`).

    The value is static (evaluated at instantiation, per rank and iteration)."""

    var: str
    value: Expr
    span: Span | None = _span()


@_node
class Check:
    """A postcondition `left == right` (or `!=`) inside `ensure`: the right side is a
    region or a `Reduction` (`sum(...)`, `max(...)`, `min(...)` of regions)."""

    op: str
    left: Region
    right: Region | Reduction
    span: Span | None = _span()


@_node
class Require:
    """A precondition inside `require:`: a condition over the initial contents of
    buffers and windows (`0 <= counts[p] <= cap`) that the caller guarantees; it
    bounds the run-time values the kernels read."""

    cond: Expr
    span: Span | None = _span()


Stmt: TypeAlias = For | If | IssuerBlock | Check | Assign | Require | Op

# ----------------------------------------------------------------------------- declarations


@_node
class Param:
    """`name: TYPE = DEFAULT`; a `dtype` parameter's default is a `DType`."""

    name: str
    type: ParamType
    default: Expr | DType
    span: Span | None = _span()


DTypeSpec: TypeAlias = DType | ParamRef
"""The element type of a window or buffer: a dtype, or a `dtype` parameter."""


@_node
class Team:
    kind: TeamKind = TeamKind.LSA
    size: Expr | None = None  # None: any size the checker instantiates
    span: Span | None = _span()


@_node
class Window:
    """`window NAME: SIZE` (bytes, `dtype` u8) or `window NAME: DTYPE[COUNT]`.

    `size` counts elements of `dtype`.  An untyped window and a `u8[...]` one are
    the same window (the printer writes the untyped form)."""

    name: str
    size: Expr
    align: Expr | None = None
    dtype: DType | ParamRef = DType.U8
    span: Span | None = _span()


@_node
class Buffer:
    """`buffer NAME: DTYPE[COUNT]`: a local, non-symmetric buffer handed in at each
    launch (the caller's tensor).  Never the remote side of a transfer."""

    name: str
    dtype: DType | ParamRef
    size: Expr  # elements of `dtype`
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
    buffers: tuple[Buffer, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    ensure: tuple[Stmt, ...] = ()
    require: tuple[Stmt, ...] = ()
    span: Span | None = _span()
    queues_span: Span | None = _span()
    between_launches: LaunchOrder = LaunchOrder.BACK_TO_BACK
    between_launches_span: Span | None = _span()

    def window(self, name: str) -> Window | None:
        return next((w for w in self.windows if w.name == name), None)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def buffer(self, name: str) -> Buffer | None:
        return next((b for b in self.buffers if b.name == name), None)
