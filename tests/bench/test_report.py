"""Tables, CSV, JSON and plots from a synthetic result set (no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.bench.report import (
    COLUMNS,
    file_stem,
    fit_line,
    floors_report,
    full_report,
    slope_of,
    sweep_report,
    table_rows,
    write_outputs,
)
from ccogen.bench.results import (
    CSV_FIELDS,
    percentile,
    read_csv,
    read_json,
    slowest,
    stats_of,
    write_csv,
)
from tests.bench.synthetic import MIB, point, synthetic


def test_statistics() -> None:
    s = stats_of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s is not None and (s.n, s.median, s.minimum, s.maximum) == (5, 3.0, 1.0, 5.0)
    assert s.p10 == pytest.approx(1.4) and s.p90 == pytest.approx(4.6)
    assert stats_of([]) is None
    assert percentile([1.0], 0.5) == 1.0
    worst = slowest([[1.0, 1.0, 1.0], [2.0, 2.5, 3.0], []])
    assert worst is not None and worst.median == 2.5


def test_bandwidth_is_bytes_per_direction_over_the_median() -> None:
    p = point("alltoall:block", "generated", MIB, 10.0, MIB)
    assert p.gbps == pytest.approx(MIB / 10e-6 / 1e9)
    assert point("alltoall:block", "generated", 0, 10.0, 0).gbps is None
    assert p.value_text() == "1MiB"


def test_table_rows_line_up_the_implementations() -> None:
    rows = table_rows(synthetic(), "alltoall:block", "ce-bidir")
    assert [r[0] for r in rows] == ["8B", "1MiB", "256MiB"]
    first = dict(zip(COLUMNS, rows[0], strict=True))
    assert first["gen us"] == "6.00" and first["ref us"] == "5.90"
    assert first["gen/ref"] == "1.017" and first["NCCL us"] == "40.00"
    assert first["NCCL/gen"] == "6.67"
    last = dict(zip(COLUMNS, rows[-1], strict=True))
    ceiling = 385 * 256 * MIB / (256 * MIB + 2 * 385e3)  # GB/s of the synthetic ce-bidir
    assert float(last["gen/ceil"]) == pytest.approx(370 / ceiling, rel=1e-2)


def test_failed_verification_shows_and_is_explained() -> None:
    text = sweep_report(synthetic(), "ring_allgather:chunk")
    assert "FAIL" in text
    assert "reference at 16B: ensure FAILED; 1 ensure comparison(s) failed" in text


def test_int_sweeps_report_the_slope_and_the_in_kernel_latency() -> None:
    text = sweep_report(synthetic(), "pingpong:rounds")
    assert "generated: 1.600 us per unit of `rounds`" in text
    assert "reference: 1.500 us per unit of `rounds`" in text
    assert "measured in-kernel (%globaltimer, one way, us): 1: 0.700" in text
    fit = slope_of(synthetic().of("pingpong:rounds", "generated"))
    assert fit is not None
    assert fit.slope == pytest.approx(1.6) and fit.intercept == pytest.approx(5.0)


def test_fit_line() -> None:
    fit = fit_line([1, 2, 3], [3, 5, 7])
    assert fit is not None and (fit.slope, fit.intercept) == (pytest.approx(2), pytest.approx(1))
    assert fit_line([1, 1], [2, 3]) is None and fit_line([1], [1]) is None


def test_floors_line() -> None:
    assert floors_report(synthetic()) == ("back-to-back empty kernel through the runtime: "
                                          "stream 4.20 us, graph 1.20 us")


def test_csv_has_one_row_per_point(tmp_path: Path) -> None:
    result = synthetic()
    path = write_csv(result.points, tmp_path / "all.csv")
    rows = read_csv(path)
    assert len(rows) == len(result.points)
    assert tuple(rows[0]) == CSV_FIELDS
    gen8 = next(r for r in rows if r["impl"] == "generated" and r["value"] == "8"
                and r["sweep"] == "alltoall:block")
    assert gen8["median_us"] == "6.000" and gen8["verified"] == "yes"
    assert gen8["value_text"] == "8B" and gen8["mode"] == "graph" and gen8["samples"] == "5"
    ref = next(r for r in rows if r["sweep"] == "ring_allgather:chunk" and r["impl"] == "reference")
    assert ref["verified"] == "no" and "failed" in ref["note"]
    ce = next(r for r in rows if r["impl"] == "ce")
    assert ce["verified"] == "" and float(ce["gbps"]) > 0


def test_outputs_and_json_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = synthetic()
    files = write_outputs(result, tmp_path)
    names = {f.name for f in files}
    for sweep in result.sweeps():
        stem = file_stem(result, sweep)
        assert {f"{stem}.csv", f"{stem}.txt", f"{stem}.png"} <= names
        assert (tmp_path / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "alltoall-block-nccl-lsa.png" in names and "results.csv" in names
    back = read_json(tmp_path / "results.json")
    assert back.points == result.points and back.info == result.info
    assert "back-to-back empty kernel" in (tmp_path / "alltoall-block-nccl-lsa.txt").read_text()


def test_without_matplotlib_the_rest_is_written(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import ccogen.bench.plot as plot

    def missing() -> None:
        raise plot.PlotUnavailable("no plot written: matplotlib is not installed")

    monkeypatch.setattr(plot, "_pyplot", missing)
    result = synthetic()
    files = write_outputs(result, tmp_path)
    assert not any(f.suffix == ".png" for f in files)
    assert any("matplotlib is not installed" in e for e in result.errors)
    assert "note: no plot written" in full_report(result)
