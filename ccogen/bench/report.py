"""Text tables, linear fits and output files of a benchmark run.

For each sweep: `<protocol>-<param>-<target>.csv` (every point), `.txt` (the table) and
`.png` (time and per-direction bandwidth against the swept value, log-scale x), plus
`results.json` and `results.csv` for the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccogen.bench.results import BenchResult, Point, write_csv, write_json

COLUMNS = ("value", "B/dir", "gen us", "gen GB/s", "ref us", "gen/ref", "NCCL us",
           "NCCL GB/s", "NCCL/gen", "ceil GB/s", "gen/ceil")


@dataclass(frozen=True)
class Fit:
    """time = intercept + slope * value, least squares."""

    intercept: float
    slope: float
    points: int


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Fit | None:
    """Least-squares line through (x, y); None with fewer than 2 distinct x."""
    n = len(xs)
    if n != len(ys) or n < 2 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return Fit(my - slope * mx, slope, n)


def slope_of(points: Sequence[Point]) -> Fit | None:
    """Fit of median time against the swept value, over the points that have a time."""
    timed = [p for p in points if p.ok and p.median_us is not None]
    return fit_line([float(p.value) for p in timed], [float(p.median_us) for p in timed])  # type: ignore[arg-type]


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if 0 < abs(value) < 0.1:
        return f"{value:.2g}"
    return f"{value:.{digits}f}"


def _time(p: Point | None) -> str:
    if p is None:
        return "-"
    if p.verified is False:
        return "FAIL"
    return _fmt(p.median_us)


def _ratio(a: float | None, b: float | None, digits: int = 3) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.{digits}f}"


def table_rows(result: BenchResult, sweep: str, ceiling: str) -> list[list[str]]:
    """One row per swept value (see COLUMNS)."""
    rows = []
    for g in sorted(result.of(sweep), key=lambda p: p.value):
        if g.impl != "generated":
            continue
        ref = result.find(sweep, "reference", g.value)
        nccl = result.find(sweep, "nccl", g.value)
        ceil = result.find(sweep, ceiling, g.value)
        gen_t = g.median_us if g.ok else None
        rows.append([
            g.value_text(), str(g.link_bytes), _time(g), _fmt(g.gbps if g.ok else None),
            _time(ref),
            _ratio(gen_t, ref.median_us if ref is not None and ref.ok else None),
            _time(nccl), _fmt(nccl.gbps if nccl is not None else None),
            _ratio(nccl.median_us if nccl is not None and nccl.ok else None, gen_t, 2),
            _fmt(ceil.gbps if ceil is not None else None),
            _ratio(g.gbps if g.ok else None, ceil.gbps if ceil is not None else None),
        ])
    return rows


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def sweep_report(result: BenchResult, sweep: str) -> str:
    """The table of one sweep with its notes (fits, in-kernel latency, failures)."""
    ceiling = ceiling_of(result, sweep)
    points = result.of(sweep)
    if not points:
        return f"{sweep}: no points"
    first = points[0]
    head = (f"{first.protocol} on {result.target}, {result.nranks} ranks: sweep of "
            f"`{first.param}`; median time per epoch (us), GB/s per direction "
            f"(bytes of the busiest link / time); ceiling = {ceiling}")
    contents = result.info.get("contents", {}).get(sweep)
    if contents:  # run-time values: what the verified and the timed epochs read
        head += f"; contents timed: {contents}"
    lines = [head, format_table(COLUMNS, table_rows(result, sweep, ceiling))]
    if not first.is_bytes:
        for impl in ("generated", "reference"):
            fit = slope_of(result.of(sweep, impl))
            if fit is not None:
                lines.append(f"  {impl}: {fit.slope:.3f} us per unit of `{first.param}` "
                             f"(+ {fit.intercept:.2f} us), least squares over {fit.points} "
                             "points")
    kernel = [p for p in result.of(sweep, "reference") if p.in_kernel_us is not None]
    if kernel:
        text = ", ".join(f"{p.value_text()}: {p.in_kernel_us:.3f}" for p in kernel)
        lines.append(f"  reference, measured in-kernel (%globaltimer, one way, us): {text}")
    for p in points:
        if p.verified is False or p.note:
            lines.append(f"  {p.impl} at {p.value_text()}: "
                         f"{'ensure FAILED; ' if p.verified is False else ''}{p.note}")
    return "\n".join(lines)


def floors_report(result: BenchResult) -> str:
    floors = [p for p in result.points if p.sweep == "floors"]
    if not floors:
        return ""
    text = ", ".join(f"{p.mode} {_fmt(p.median_us)} us" for p in floors)
    return f"back-to-back empty kernel through the runtime: {text}"


def ceiling_of(result: BenchResult, sweep: str) -> str:
    """The ceiling implementation shown for a sweep: both-ways copies for bidirectional
    traffic, one-way otherwise (`info['ceiling']`, set by the runner)."""
    return str(result.info.get("ceiling", {}).get(sweep, "ce"))


def file_stem(result: BenchResult, sweep: str) -> str:
    protocol, _, param = sweep.partition(":")
    return f"{protocol}-{param}-{result.target}"


def write_outputs(result: BenchResult, out_dir: Path, *, plot: bool = True) -> list[Path]:
    """Tables, CSVs, plots and results.json into out_dir; returns the files written.
    A missing matplotlib skips the plots (noted in result.errors)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_csv(result.points, out_dir / "results.csv")]
    for sweep in result.sweeps():
        stem = file_stem(result, sweep)
        written.append(write_csv(result.of(sweep), out_dir / f"{stem}.csv"))
        text = sweep_report(result, sweep)
        floors = floors_report(result)
        (out_dir / f"{stem}.txt").write_text(text + ("\n" + floors if floors else "") + "\n",
                                             encoding="utf-8")
        written.append(out_dir / f"{stem}.txt")
        if plot:
            from ccogen.bench.plot import PlotUnavailable, write_plot

            try:
                written.append(write_plot(result, sweep, out_dir / f"{stem}.png"))
            except PlotUnavailable as exc:
                if str(exc) not in result.errors:
                    result.errors.append(str(exc))
    written.append(write_json(result, out_dir / "results.json"))
    return written


def full_report(result: BenchResult) -> str:
    parts = [sweep_report(result, s) for s in result.sweeps()]
    floors = floors_report(result)
    if floors:
        parts.append(floors)
    parts += [f"note: {e}" for e in result.errors]
    return "\n\n".join(parts)


__all__ = ["COLUMNS", "Fit", "ceiling_of", "file_stem", "fit_line", "floors_report",
           "format_table", "full_report", "slope_of", "sweep_report", "table_rows",
           "write_outputs"]
