"""The documented resource limits, checked up front (see docs/reliability.md).

Each limit bounds the memory or time of one stage, so that a large or hostile input
gets a diagnostic (E006, naming the limit and how to raise it) instead of exhausting
the machine:

| name           | default       | what it bounds                                          |
|----------------|---------------|---------------------------------------------------------|
| `ranks`        | 1,024         | team size (happens-before clocks grow with its square)  |
| `op-instances` | 1,000,000     | op instances of one instance, all ranks and checks      |
| `iterations`   | 4,000,000     | loop iterations unrolled for one instance               |
| `window-bytes` | 1 TiB         | the size of one window (no device has more memory)      |
| `sim-bytes`    | 1 GiB         | window bytes the simulator backs per instance (*)       |
| `findings`     | 100           | findings reported per rule (the rest are counted)       |
| `analysis-bytes` | 2 GiB       | happens-before clocks of one instance (events x issuers) |
| `sim-steps`    | 10,000,000    | simulator steps of one instance, all its schedules      |

(*) Past 256 MiB of windows the simulator backs only the bytes ops and `ensure` touch.

`--limit NAME=N` (repeatable; sizes take units: `--limit sim-bytes=8GiB`) raises or
lowers one for `lint`, `simulate`, `compile` and `build`.  The nesting depth of the
source (`MAX_DEPTH`) is fixed: it bounds recursion in the parser and the evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

FLAG = "--limit"
MAX_DEPTH = 128  # levels of the syntax tree: about 120 terms in one expression, 60 nested blocks


@dataclass(frozen=True)
class Limits:
    ranks: int = 1024
    op_instances: int = 1_000_000
    iterations: int = 4_000_000
    window_bytes: int = 1 << 40
    sim_bytes: int = 1 << 30
    findings: int = 100
    analysis_bytes: int = 2 << 30
    sim_steps: int = 10_000_000

    @staticmethod
    def names() -> list[str]:
        return [f.name.replace("_", "-") for f in fields(Limits)]

    def with_overrides(self, values: Sequence[str],
                       parse: Callable[[str], int] = int) -> Limits:
        """`["ranks=4096", "sim-bytes=8GiB"]` applied, each value read by `parse` (the CLI
        passes the `--param` byte parser); ValueError with a readable message."""
        out = self
        for item in values:
            name, sep, text = item.partition("=")
            key = name.strip().replace("-", "_")
            if not sep or key not in {f.name for f in fields(Limits)}:
                raise ValueError(f"{FLAG} takes NAME=N with NAME one of "
                                 f"{', '.join(self.names())}, not {item!r}")
            try:
                value = parse(text.strip())
            except ValueError as exc:
                raise ValueError(f"{FLAG} {item}: {exc}") from None
            if value < 1:
                raise ValueError(f"{FLAG} {item}: a limit must be at least 1")
            out = replace(out, **{key: value})
        return out


class LimitExceeded(Exception):
    """A limit found deep in a stage (the happens-before clocks); the caller reports E006."""

    def __init__(self, message: str, name: str, needed: int) -> None:
        super().__init__(message)
        self.message, self.name, self.needed = message, name, needed


def raise_hint(name: str, needed: int | None = None) -> str:
    """The `help:` of an E006: the flag that raises the limit."""
    value = "N" if needed is None else str(needed)
    return f"raise the limit with `{FLAG} {name}={value}`"


DEFAULT = Limits()

__all__ = ["DEFAULT", "FLAG", "MAX_DEPTH", "LimitExceeded", "Limits", "raise_hint"]
