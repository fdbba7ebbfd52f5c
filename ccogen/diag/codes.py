"""THE registry of diagnostic codes: code -> slug, severity, summary.

Codes are never reused.  `E0xx` are errors (the protocol hangs, corrupts data or is
rejected), `N0xx` notes (what the checks could not decide, said so that nothing passes
silently; warnings under `--strict`), `W1xx` performance warnings.  The long explanation
of each rule lives beside the reference, in `docs/reference/rules/CODE.md` (`Rule.explain`, read by
`ccogen.diag.explain`; `ccogen explain CODE` prints it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ccogen.diag.explain import explanation
from ccogen.diag.severity import Severity


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    slug: str
    summary: str

    @property
    def severity(self) -> Severity:
        if self.code.startswith("E"):
            return Severity.ERROR
        return Severity.NOTE if self.code.startswith("N") else Severity.WARNING

    @property
    def explain(self) -> str:
        """The Markdown explanation (docs/reference/rules/CODE.md without its title)."""
        return explanation(self.code)


_RULES: tuple[Rule, ...] = tuple(
    Rule(code, slug, summary)
    for code, slug, summary in (
        ("E001", "syntax-error", "syntax error"),
        (
            "E002",
            "bad-name-or-argument",
            "unknown name, wrong argument, wrong type or duplicate declaration",
        ),
        ("E003", "bad-region", "region out of bounds, empty, or `dst`/`src` lengths differ"),
        (
            "E004",
            "unresolvable-expression",
            "loop or expression that cannot be resolved at instantiation",
        ),
        (
            "E005",
            "bad-thread-count",
            "`threads=`/`blocks=` too small for the issuers used, or over the device limit",
        ),
        (
            "E006",
            "limit-exceeded",
            "team size, op instances, window or memory bytes, or nesting over a documented limit",
        ),
        ("E010", "peer-outside-team", "peer outside the team, or `me` used as a peer"),
        ("E011", "world-rank-for-lsa", "a world rank where an LSA rank is required"),
        (
            "E012",
            "queue-out-of-range",
            "queue id at or over the queue count, or queue count over the backend cap",
        ),
        (
            "E013",
            "broken-same-queue-promise",
            '`mode="same_queue"` promised but lanes differ in peer or queue',
        ),
        ("E014", "mode-on-group-issuer", "`mode=` given for a warp or block issuer"),
        (
            "E015",
            "independent-lanes-shared-queue",
            "lanes posting to several queues share one with another wave at the same time"
            " (mori-sdma)",
        ),
        (
            "E020",
            "uncommitted-aggregate",
            "aggregate op not committed before the quiet or wait that depends on it",
        ),
        ("E021", "unsatisfiable-wait", "`wait_signal` expects more signals than are ever sent"),
        (
            "E022",
            "non-monotonic-expected",
            "hand-written `expected` not monotonic per (src, queue), or shared across queues",
        ),
        (
            "E023",
            "expected-per-lane",
            "`expected` counted per lane while the sender signals once per group (or the reverse)",
        ),
        (
            "E024",
            "signal-on-other-queue",
            "data announced by a signal on a different queue than the copy that carries it",
        ),
        (
            "E025",
            "source-reused-early",
            "source region written or reused before the op reading it completed",
        ),
        (
            "E026",
            "unsatisfiable-count",
            "`wait_count` expects more bytes than are ever counted,"
            " or a counter without counted puts",
        ),
        (
            "E027",
            "counter-reset-in-flight",
            "counter reset while counted writes of the same epoch may be in flight",
        ),
        (
            "E028",
            "shared-queue-doorbell",
            "aggregate op or commit on a queue that another issuer posts to concurrently",
        ),
        (
            "E029",
            "sdma-ring-overflow",
            "aggregate batch reserving more of the SDMA ring than it holds (mori-sdma)",
        ),
        ("E030", "deadlock", "a cycle of waits across ranks, or barriers reached unequally"),
        (
            "E031",
            "write-write-race",
            "two transfers write overlapping bytes with no order between them",
        ),
        ("E032", "read-before-arrival", "bytes read before a wait orders their arrival"),
        ("E033", "postcondition-fails", "the result of the protocol differs from `ensure`"),
        (
            "E034",
            "runtime-total-mismatch",
            "a run-time `expected=` of `wait_count` that may differ from the bytes counted",
        ),
        (
            "E035",
            "static-wait-on-runtime-count",
            "a static `wait_count` on a counter that receives a run-time number of bytes",
        ),
        (
            "E036",
            "unproved-disjoint-writes",
            "two writes with run-time bounds that the checker cannot prove disjoint",
        ),
        (
            "E037",
            "runtime-peer-synchronisation",
            "a run-time peer where only a plain `put` takes one (a `get`, signal, count, "
            "commit, `quiet(p)` or wait)",
        ),
        (
            "E038",
            "runtime-loop-synchronisation",
            "a signal, wait, barrier, completion or counted transfer inside a loop that runs "
            "to a run-time count",
        ),
        (
            "E040",
            "cft-misaligned",
            "CFT operand not 16-byte aligned, length not a multiple of 16,"
            " or counter not 256-byte aligned",
        ),
        ("E041", "cft-barrier-index", "CFT barrier index at or over the requested barrier count"),
        ("E042", "unsupported-by-backend", "operation the chosen backend cannot lower"),
        (
            "N001",
            "unproved-postcondition",
            "an `ensure` line the checker cannot prove (the simulator judges it on drawn "
            "contents)",
        ),
        ("W100", "many-small-copies", "many small copies to one peer: pack locally and send once"),
        ("W101", "split-transfer", "one contiguous transfer split into several ops"),
        ("W102", "shared-queue-issuers", "several warps or blocks issue concurrently on one queue"),
        ("W103", "lanes-over-queues", "lanes of one warp spread over several queues"),
        ("W104", "signal-per-copy", "`signal_per_copy=True` costs a packet per copy"),
        ("W105", "aggregate-batch-size", "aggregate batch outside 8-16 ops per commit"),
        ("W106", "independent-mode-provable", '`mode="independent"` where same-queue is provable'),
        ("W107", "too-many-queues", "more queues declared than concurrent issuers need"),
        (
            "W108",
            "rank-dependent-summation-order",
            "ranks reduce the same contributions in different orders (results differ in the "
            "last bits)",
        ),
    )
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _RULES}
_BY_NAME: dict[str, Rule] = {
    **{rule.slug: rule for rule in _RULES},
    **{rule.code.lower(): rule for rule in _RULES},
}


def lookup(name: str) -> Rule:
    """The rule named by a code (`E021`, `e021`) or a slug (`unsatisfiable-wait`).

    Raises `KeyError` for an unknown name.
    """
    rule = _BY_NAME.get(name.strip().lower())
    if rule is None:
        raise KeyError(name)
    return rule


def explain_text(name: str) -> str:
    """`ccogen explain` output: `CODE (slug): summary`, a blank line, the explanation.

    `name` is a code (`E021`, `e021`) or a slug (`unsatisfiable-wait`); raises `KeyError`
    for an unknown name.
    """
    rule = lookup(name)
    return f"{rule.code} ({rule.slug}): {rule.summary}\n\n{explanation(rule.code)}"


__all__ = ["RULES", "Rule", "explain_text", "lookup"]
