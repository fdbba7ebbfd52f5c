"""What a run found: per-rank epoch times, `ensure` failures, a timed-out wait, errors."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ccogen.rt.data import CheckFailure


@dataclass
class RankResult:
    rank: int
    device: int
    epochs: int = 0                       # epochs completed (kernels finished, data checked)
    times_ms: list[float] = field(default_factory=list)
    checks_per_epoch: int = 0
    failures: list[CheckFailure] = field(default_factory=list)  # the first few
    failure_count: int = 0
    wait: str | None = None               # a debug-build wait that timed out, described
    error: str | None = None              # anything else that stopped this rank
    unfinished: str | None = None         # the kernel that did not finish (watchdog)
    library: str = ""
    # run-time protocols: the draw of each epoch's contents (ccogen.rt.drawn), in order
    draws: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.wait is None and self.failure_count == 0

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None


@dataclass
class RunReport:
    protocol: str
    target: str
    nranks: int
    iters: int
    ranks: list[RankResult]
    library: str = ""
    partial: bool = False  # this process ran one rank of a torchrun / mpirun job
    placement: str = ""  # ranks sharing GPUs (ccogen.rt.placement): said in the report

    @property
    def ok(self) -> bool:
        """Every rank ran every epoch and every `ensure` held."""
        return bool(self.ranks) and all(r.ok and r.epochs == self.iters for r in self.ranks)

    @property
    def median_ms(self) -> float | None:
        """Median epoch time of the slowest rank (CUDA events around the epoch's kernels)."""
        medians = [m for r in self.ranks if (m := r.median_ms) is not None]
        return max(medians) if medians else None

    @property
    def failures(self) -> list[CheckFailure]:
        return [f for r in self.ranks for f in r.failures]

    def _unfinished_summary(self) -> str:
        """Which kernel had not finished on which ranks (a release build's hang), and the
        ranks that stopped elsewhere (a rank that never launched is one of those)."""
        hung: dict[str, list[int]] = {}
        for r in self.ranks:
            if r.unfinished is not None:
                hung.setdefault(r.unfinished, []).append(r.rank)
        if not hung:
            return ""
        text = "; ".join(f"`{k}` on {_ranks(on)}" for k, on in sorted(hung.items()))
        elsewhere = [r.rank for r in self.ranks if r.unfinished is None and not r.ok]
        if elsewhere:
            text += f" ({_ranks(elsewhere)} stopped before or after it: see below)"
        return f"  kernels that had not finished: {text}"

    def format(self, times: bool = False) -> str:
        lines = [f"{self.protocol} on {self.target}, {self.nranks} ranks"
                 f"{f' ({self.library})' if self.library else ''}, {self.iters} epochs"
                 f"{' (this rank only)' if self.partial else ''}"]
        if self.placement:
            lines.append(f"  placement: {self.placement}")
        median = self.median_ms
        if median is not None:
            every = [t for r in self.ranks for t in r.times_ms]
            per_rank = ", ".join(f"rank {r.rank} {_us(r.median_ms)}" for r in self.ranks
                                 if r.median_ms is not None)
            lines.append(f"  time per epoch: median {_us(median)} ({per_rank}); "
                         f"min {_us(min(every))}, max {_us(max(every))}")
        if times:
            for r in self.ranks:
                lines.append(f"  rank {r.rank} epoch times (us): "
                             + " ".join(f"{t * 1e3:.1f}" for t in r.times_ms))
        summary = self._unfinished_summary()
        if summary:
            lines.append(summary)
        for r in self.ranks:
            if r.wait is not None:
                lines.append(f"  timed-out wait: {r.wait}")
            if r.error is not None:
                lines.append(f"  rank {r.rank} error: {r.error}")
            if r.epochs != self.iters and r.error is None and r.wait is None:
                lines.append(f"  rank {r.rank} stopped after {r.epochs} of {self.iters} epochs")
        draws = next((r.draws for r in self.ranks if r.draws), [])
        if draws:
            shown = ", ".join(draws[:4]) + (", ..." if len(draws) > 4 else "")
            lines.append(f"  contents: drawn afresh each epoch to satisfy `require` ({shown}); "
                         "the checks are those of each epoch's contents")
        for f in self.failures:
            lines.append("  " + f.format())
        total = sum(r.failure_count for r in self.ranks)
        if total > len(self.failures):
            lines.append(f"  ... {total - len(self.failures)} more ensure failures")
        checks = sum(r.checks_per_epoch for r in self.ranks)
        if self.ok:
            up_to = "up to " if draws else ""
            lines.append(f"  ensure: {up_to}{checks} comparisons per epoch held on every rank "
                         f"in every epoch" if checks else "  ensure: nothing to check")
        else:
            lines.append(f"  FAILED: {total} ensure failures"
                         + ("" if all(r.ok for r in self.ranks) else
                            ", and a rank did not finish"))
        return "\n".join(lines)


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f} us"


__all__ = ["RankResult", "RunReport"]
