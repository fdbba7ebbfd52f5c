"""`ccogen bench` on 2 GPUs: tiny sweeps end to end (auto-skipped without GPUs).

Each run builds, measures the ceilings, verifies an epoch, times with CUDA-graph replay
(small sizes) and without, times NCCL through torch, and writes the table, CSV and plot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen import cli
from ccogen.bench.results import read_csv
from ccogen.rt import native

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _two_gpus() -> None:
    if native.device_count() < 2:
        pytest.skip("needs 2 GPUs")


def bench(capsys: pytest.CaptureFixture[str], out: Path, *argv: str) -> list[dict[str, str]]:
    code = cli.main(["bench", *argv, "--iters", "5", "--warmup", "1", "--epochs-per-graph", "2",
                     "-o", str(out)])
    printed, err = capsys.readouterr()
    print(printed, err)
    assert code == 0, printed + err
    return read_csv(out / "results.csv")


@pytest.mark.gpu
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_alltoall_small_and_large(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  target: str) -> None:
    rows = bench(capsys, tmp_path, str(ROOT / "protocols" / "alltoall.cco"), "--target", target,
                 "--sweep", "block=8B,8MiB", "--graph-max", "1MiB")
    by = {(r["impl"], r["value"]): r for r in rows}
    for impl in ("generated", "reference"):
        small, large = by[(impl, "8")], by[(impl, str(8 << 20))]
        assert small["verified"] == large["verified"] == "yes"
        assert small["mode"] == "graph" and large["mode"] == "stream"
        assert float(small["median_us"]) > 0 and float(large["gbps"]) > 1
    assert ("ce", str(8 << 20)) in by and ("ce-bidir", str(8 << 20)) in by
    assert by[("nccl", "8")]["verified"] == "yes"
    assert (tmp_path / f"alltoall-block-{target}.png").is_file()
    assert (tmp_path / f"alltoall-block-{target}.txt").read_text().startswith("alltoall on")


@pytest.mark.gpu
def test_pingpong_rounds_and_in_kernel_latency(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    rows = bench(capsys, tmp_path, str(ROOT / "protocols" / "pingpong.cco"), "--target",
                 "nccl-lsa", "--sweep", "rounds=1,4,16", "--param", "size=8B", "--no-ceiling")
    refs = [r for r in rows if r["impl"] == "reference"]
    assert len(refs) == 3 and all(r["verified"] == "yes" for r in refs)
    assert all(0 < float(r["in_kernel_us"]) < 20 for r in refs)
    gen = sorted((int(r["value"]), float(r["median_us"])) for r in rows if r["impl"] == "generated")
    assert gen[-1][1] > gen[0][1]  # more rounds take longer
