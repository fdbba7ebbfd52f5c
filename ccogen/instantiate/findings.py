"""Diagnostics of one instantiation, merged across ranks and iterations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.ir.evaluate import Env, EvalError
from ccogen.source import Span

SIMILAR_SHOWN = 3  # different messages of one code shown at one place, then a count


@dataclass
class _Item:
    diagnostic: Diagnostic
    ranks: list[int] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)


class Findings:
    """Collects diagnostics, merging identical ones from several ranks or iterations."""

    def __init__(self, nranks: int, label: str = "") -> None:
        self.nranks = nranks
        self.label = label or f"nranks={nranks}"
        self._items: dict[tuple[str, Span | None, str], _Item] = {}
        self._sites: dict[tuple[str, Span], list[_Item]] = {}

    def add(self, d: Diagnostic, rank: int | None = None) -> None:
        key = (d.code, d.span, d.message)
        item = self._items.get(key)
        if item is None:
            item = self._new_item(d)
            if item is None:
                return
        if rank is not None and rank not in item.ranks:
            item.ranks.append(rank)

    def _new_item(self, d: Diagnostic) -> _Item | None:
        shown = self._sites.setdefault((d.code, d.span), []) if d.span is not None else []
        if len(shown) >= SIMILAR_SHOWN:
            shown[-1].hidden.add(d.message)
            return None
        item = self._items[(d.code, d.span, d.message)] = _Item(d)
        shown.append(item)
        return item

    def diagnostics(self) -> list[Diagnostic]:
        return [self._render(item) for item in self._items.values()]

    def _render(self, item: _Item) -> Diagnostic:
        notes = list(item.diagnostic.notes)
        if item.ranks:
            notes.append(self._ranks_note(sorted(item.ranks)))
        if item.hidden:
            n = len(item.hidden)
            notes.append(f"{n} more finding{'s' if n > 1 else ''} of this kind here, not shown")
        notes.append(f"in the instance {self.label}")
        return replace(item.diagnostic, notes=tuple(notes))

    def _ranks_note(self, ranks: list[int]) -> str:
        if len(ranks) == self.nranks > 1:
            return "on every rank"
        if len(ranks) == 1:
            return f"on rank {ranks[0]}"
        return "on ranks " + ", ".join(map(str, ranks))


def label(nranks: int, params: Mapping[str, Any]) -> str:
    return ", ".join([f"nranks={nranks}"] + [f"{k}={v}" for k, v in params.items()])


def from_eval(exc: EvalError, env: Env, fallback: Span | None) -> Diagnostic:
    return error(exc.code, exc.message, exc.span or fallback, exc.label,
                 notes=(env.bindings(),), help=exc.help)
