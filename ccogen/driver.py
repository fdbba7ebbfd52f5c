"""The checking pipeline that `ccogen lint`, `ccogen.check()` and code generation share.

text -> AST -> IR (E001/E002) -> one instance per team size (E002–E005, E010) ->
the checks of `ccogen.passes.PIPELINE` on every instance.  A finding that appears on
several instances is reported once, with a note naming the instances: one mistake is
one finding even where its numbers differ per instance (`diag.merge.shape_key`: a
region out of bounds names other bytes at every team size), and the ranks it was
found on are said per instance where they differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ccogen.diag import Diagnostic, sort_key
from ccogen.diag.merge import STOPPED_NOTE, FindingSet, capped, is_ranks_note, shape_key
from ccogen.errors import DiagnosticError
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import Protocol
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits


def _sample_default() -> bool:
    """Loops uniform in their variable are checked on three iterations unless the
    internal switch `CCOGEN_EXACT_LOOPS=1` asks for every iteration (the oracle of the
    differential test, docs/checker.md)."""
    return os.environ.get("CCOGEN_EXACT_LOOPS", "") != "1"


@dataclass(frozen=True)
class CheckOptions:
    """What to check: team sizes (None: the protocol's), parameter overrides, a target.

    `sample_loops`: check a uniform loop on three of its iterations (the instances are
    then for checking only; code generation asks for every iteration)."""

    ranks: tuple[int, ...] | None = None
    params: Mapping[str, int] = field(default_factory=dict)
    target: str | None = None
    limits: Limits = DEFAULT_LIMITS
    sample_loops: bool = field(default_factory=_sample_default)


@dataclass
class CheckResult:
    protocol: Protocol | None
    instances: list[Instance]
    diagnostics: list[Diagnostic]
    options: CheckOptions | None = None  # what `check_protocol` was asked (None: not run)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)


def check_protocol(protocol: Protocol, options: CheckOptions = CheckOptions()) -> CheckResult:
    """Instantiate for every team size and run every check on every instance."""
    from ccogen.analysis import gc_release

    try:
        return replace(_check_protocol(protocol, options), options=options)
    finally:
        gc_release()  # what the checks froze (`analysis.gc_paused`) is collectable again


def _check_protocol(protocol: Protocol, options: CheckOptions) -> CheckResult:
    from ccogen.analysis import gc_paused
    from ccogen.instantiate import instantiate, team_sizes
    from ccogen.ir.depth import depth_error

    if (deep := depth_error(protocol)) is not None:  # built in Python, past the parser's limit
        return CheckResult(protocol, [], [deep])
    found: FindingSet[str] = FindingSet(shape_key)
    seen_in: dict[int, dict[str, _Seen]] = {}  # id of the kept diagnostic -> per instance
    instances: list[Instance] = []
    sizes = team_sizes(protocol, options.ranks, params=dict(options.params))
    for n in sizes:
        with gc_paused():  # 100k op instances: a third of the unrolling was collections
            instance, diags = instantiate(protocol, n, dict(options.params), options.limits,
                                          sample=options.sample_loops)
        if instance is not None and not any(d.is_error for d in diags):
            instances.append(instance)
            diags = [*diags, *_checks(protocol, instance, options)]
        label = instance.label() if instance is not None else _label(n, options.params)
        for d in diags:
            entry = found.add(d, label)
            seen = seen_in.setdefault(id(entry.diagnostic), {}).setdefault(label, _Seen(n))
            seen.add(d)
    merged = sorted((_with_instances(e.diagnostic, seen_in[id(e.diagnostic)], len(sizes))
                     for e in found), key=sort_key)
    return CheckResult(protocol, instances, capped(merged, options.limits.findings))


def _checks(protocol: Protocol, instance: Instance, options: CheckOptions) -> list[Diagnostic]:
    """`run_checks`, with an analysis over `options.limits` reported as E006."""
    from ccogen.diag import error
    from ccogen.limits import LimitExceeded, raise_hint
    from ccogen.passes import run_checks

    try:
        return run_checks(instance, options.target, options.limits)
    except LimitExceeded as exc:
        return [error("E006", exc.message, protocol.span, "this protocol",
                      notes=(f"in the instance {instance.label()}",),
                      help=f"check fewer ranks or smaller loops, or "
                           f"{raise_hint(exc.name, exc.needed)}")]


@dataclass
class _Seen:
    """What one instance contributed to a merged finding: its ranks notes and messages."""

    nranks: int
    ranks: list[str] = field(default_factory=list)
    messages: set[str] = field(default_factory=set)
    stopped: str | None = None  # the instance stopped at the findings limit (its note)

    def add(self, d: Diagnostic) -> None:
        self.messages.add(d.message)
        for note in d.notes:
            if is_ranks_note(note) and note not in self.ranks:
                self.ranks.append(note)
            elif note.startswith(STOPPED_NOTE):
                self.stopped = note


def _with_instances(d: Diagnostic, seen: dict[str, _Seen], total: int) -> Diagnostic:
    """Replace a single-instance note by one naming every instance the finding is in, and
    the ranks note by one per instance where the ranks differ between instances."""
    labels = list(seen)
    ranks = {label: " and ".join(s.ranks) for label, s in seen.items() if s.ranks}
    notes = tuple(n for n in d.notes if not n.startswith(("in the instance ", STOPPED_NOTE))
                  and not (is_ranks_note(n) and len(set(ranks.values())) > 1))
    # an instance whose evaluation stopped at the findings limit says so, whichever
    # instance's copy of the finding was kept
    for note in dict.fromkeys(s.stopped for s in seen.values() if s.stopped):
        where = "; ".join(label for label, s in seen.items() if s.stopped == note)
        notes = (*notes, note.replace("in this instance", f"in the instance {where}"))
    if len(set(ranks.values())) > 1:
        notes = (*notes, "; ".join(f"{r} (nranks={seen[label].nranks})"
                                   for label, r in ranks.items()))
    if len(messages := set().union(*(s.messages for s in seen.values()))) > 1:
        k = len(messages) - 1
        notes = (*notes, f"the numbers shown are from the instance {labels[0]}; {k} other "
                         f"message{'s' if k > 1 else ''} of this finding "
                         f"differ{'' if k > 1 else 's'} only in its numbers")
    if total <= 1 and len(labels) <= 1:
        note = f"in the instance {labels[0]}"
    elif len(labels) == total:
        note = f"in every instance checked ({'; '.join(labels)})"
    else:
        note = f"in the instance{'s' if len(labels) > 1 else ''} {'; '.join(labels)}"
    return replace(d, notes=(*notes, note))


def _label(nranks: int, params: Mapping[str, int]) -> str:
    return ", ".join([f"nranks={nranks}", *(f"{k}={v}" for k, v in params.items())])


def check_text(text: str, path: str, options: CheckOptions = CheckOptions()) -> CheckResult:
    """Parse, lower and check `.cco` text; syntax and name errors stop before instances."""
    from ccogen.syntax import parse_ir

    try:
        protocol = parse_ir(text, path)
    except DiagnosticError as exc:
        return CheckResult(None, [], sorted(exc.diagnostics, key=sort_key))
    return check_protocol(protocol, options)


def check_file(path: str | Path, options: CheckOptions = CheckOptions()) -> CheckResult:
    from ccogen.fileio import read_source

    try:
        text = read_source(path)
    except DiagnosticError as exc:
        return CheckResult(None, [], sorted(exc.diagnostics, key=sort_key))
    return check_text(text, str(path), options)


__all__ = ["CheckOptions", "CheckResult", "check_file", "check_protocol", "check_text"]
