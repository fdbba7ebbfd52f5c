"""Benchmark results: one `Point` per (sweep, value, implementation), statistics, CSV.

Implementations (`Point.impl`):
- `generated`  the protocol's generated kernels (the code `ccogen run` runs);
- `reference`  the hand-written kernels of benchmarks/reference for the same instance;
- `nccl`       the engine's own collective of the same shape through torch.distributed
               (`all_to_all_single` / `all_gather_into_tensor`, eager);
- `ce`, `ce-bidir`            cudaMemcpyPeerAsync of the per-direction bytes, one way /
                              both ways at once (the copy-engine ceiling);
- `sm-copy`, `sm-copy-bidir`  a plain SM store kernel into peer memory (16-byte stores);
- `empty-kernel`              back-to-back empty kernels (sweep `floors`, value 0).

Times are microseconds per epoch (per collective call, per copy).  Bandwidth is per
direction: the bytes of the busiest directed link over the median time, in GB/s (1e9).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

IMPLS = ("generated", "reference", "nccl", "ce", "ce-bidir", "sm-copy", "sm-copy-bidir",
         "empty-kernel")
CSV_FIELDS = ("sweep", "protocol", "target", "impl", "param", "value", "value_text",
              "link_bytes", "mode", "epochs_per_sample", "samples", "median_us", "min_us",
              "p10_us", "p90_us", "max_us", "gbps", "verified", "in_kernel_us", "note")


@dataclass(frozen=True)
class Stats:
    """Summary of per-sample times in microseconds."""

    n: int
    median: float
    minimum: float
    p10: float
    p90: float
    maximum: float


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1]) of ascending values."""
    if not sorted_values:
        raise ValueError("no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats_of(samples: Iterable[float]) -> Stats | None:
    """Statistics of the samples, or None when there are none."""
    values = sorted(float(v) for v in samples)
    if not values:
        return None
    return Stats(len(values), statistics.median(values), values[0], percentile(values, 0.1),
                 percentile(values, 0.9), values[-1])


def slowest(per_rank: Sequence[Sequence[float]]) -> Stats | None:
    """The statistics of the rank with the largest median (what a collective costs)."""
    found = [s for s in (stats_of(times) for times in per_rank) if s is not None]
    return max(found, key=lambda s: s.median) if found else None


@dataclass(frozen=True)
class Point:
    """One implementation at one value of one sweep."""

    sweep: str           # `alltoall:block` (protocol:param), or `floors`
    protocol: str
    target: str
    impl: str
    param: str
    value: int
    is_bytes: bool
    link_bytes: int      # per-direction bytes per epoch
    mode: str            # graph | stream | eager | copy
    epochs_per_sample: int
    stats: Stats | None
    verified: bool | None = None  # None: not applicable (ceilings, NCCL unchecked)
    in_kernel_us: float | None = None
    note: str = ""

    @property
    def median_us(self) -> float | None:
        return None if self.stats is None else self.stats.median

    @property
    def gbps(self) -> float | None:
        """Per-direction GB/s at the median (None without a time or without bytes)."""
        t = self.median_us
        if t is None or t <= 0 or self.link_bytes <= 0:
            return None
        return self.link_bytes / (t * 1e-6) / 1e9

    @property
    def ok(self) -> bool:
        return self.stats is not None and self.verified is not False

    def value_text(self) -> str:
        from ccogen.bench.sweep import format_value

        return format_value(self.value, self.is_bytes)


@dataclass
class BenchResult:
    """Every point of one `ccogen bench` run, with what it ran on."""

    target: str
    nranks: int
    points: list[Point] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # library, devices, versions, notes
    errors: list[str] = field(default_factory=list)

    def sweeps(self) -> list[str]:
        seen: dict[str, None] = {}
        for p in self.points:
            if p.sweep != "floors":
                seen.setdefault(p.sweep)
        return list(seen)

    def of(self, sweep: str, impl: str | None = None) -> list[Point]:
        return [p for p in self.points if p.sweep == sweep and (impl is None or p.impl == impl)]

    def find(self, sweep: str, impl: str, value: int) -> Point | None:
        return next((p for p in self.points
                     if p.sweep == sweep and p.impl == impl and p.value == value), None)

    def succeeded(self) -> bool:
        """Every generated and reference point verified and timed, and no rank failed."""
        cases = [p for p in self.points if p.impl in ("generated", "reference")]
        rank_failed = any(e.startswith("rank ") for e in self.errors)
        return bool(cases) and all(p.ok and p.verified is True for p in cases) and not rank_failed


# ------------------------------------------------------------------------------ files


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def csv_row(p: Point) -> dict[str, str]:
    s = p.stats
    return {
        "sweep": p.sweep, "protocol": p.protocol, "target": p.target, "impl": p.impl,
        "param": p.param, "value": str(p.value), "value_text": p.value_text(),
        "link_bytes": str(p.link_bytes), "mode": p.mode,
        "epochs_per_sample": str(p.epochs_per_sample), "samples": str(s.n if s else 0),
        "median_us": _num(s.median if s else None), "min_us": _num(s.minimum if s else None),
        "p10_us": _num(s.p10 if s else None), "p90_us": _num(s.p90 if s else None),
        "max_us": _num(s.maximum if s else None), "gbps": _num(p.gbps),
        "verified": "" if p.verified is None else ("yes" if p.verified else "no"),
        "in_kernel_us": _num(p.in_kernel_us), "note": p.note,
    }


def write_csv(points: Iterable[Point], path: Path) -> Path:
    """All points, one row each (columns `CSV_FIELDS`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        for p in points:
            writer.writerow(csv_row(p))
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def point_to_json(p: Point) -> dict[str, Any]:
    out = asdict(p)
    out["gbps"] = p.gbps
    return out


def point_from_json(data: dict[str, Any]) -> Point:
    fields = {k: v for k, v in data.items() if k != "gbps"}
    stats = fields.pop("stats")
    return Point(**fields, stats=None if stats is None else Stats(**stats))


def write_json(result: BenchResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"target": result.target, "nranks": result.nranks, "info": result.info,
            "errors": result.errors, "points": [point_to_json(p) for p in result.points]}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def read_json(path: Path) -> BenchResult:
    data = json.loads(path.read_text(encoding="utf-8"))
    return BenchResult(data["target"], data["nranks"],
                       [point_from_json(p) for p in data["points"]], data.get("info", {}),
                       data.get("errors", []))


__all__ = ["CSV_FIELDS", "IMPLS", "BenchResult", "Point", "Stats", "csv_row", "percentile",
           "point_from_json", "point_to_json", "read_csv", "read_json", "slowest", "stats_of",
           "write_csv", "write_json"]
