"""`ccogen bench` of a run-time protocol on one GPU shared by 2 NVSHMEM ranks (CUDA MPS).

Functional only (the times of ranks sharing a GPU mean nothing): alltoallv's generated and
reference kernels, verified on contents drawn to satisfy `require`, timed on them
without a refill, verified again, and the table names the contents.  Skipped without a
GPU, without MPS running or without the nvshmem toolchain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen import cli
from ccogen.bench.results import read_csv
from tests.runtime.conftest import mps_nvshmem  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("mps_nvshmem")


@pytest.mark.gpu
@pytest.mark.parametrize("contents", ["high", "interior"])
def test_alltoallv_on_drawn_contents(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     contents: str) -> None:
    code = cli.main(["bench", str(ROOT / "protocols" / "alltoallv.cco"), "--target", "nvshmem",
                     "--ranks", "2", "--sweep", "cap=4096", "--contents", contents,
                     "--iters", "5", "--warmup", "1", "--epochs-per-graph", "2", "--no-plot",
                     "-o", str(tmp_path)])
    printed, err = capsys.readouterr()
    print(printed, err)
    assert code == 0, printed + err
    assert f"contents timed: {contents}" in printed.splitlines()[0]
    rows = {r["impl"]: r for r in read_csv(tmp_path / "results.csv")}
    for impl in ("generated", "reference"):
        assert rows[impl]["verified"] == "yes" and float(rows[impl]["median_us"]) > 0
