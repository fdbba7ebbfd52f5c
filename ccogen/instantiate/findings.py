"""Diagnostics of one instantiation, merged across ranks and iterations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ccogen.diag import Diagnostic, error
from ccogen.diag.merge import STOPPED_NOTE, FindingSet, ranks_note, shape_key
from ccogen.ir.evaluate import Env, EvalError
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits
from ccogen.source import Span

SIMILAR_SHOWN = 3  # different messages of one code shown at one place, then a count


class FindingsFull(Exception):
    """The findings limit was reached while instantiating (`Findings(stop=True)`): the
    instantiation stops; `instantiate` returns what was found."""


class Findings:
    """Collects diagnostics, merging those of one mistake from several ranks or iterations
    (`FindingSet` by `shape_key`: the same code, place and message but for its numbers;
    the first is kept, with a count of the others); at one place at most
    `SIMILAR_SHOWN` different messages of one code.  Also carries the instantiation's
    `limits`.

    With `stop`, the `findings` limit holds while the findings are made, not after: the
    add of one more distinct error of a rule that already has `limits.findings` raises
    `FindingsFull` (a repeat on another rank or iteration is a merge, not a new finding),
    so a loop of 10**6 iterations with a finding each stops after the limit's worth
    (clang's `-ferror-limit`); the last finding of that rule says so."""

    def __init__(self, nranks: int, label: str = "", limits: Limits = DEFAULT_LIMITS, *,
                 stop: bool = False, record: bool = False) -> None:
        self.nranks = nranks
        # `record`: every add, in order, to replay into other findings (`replay`)
        self.log: list[tuple[Diagnostic, int | None]] | None = [] if record else None
        self.label = label or f"nranks={nranks}"
        self.limits = limits
        self.stop = stop
        self.stopped: str | None = None  # the rule whose limit stopped the instantiation
        self._set: FindingSet[int] = FindingSet(shape_key)
        self._variants: dict[int, set[str]] = {}  # id of the kept -> the messages merged
        self._sites: dict[tuple[str, Span], list[Diagnostic]] = {}
        self._hidden: dict[int, set[str]] = {}  # id of the last shown -> messages hidden
        self._made: dict[str, int] = {}  # distinct findings per rule, hidden ones too
        self._last: dict[str, Diagnostic] = {}  # the last shown finding of each rule

    def replay(self, into: Findings) -> None:
        """Add what this (recording) instance was given to `into`, in the same order."""
        assert self.log is not None
        for d, rank in self.log:
            into.add(d, rank)

    def add(self, d: Diagnostic, rank: int | None = None) -> None:
        if self.log is not None:
            self.log.append((d, rank))
        kept = self._set.get(d)
        if kept is None:
            if d.span is not None:
                shown = self._sites.setdefault((d.code, d.span), [])
                if len(shown) >= SIMILAR_SHOWN:
                    hidden = self._hidden.setdefault(id(shown[-1]), set())
                    if d.message not in hidden:
                        self._count(d)
                        hidden.add(d.message)
                    return
                self._count(d)
                shown.append(d)
            else:
                self._count(d)
            self._last[d.code] = d
        elif d.message not in self._variants.get(id(kept.diagnostic), ()):
            # a variant merged into a shown finding still counts towards the limit: a
            # loop of 10**6 iterations, each with its own numbers, stops at the limit
            self._last[d.code] = kept.diagnostic
            self._count(d)
        entry = self._set.add(d, rank)
        self._variants.setdefault(id(entry.diagnostic), {entry.diagnostic.message}).add(d.message)

    def _count(self, d: Diagnostic) -> None:
        made = self._made[d.code] = self._made.get(d.code, 0) + 1
        if self.stop and d.is_error and made > self.limits.findings:
            self._made[d.code] -= 1
            self.stopped = d.code
            raise FindingsFull(d.code)

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
            if self.stopped is not None and self._last.get(self.stopped) is d:
                limit = self.limits.findings
                notes.append(f"{STOPPED_NOTE}{limit:,} {d.code} finding{'s' if limit > 1 else ''}"
                             " in this instance: the rest was not evaluated (`--limit "
                             "findings=N` looks further)")
            notes.append(f"in the instance {self.label}")
            out.append(replace(d, notes=tuple(notes)))
        return out


def label(nranks: int, params: Mapping[str, Any]) -> str:
    return ", ".join([f"nranks={nranks}"] + [f"{k}={v}" for k, v in params.items()])


def from_eval(exc: EvalError, env: Env, fallback: Span | None) -> Diagnostic:
    return error(exc.code, exc.message, exc.span or fallback, exc.label,
                 notes=(env.bindings(),), help=exc.help)
