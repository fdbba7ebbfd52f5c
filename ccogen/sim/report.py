"""What `simulate` returns: per instance the schedules run, and merged diagnostics.

A finding seen in several schedules (or instances) is reported once, with notes
saying in how many schedules of which instances it showed and a `help:` naming
the command that replays the first one.  A postcondition failure in a schedule
that also found another error is left out: it is a consequence, not a cause; so is
a deadlock after a `reset_count` that raced with counted writes (E027), and a
read that a `wait_count` on a counter nothing counts to failed to order (E026).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ccogen.diag import Diagnostic, sort_key
from ccogen.diag.merge import FindingSet
from ccogen.sim.explain import Finding
from ccogen.sim.schedule import Run
from ccogen.sim.state import WindowKey

TIMES = "\N{MULTIPLICATION SIGN}"  # the summary's "20 schedules by 2 epochs"


@dataclass
class SimResult:
    """One schedule of one instance: passed, what failed, the memory it left."""

    name: str
    seed: int | None
    passed: bool
    failures: list[Diagnostic]
    digest: str | None
    memory: dict[WindowKey, bytes] | None
    schedule: list[int]
    deadlocked: bool


@dataclass
class InstanceReport:
    label: str
    nranks: int
    results: list[SimResult] = field(default_factory=list)
    exhaustive: bool = False
    complete: bool = True
    limit: str = ""
    elapsed: float = 0.0
    setup: list[Diagnostic] = field(default_factory=list)  # instantiation errors
    backing: str = ""  # sparse backing: "N of M bytes" (only the touched bytes were backed)
    stopped: str = ""  # the `sim-steps` limit ended it (its E006 is in `setup`)

    @property
    def passed(self) -> bool:
        """Built, explored by at least one schedule, and every schedule passed."""
        return not self.setup and bool(self.results) and all(r.passed for r in self.results)

    @property
    def digests(self) -> set[str | None]:
        return {r.digest for r in self.results}


@dataclass
class SimReport:
    """Everything one `simulate` call found (see the module docstring)."""

    protocol: str
    path: str
    epochs: int
    instances: list[InstanceReport] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    trace: str | None = None
    trace_label: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.instances) and all(i.passed for i in self.instances)

    @property
    def unfinished(self) -> list[InstanceReport]:
        """The instances whose exploration ran out of its budget before one schedule."""
        return [i for i in self.instances if not i.setup and not i.results]

    @property
    def inconclusive(self) -> bool:
        """Nothing failed, but an instance explored no schedule within the budget: not a
        pass and not a finding (`ccogen simulate` exits 4)."""
        return (not self.passed and bool(self.unfinished)
                and not any(i.setup for i in self.instances)
                and all(r.passed for i in self.instances for r in i.results))

    def unfinished_note(self) -> str:
        """What ran out of budget, and how far each instance got."""
        done = ", ".join(f"nranks={i.nranks}: {len(i.results)}" for i in self.instances
                         if i.results)
        stopped = "; ".join(f"nranks={i.nranks} {i.limit or 'stopped'}" for i in self.unfinished)
        return (f"not finished: the exploration ran out of its budget before one schedule "
                f"completed ({stopped})" + (f"; schedules explored: {done}" if done else "")
                + "; raise --time-limit or --max-schedules, or use --seeds K")

    @property
    def schedules(self) -> int:
        return sum(len(i.results) for i in self.instances)

    def summary(self) -> str:
        sizes = ",".join(str(i.nranks) for i in self.instances)
        counts = sorted({len(i.results) for i in self.instances})
        runs = "/".join(map(str, counts)) if counts else "0"
        kind = "exhaustive: " if any(i.exhaustive for i in self.instances) else ""
        epochs = f"{self.epochs} epoch{'s' if self.epochs != 1 else ''}"
        verdict = ("all passed" if self.passed else self.unfinished_note()
                   if self.inconclusive else self._failed())
        plural = "s" if counts != [1] else ""
        text = f"{kind}{runs} schedule{plural} {TIMES} {epochs} on nranks={sizes}: {verdict}"
        bounded = [f"nranks={i.nranks} {i.limit}" + (
            "" if "schedules" in i.limit else f" with {times(len(i.results), 'schedule')} "
            "explored") for i in self.instances if not i.complete and i.results]
        sparse = [f"nranks={i.nranks} {i.backing}" for i in self.instances if i.backing]
        return (text + (f" (not exhaustive: {'; '.join(bounded)})" if bounded else "")
                + (f" (windows backed sparsely, only the bytes touched: {'; '.join(sparse)})"
                   if sparse else ""))

    def _failed(self) -> str:
        bad = sum(1 for i in self.instances for r in i.results if not r.passed)
        setup = sum(1 for i in self.instances if i.setup and not i.stopped)
        stopped = sum(1 for i in self.instances if i.stopped)
        parts = [f"{bad} schedule{'s' if bad != 1 else ''} failed"] if bad else []
        if setup:
            parts.append(f"{setup} instance{'s' if setup != 1 else ''} could not be built")
        if stopped:
            parts.append(f"{stopped} instance{'s' if stopped != 1 else ''} stopped at the "
                         "sim-steps limit")
        empty = self.unfinished
        if empty:
            parts.append(f"{len(empty)} instance{'s' if len(empty) != 1 else ''} explored no "
                         f"schedule within the budget "
                         f"({'; '.join(f'nranks={i.nranks} {i.limit}' for i in empty)}: "
                         "raise --max-schedules or --time-limit)")
        return "; ".join(parts)


def times(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def result_of(run: Run) -> SimResult:
    findings = _root_causes(run.findings)
    failures = [f.diagnostic for f in findings]
    return SimResult(run.name, run.seed, not any(d.is_error for d in failures), failures,
                     run.digest, run.memory, run.schedule, run.deadlocked)


# code -> what it may cause in the same schedule, reported only without it
_CONSEQUENCES = {"E027": {"E021", "E026", "E030", "E033"},  # a reset erased counted bytes
                 "E026": {"E032"}}  # a wait on an uncounted counter orders no reads


def _root_causes(findings: Sequence[Finding]) -> list[Finding]:
    codes = {f.diagnostic.code for f in findings}
    hidden = set().union(*(_CONSEQUENCES.get(c, set()) for c in codes))
    if {c for c in codes if c.startswith("E")} - {"E033"}:
        hidden.add("E033")  # a wrong result is a consequence of any other error
    return [f for f in findings if f.diagnostic.code not in hidden]


def merge(instances: Sequence[InstanceReport], replay: str) -> list[Diagnostic]:
    """One diagnostic per distinct finding, with where it was seen (see module doc)."""
    seen: FindingSet[tuple[str, str]] = FindingSet()  # where: (note, replay command)
    for inst in instances:
        for d in inst.setup:
            seen.add(d)
        per_schedule: FindingSet[int] = FindingSet()  # where: index of the schedule
        for i, r in enumerate(inst.results):
            for d in r.failures:
                per_schedule.add(d, i)
        for entry in per_schedule:
            results = _by_name([inst.results[i] for i in entry.where])
            seen.add(entry.diagnostic, (_where(inst, results),
                                        _command(replay, inst, results[0])))
    out = [_annotated(e.diagnostic, [w for w, _ in e.where], [c for _, c in e.where])
           for e in seen]
    return sorted(out, key=sort_key)


def _by_name(results: list[SimResult]) -> list[SimResult]:
    """One result per schedule name (the last one run under that name)."""
    return list({r.name: r for r in results}.values())


def _where(inst: InstanceReport, results: list[SimResult]) -> str:
    total = len(inst.results)
    names = ", ".join(r.name for r in results[:3]) + (", ..." if len(results) > 3 else "")
    return f"in {len(results)} of {total} schedules of the instance {inst.label} ({names})"


def _command(replay: str, inst: InstanceReport, r: SimResult) -> str:
    if r.seed is not None:
        return f"`{replay} --ranks {inst.nranks} --seed {r.seed}`"
    return f"`{replay} --ranks {inst.nranks} --exhaustive`"


def _annotated(d: Diagnostic, where: list[str], commands: list[str]) -> Diagnostic:
    if not where:
        return d
    shows = f"{commands[0]} shows it"
    help = f"{d.help}; {shows}" if d.help else shows
    return replace(d, notes=(*d.notes, *where), help=help)
