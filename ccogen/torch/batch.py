"""Run-time batch sizes: which buffer of a protocol is a per-call count, and which
buffers are batched in rows by it (no torch here).

A protocol declares a count as a one-element `i32` buffer that its `require` bounds by an
integer parameter, the capacity: `0 <= ntok[0] <= tokens` (or `ntok[0] <= tokens`, or
`tokens >= ntok[0]`), and its kernels read it on the device (`n = load(ntok[0])`).  A
buffer whose declared size is a product that *starts* with that parameter
(`x: T[tokens * hidden]`, `topk_rank: i32[tokens * k]`, `w: f32[tokens]`) is row-batched:
its leading dimension is the token, so a call may pass its first `n` rows (`x[:n]`).  A
size where the parameter comes later (`T[nranks * tokens * hidden]`) is not: its leading
dimension is something else.  Windows are never row-batched (they are the heap's, whole).

Two steps, one per source of facts:

- `batch_shape(ir)` reads the declaration and the `require` (names only); the loader runs
  it when it generates the instance and keeps the result in its cache entry;
- `BatchShape.resolve(manifest)` gives the numbers of one instance (the capacity, the
  elements of a row of each batched buffer), read from the manifest at load.

A count the kernels write (manifest access other than `read`) is not a count: the binding
passes a count it owns, read-only.  A protocol with more than one count is not batched
(each count stays an ordinary buffer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ccogen.errors import ManifestError
from ccogen.ir.dtype import DType
from ccogen.ir.nodes import (
    BinOp,
    Compare,
    Const,
    Load,
    ParamRef,
    ParamType,
    Protocol,
    Require,
    Stmt,
)
from ccogen.manifest import ELEMENT_SIZES, Manifest


@dataclass(frozen=True)
class BatchShape:
    """A protocol's count buffer, the parameter that bounds it and its row-batched buffers
    (names only: the same for every instance)."""

    count: str
    param: str
    rows: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "param": self.param, "rows": list(self.rows)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchShape:
        return cls(str(data["count"]), str(data["param"]), tuple(str(r) for r in data["rows"]))

    def resolve(self, manifest: Manifest) -> Batch | None:
        """The numbers of this instance; None when the manifest's count is not a read-only
        one-element i32 buffer (then the binding treats it as an ordinary buffer)."""
        buffers = {b.name: b for b in manifest.buffers}
        count = buffers.get(self.count)
        if count is None or count.dtype != "i32" or count.size != 4 or count.access != "read":
            return None
        cap = dict(manifest.params).get(self.param)
        if cap is None:
            raise ManifestError(f"{manifest.protocol}: the capacity `{self.param}` of the "
                                f"count `{self.count}` is not among the manifest's params")
        rows = []
        for name in self.rows:
            b = buffers[name]
            elements = b.size // ELEMENT_SIZES[b.dtype]
            if cap <= 0 or elements % cap:
                raise ManifestError(f"{manifest.protocol}: buffer `{name}` has {elements} "
                                    f"elements, not a multiple of {self.param}={cap}")
            rows.append(RowBuffer(name, elements // cap))
        return Batch(self.count, self.param, cap, tuple(rows))


@dataclass(frozen=True)
class RowBuffer:
    name: str
    row: int  # elements of one row (the buffer holds `cap` of them)


@dataclass(frozen=True)
class Batch:
    """One instance's count: the buffer `count`, at most `cap` (= parameter `param`), and the
    buffers batched in rows of `row` elements by it."""

    count: str
    param: str
    cap: int
    rows: tuple[RowBuffer, ...]


def batch_shape(ir: Protocol) -> BatchShape | None:
    """The count of `ir` and its row-batched buffers (module docstring); None when the
    protocol has no count (or several)."""
    bounded = _bounded_counts(ir)
    if len(bounded) != 1:
        return None
    (count, param), = bounded.items()
    rows = tuple(b.name for b in ir.buffers
                 if b.name != count and _leading_factor(b.size) == ParamRef(name=param))
    return BatchShape(count, param, rows)


def _bounded_counts(ir: Protocol) -> dict[str, str]:
    """{buffer: parameter} for each one-element i32 buffer whose element 0 the `require`
    bounds above by an integer parameter."""
    candidates = {b.name for b in ir.buffers
                  if b.dtype == DType.I32 and b.size == Const(value=1)}
    ints = {p.name for p in ir.params if p.type != ParamType.DTYPE}
    found: dict[str, str] = {}
    for cond in _conditions(ir.require):
        if not isinstance(cond, Compare):
            continue
        for left, op, right in zip(cond.operands, cond.ops, cond.operands[1:], strict=False):
            if op == ">=":
                left, right, op = right, left, "<="
            if (op == "<=" and isinstance(left, Load) and left.window in candidates
                    and left.rank is None and left.index == Const(value=0)
                    and isinstance(right, ParamRef) and right.name in ints):
                found.setdefault(left.window, right.name)
    return found


def _conditions(stmts: tuple[Stmt, ...]) -> list[Any]:
    """The conditions of the `require` lines outside loops and branches (a count's bound
    holds for the whole call)."""
    return [s.cond for s in stmts if isinstance(s, Require)]


def _leading_factor(size: Any) -> Any:
    """The first factor of a product (`tokens` of `tokens * hidden * 2`); the expression
    itself when it is not a product."""
    while isinstance(size, BinOp) and size.op == "*":
        size = size.left
    return size


__all__ = ["Batch", "BatchShape", "RowBuffer", "batch_shape"]
