"""Two judges, one verdict: `ccogen lint` and `ccogen simulate` on the same protocol.

`judge(protocol)` lints the protocol (every check, every instance of its team size) and
simulates it (seeded schedules, and every schedule up to partial-order equivalence while
that is cheap), then compares: the *verdicts* (some error, or none) must be the same, and
the codes may differ only in the ways `EXPLAINED` lists (the checker names the cause, the
simulator sees its effect, or a misuse whose run does no harm, where the verdicts differ
for a reason the table states).  The table is the one of
docs/checker.md ("Differential testing").
"""

from __future__ import annotations

from dataclasses import dataclass

from ccogen.driver import CheckOptions, check_text
from ccogen.sim import simulate
from tests.differential.gen import Protocol

SEEDS = 6
EXHAUSTIVE_SECONDS = 2.0


@dataclass(frozen=True)
class Row:
    """When the checker reports `code` (and every code of `given`), the simulator may
    report `alternatives` as well or instead (none: it may report nothing of it)."""

    code: str
    alternatives: frozenset[str]
    why: str
    given: frozenset[str] = frozenset()


def _row(code: str, alternatives: str, why: str, given: str = "") -> Row:
    return Row(code, frozenset(alternatives.split()), why, frozenset(given.split()))


EXPLAINED: list[Row] = [
    # a misuse found statically whose run does no harm, or that no schedule reaches
    _row("E021", "", "a wait that can never be satisfied is found statically; the simulator "
         "meets it only in a schedule that reaches it (a deadlock before it comes first)"),
    _row("E022", "", "a hand-written `expected` that does not grow is met already: the "
         "wait orders nothing, which may harm nothing"),
    _row("E020", "", "`commit` after a `quiet` that drains its queue: the quiet waits for "
         "nothing, which harms nothing when no source is rewritten before the data is "
         "waited for"),
    # the checker names the cause, the simulator sees its effect
    _row("E022", "E021", "a total shared across queues: the wait never returns"),
    _row("E023", "E021", "`expected` counted per lane: the wait never returns"),
    _row("E023", "E032", "`expected` counted per group with `signal_per_copy`: the wait "
         "returns early and the read comes too soon"),
    _row("E020", "E025", "`commit` after the `quiet`: the launch ends before the batch has "
         "read its source, the caller rewrites it"),
    _row("E024", "E032", "a read before arrival whose cause the checker names (the signal "
         "waited for travels on another queue than the data); the simulator sees the read "
         "come first"),
    _row("E026", "E030", "a `wait_count` for more bytes than are counted (after a reset, "
         "say): the simulator sees the hang"),
    _row("E027", "E030", "a reset racing a counted write may erase its bytes: the wait that "
         "needed them then never returns"),
    # one hang, two causes: the simulator names the first one every schedule meets
    _row("E030", "E021", "a cycle of waits or a barrier mismatch is found statically; the "
         "simulator explains the hang by its first cause (a wait nothing can satisfy)"),
    _row("E030", "E020", "the same, the first cause being an aggregate op never committed"),
    _row("E030", "E026", "the same, the first cause being a counter never reaching its value"),
    _row("E021", "E020", "a wait nothing can satisfy, behind a hang (an aggregate op never "
         "committed) that every schedule meets first"),
    # one finding, two codes: the simulator folds the consequence into its root cause
    _row("E032", "", "a read a `wait_count` fails to order (its counter never reaches, or "
         "passes only on the next launch's writes, the value): the simulator reports E026, "
         "its root cause, alone (sim/report.py, consequences), the checker both", given="E026"),
]


@dataclass(frozen=True)
class Verdict:
    protocol: Protocol
    lint: frozenset[str]
    sim: frozenset[str]
    schedules: int
    explained: str = ""
    stale: bool = False  # the simulator read a run-time value of another launch ("stale load")

    @property
    def agree(self) -> bool:
        """The same codes, or codes that differ in a way `EXPLAINED` accounts for."""
        return self.lint == self.sim or bool(self.explained)

    @property
    def same_verdict(self) -> bool:
        return bool(self.lint) == bool(self.sim)


def explain(lint: frozenset[str], sim: frozenset[str]) -> str:
    """Why the codes differ, when the table accounts for every difference ("" otherwise).

    Every code only the checker reports needs a row that applies (its `given` codes among
    the checker's); every code only the simulator reports must be an alternative of a
    row that applies.
    """
    if lint == sim:
        return ""
    allowed: set[str] = set()
    reasons: list[str] = []
    for code in sorted(lint):
        rows = [r for r in EXPLAINED if r.code == code and r.given <= lint
                and r.alternatives <= sim and (r.alternatives or code not in sim)]
        if code not in sim and not rows:
            return ""
        for r in rows:
            allowed |= r.alternatives
            reasons.append(f"{code}: {r.why}")
    if sim - lint - allowed:
        return ""
    return "\n".join(reasons)


def judge(p: Protocol, *, seeds: int = SEEDS, exhaustive: float = EXHAUSTIVE_SECONDS
          ) -> Verdict:
    lint = check_text(p.text, f"{p.shape}.cco", CheckOptions(ranks=(p.ranks,)))
    lint_codes = frozenset(d.code for d in lint.diagnostics if d.is_error)
    report = simulate(p.text, ranks=[p.ranks], seeds=seeds, path=f"{p.shape}.cco")
    codes = {d.code for d in report.diagnostics if d.is_error}
    stale = any(d.message.startswith("stale load") for d in report.diagnostics)
    schedules = report.schedules
    if exhaustive > 0:
        full = simulate(p.text, ranks=[p.ranks], exhaustive=True, time_limit=exhaustive,
                        path=f"{p.shape}.cco")
        codes |= {d.code for d in full.diagnostics if d.is_error}
        stale |= any(d.message.startswith("stale load") for d in full.diagnostics)
        schedules += full.schedules
    sim_codes = frozenset(codes)
    return Verdict(p, lint_codes, sim_codes, schedules, explain(lint_codes, sim_codes), stale)


__all__ = ["EXPLAINED", "Row", "Verdict", "explain", "judge"]
