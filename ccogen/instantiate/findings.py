"""Diagnostics of one instantiation, merged across ranks and iterations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.diag.merge import FindingSet, ranks_note, shape_key
from ccogen.ir.evaluate import Env, EvalError
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits
from ccogen.source import Span

SIMILAR_SHOWN = 3  # different messages of one code shown at one place, then a count


class Findings:
    """Collects diagnostics, merging those of one mistake from several ranks or iterations
    (`FindingSet` by `shape_key`: the same code, place and message but for its numbers;
    the first is kept, with a count of the others); at one place at most
    `SIMILAR_SHOWN` different messages of one code.  Also carries the instantiation's
    `limits`."""

    def __init__(self, nranks: int, label: str = "", limits: Limits = DEFAULT_LIMITS) -> None:
        self.nranks = nranks
        self.label = label or f"nranks={nranks}"
        self.limits = limits
        self._set: FindingSet[int] = FindingSet(shape_key)
        self._variants: dict[int, set[str]] = {}  # id of the kept -> the messages merged
        self._sites: dict[tuple[str, Span], list[Diagnostic]] = {}
        self._hidden: dict[int, set[str]] = {}  # id of the last shown -> messages hidden

    def add(self, d: Diagnostic, rank: int | None = None) -> None:
        if self._set.get(d) is None and d.span is not None:
            shown = self._sites.setdefault((d.code, d.span), [])
            if len(shown) >= SIMILAR_SHOWN:
                self._hidden.setdefault(id(shown[-1]), set()).add(d.message)
                return
            shown.append(d)
        entry = self._set.add(d, rank)
        self._variants.setdefault(id(entry.diagnostic), {entry.diagnostic.message}).add(d.message)

    def diagnostics(self) -> list[Diagnostic]:
        out = []
        for entry in self._set:
            d = entry.diagnostic
            notes = list(d.notes)
            if entry.places:
                notes.append(ranks_note(sorted(entry.places), self.nranks))
            if (others := len(self._variants.get(id(d), ())) - 1) > 0:
                notes.append(f"{others} more finding{'s' if others > 1 else ''} here "
                             f"differ{'' if others > 1 else 's'} only in the numbers (other "
                             "ranks or iterations)")
            if hidden := self._hidden.get(id(d)):
                n = len(hidden)
                notes.append(f"{n} more finding{'s' if n > 1 else ''} of this kind here, not shown")
            notes.append(f"in the instance {self.label}")
            out.append(replace(d, notes=tuple(notes)))
        return out


def label(nranks: int, params: Mapping[str, Any]) -> str:
    return ", ".join([f"nranks={nranks}"] + [f"{k}={v}" for k, v in params.items()])


def from_eval(exc: EvalError, env: Env, fallback: Span | None) -> Diagnostic:
    return error(exc.code, exc.message, exc.span or fallback, exc.label,
                 notes=(env.bindings(),), help=exc.help)
