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

# (code the checker reports, codes the simulator may report instead) -> why
EXPLAINED: dict[tuple[str, frozenset[str]], str] = {
    ("E021", frozenset()): "a wait that can never be satisfied is found statically; the "
                           "simulator meets it only in a schedule that reaches it, and a "
                           "deadlock before it (E030) comes first",
    ("E022", frozenset()): "a hand-written `expected` that does not grow is met already: the "
                           "wait orders nothing, and may harm nothing",
    ("E022", frozenset({"E021"})): "a total shared across queues: the wait never returns",
    ("E023", frozenset({"E021"})): "`expected` counted per lane: the wait never returns",
    ("E023", frozenset({"E032"})): "`expected` counted per group with `signal_per_copy`: "
                                   "the wait returns early and the read comes too soon",
    ("E020", frozenset()): "`commit` after a `quiet` that drains its queue: the quiet "
                           "waits for nothing, which harms nothing when no source is "
                           "rewritten before the data is waited for",
    ("E020", frozenset({"E025"})): "`commit` after the `quiet`: the launch ends before the "
                                   "batch has read its source, the caller rewrites it",
}


@dataclass(frozen=True)
class Verdict:
    protocol: Protocol
    lint: frozenset[str]
    sim: frozenset[str]
    schedules: int
    explained: str = ""

    @property
    def agree(self) -> bool:
        """The same codes, or codes that differ in a way `EXPLAINED` accounts for."""
        return self.lint == self.sim or bool(self.explained)

    @property
    def same_verdict(self) -> bool:
        return bool(self.lint) == bool(self.sim)


def explain(lint: frozenset[str], sim: frozenset[str]) -> str:
    """Why the codes differ, when the table accounts for every difference ("" otherwise).

    Each code only the checker reports must have a row whose alternatives the simulator
    reported instead (or none); every code only the simulator reports must be such an
    alternative.
    """
    if lint == sim:
        return ""
    reasons = []
    only_sim = set(sim - lint)
    for code in sorted(lint - sim):
        rows = sorted((alt for (c, alt) in EXPLAINED if c == code and alt <= only_sim),
                      key=len, reverse=True)
        if not rows:
            return ""
        only_sim -= rows[0]
        reasons.append(f"{code}: {EXPLAINED[(code, rows[0])]}")
    if only_sim:
        return ""
    return "; ".join(reasons)


def judge(p: Protocol, *, seeds: int = SEEDS, exhaustive: float = EXHAUSTIVE_SECONDS
          ) -> Verdict:
    lint = check_text(p.text, f"{p.shape}.cco", CheckOptions(ranks=(p.ranks,)))
    lint_codes = frozenset(d.code for d in lint.diagnostics if d.is_error)
    report = simulate(p.text, ranks=[p.ranks], seeds=seeds, path=f"{p.shape}.cco")
    codes = {d.code for d in report.diagnostics if d.is_error}
    schedules = report.schedules
    if exhaustive > 0:
        full = simulate(p.text, ranks=[p.ranks], exhaustive=True, time_limit=exhaustive,
                        path=f"{p.shape}.cco")
        codes |= {d.code for d in full.diagnostics if d.is_error}
        schedules += full.schedules
    sim_codes = frozenset(codes)
    return Verdict(p, lint_codes, sim_codes, schedules, explain(lint_codes, sim_codes))


__all__ = ["EXPLAINED", "Verdict", "explain", "judge"]
