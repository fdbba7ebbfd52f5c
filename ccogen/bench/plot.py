"""The plot of one sweep (matplotlib, Agg backend, PNG): time per epoch against the swept
value, and for byte sweeps the per-direction bandwidth beside it; both x axes log-scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccogen.bench.results import BenchResult, Point

STYLE = {  # impl -> (label, matplotlib format)
    "generated": ("generated", "o-"),
    "reference": ("hand-written reference", "s--"),
    "nccl": ("NCCL via torch.distributed", "^-."),
    "ce": ("copy engine, one way", "k:"),
    "ce-bidir": ("copy engine, both ways", "k-"),
    "sm-copy": ("SM store copy, one way", "c:"),
    "sm-copy-bidir": ("SM store copy, both ways", "c-"),
}


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed: the tables and CSV are written, the plot is not."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("no plot written: matplotlib is not installed "
                              "(pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(points: list[Point], impl: str, bandwidth: bool) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for p in sorted((p for p in points if p.impl == impl and p.ok), key=lambda p: p.value):
        y = p.gbps if bandwidth else p.median_us
        if y is not None and y > 0 and p.value > 0:
            xs.append(p.value)
            ys.append(y)
    return xs, ys


def write_plot(result: BenchResult, sweep: str, path: Path) -> Path:
    """Write the PNG of one sweep; raises PlotUnavailable without matplotlib."""
    plt = _pyplot()
    points = result.of(sweep)
    if not points:
        raise ValueError(f"no points in sweep {sweep!r}")
    first = points[0]
    panels = 2 if first.is_bytes else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.6), squeeze=False)
    unit = "bytes" if first.is_bytes else ""
    for col, bandwidth in enumerate([False, True][:panels]):
        ax = axes[0][col]
        for impl, (label, fmt) in STYLE.items():
            if bandwidth is False and impl.startswith(("ce", "sm-copy")):
                continue  # time panel: the implementations only
            xs, ys = _series(points, impl, bandwidth)
            if xs:
                ax.plot(xs, ys, fmt, label=label, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"{first.param} ({unit})" if unit else first.param)
        ax.set_ylabel("GB/s per direction" if bandwidth else "time per epoch (us, median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{first.protocol} on {result.target}, {result.nranks} ranks", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["STYLE", "PlotUnavailable", "write_plot"]
