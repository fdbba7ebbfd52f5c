"""Helpers shared by the structural, capability and performance checks.

Not a pass.  `Findings` merges one finding reported by several ranks into one
diagnostic with a rank note (as instantiation does); `keyword_span` narrows an op's
span to one `name=value` argument; `ProgramOrder` answers "is op a ordered before
op b on this rank" from `OpInst.preds`; the rest formats values for messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ccogen.diag import Diagnostic
from ccogen.diag.merge import FindingSet, ranks_note
from ccogen.ir.instance import Issuer, IssuerLevel, OpInst, RegionInst
from ccogen.ir.nodes import Expr
from ccogen.passes.base import PassContext
from ccogen.source import Span
from ccogen.targets import DEFAULT_COST_TARGET, get_target
from ccogen.targets.base import Capabilities

# ----------------------------------------------------------------------------- targets


def target_caps(ctx: PassContext) -> Capabilities | None:
    """The chosen target's capabilities, or None without `--target`."""
    return None if ctx.target is None else get_target(ctx.target).capabilities


def cost_caps(ctx: PassContext) -> Capabilities:
    """The capabilities performance warnings read: the target's, else MORI SDMA's.

    Without a target the warnings rest on the MORI SDMA figures that
    docs/reference/rules.md grounds them in; with one, each warning reads that target's
    figures and stays silent where the target lacks the mechanism or the figure.
    """
    return get_target(ctx.target or DEFAULT_COST_TARGET).capabilities


# ----------------------------------------------------------------------------- findings


class Findings:
    """Collects a pass's diagnostics; identical ones (code, span, message) merge.

    `flush` emits them into the context's sink, each with a note naming the ranks
    that produced it (`on rank 1`, `on ranks 0, 2`, `on every rank`).
    """

    def __init__(self, ctx: PassContext) -> None:
        self._ctx = ctx
        self._items: FindingSet[int] = FindingSet(_key)
        self._seen: set[tuple[str, Span | None, str]] = set()

    def add(self, diagnostic: Diagnostic, rank: int | None = None) -> None:
        self._items.add(diagnostic, rank)
        self._seen.add(_key(diagnostic))

    def seen(self, code: str, span: Span | None, message: str) -> bool:
        return (code, span, message) in self._seen

    def flush(self) -> None:
        for item in self._items:
            notes = item.diagnostic.notes
            if item.places:
                notes = (*notes, ranks_note(sorted(item.places), self._ctx.instance.nranks))
            self._ctx.sink.emit(replace(item.diagnostic, notes=notes))
        self._items.clear()
        self._seen.clear()


def _key(d: Diagnostic) -> tuple[str, Span | None, str]:
    return (d.code, d.span, d.message)


# ----------------------------------------------------------------------------- spans

_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^,()\s]+)"""


def keyword_span(span: Span | None, name: str) -> Span | None:
    """The `name=value` argument inside an op's span (the op's span if not found).

    Values that are literals (`"same_queue"`, `True`, `landed`) are matched whole;
    the span is the smallest one to point at for an argument the IR keeps no span for.
    """
    if span is None:
        return None
    text = span.file.text[span.start:span.end]
    m = re.search(rf"\b{re.escape(name)}\s*=\s*{_VALUE}", text)
    if m is None:
        return span
    return Span(span.file, span.start + m.start(), span.start + m.end())


def expr_span(expr: Expr | None, fallback: Span | None) -> Span | None:
    return expr.span if expr is not None and expr.span is not None else fallback


def first_spans(ops: Iterable[OpInst], limit: int = 3) -> list[Span]:
    """Distinct spans of `ops` in source order, at most `limit`."""
    spans = sorted({op.span for op in ops if op.span is not None},
                   key=lambda s: (s.path, s.start))
    return spans[:limit]


# ----------------------------------------------------------------------------- order


class ProgramOrder:
    """Happens-before by program order on one rank, from `OpInst.preds`.

    `preds` point to earlier indices only, so `reaches(a, b)` walks back from b and
    prunes below a: the cost is bounded by the ops between the two.
    """

    def __init__(self, ops: Sequence[OpInst]) -> None:
        self._ops = ops

    def reaches(self, a: int, b: int) -> bool:
        """True when op `a` is issued before op `b` in every execution (a == b too)."""
        if a >= b:
            return a == b
        seen: set[int] = set()
        stack = [b]
        while stack:
            for p in self._ops[stack.pop()].preds:
                if p == a:
                    return True
                if p > a and p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False

    def concurrent(self, a: int, b: int) -> bool:
        lo, hi = min(a, b), max(a, b)
        return lo != hi and not self.reaches(lo, hi)


# ----------------------------------------------------------------------------- text


def fmt_bytes(n: int) -> str:
    """`4 KiB`, `8 MiB`, `1000 B`: an exact binary unit where there is one."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def region_text(region: RegionInst) -> str:
    return f"{region.window}[{region.start}:{region.stop}]"


def issuer_kind(issuer: Issuer) -> str:
    """`a lane`, `a warp`, `the block`: who issues, for messages."""
    level = issuer.level
    if level is IssuerLevel.LANE:
        return "a lane"
    if level is IssuerLevel.WARP:
        return "a warp"
    return "a block"


def number_list(values: Iterable[int]) -> str:
    """`2`, `2 and 3`, `2, 3 and 5`, `0 to 7` for runs of four or more."""
    vals = sorted(set(values))
    if len(vals) >= 4 and vals[-1] - vals[0] == len(vals) - 1:
        return f"{vals[0]} to {vals[-1]}"
    text = [str(v) for v in vals]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " and " + text[-1]


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


__all__ = [
    "Findings",
    "ProgramOrder",
    "cost_caps",
    "expr_span",
    "first_spans",
    "fmt_bytes",
    "issuer_kind",
    "keyword_span",
    "number_list",
    "plural",
    "ranks_note",
    "region_text",
    "target_caps",
]
