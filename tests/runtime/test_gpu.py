"""End to end on 2 GPUs: hand-written put+signal kernels following docs/runtime-abi.md,
100 epochs each with `ensure`-like checks, and the debug-build hang report.

Auto-skipped without a GPU (tests/conftest.py); skipped with fewer than 2 GPUs.
Run on the device machine with scripts/gpu_runtime_check.sh.
"""

from __future__ import annotations

import time

import pytest

from ccogen.rt import native, run_manifest
from ccogen.rt.data import CheckSpec, RegionSpec

from .conftest import DATA, require_toolchain

PREFIX = {"nccl-lsa": "nccl", "nvshmem": "nvshmem"}
SIZE = 1 << 20


@pytest.fixture(autouse=True)
def _two_gpus() -> None:
    if native.device_count() < 2:
        pytest.skip("needs 2 GPUs")


def _putsig_checks(with_wrong: bool) -> list[CheckSpec]:
    checks = []
    for r in (0, 1):
        # ensure: dst == init(src@peer)   (this rank's final window vs the peer's initial)
        checks.append(CheckSpec(r, "==", RegionSpec("dst", 0, SIZE, r, False),
                                RegionSpec("src", 0, SIZE, 1 - r, True), "putsig.cco:14",
                                "dst == init(src@peer)"))
    # a final window of ANOTHER rank: rank 0 reads rank 1's dst (exchanged between ranks)
    checks.append(CheckSpec(0, "==", RegionSpec("dst", 0, SIZE, 1, False),
                            RegionSpec("src", 0, SIZE, 0, True), "putsig.cco:15",
                            "dst@1 == init(src@0)"))
    if with_wrong:  # must fail every epoch: the runtime has to notice
        checks.append(CheckSpec(1, "==", RegionSpec("dst", 4096, 8192, 1, False),
                                RegionSpec("src", 4096, 8192, 1, True), "putsig.cco:16",
                                "dst[4096:8192] == init(src)[4096:8192]"))
    return checks


@pytest.mark.gpu
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_putsig_100_epochs(target: str) -> None:
    require_toolchain(target)
    report = run_manifest(DATA / f"{PREFIX[target]}_putsig", checks=_putsig_checks(True),
                          iters=100, seed=1234)
    print(report.format())
    for r in report.ranks:
        assert r.error is None and r.wait is None, report.format()
        assert r.epochs == 100 and len(r.times_ms) == 100
    assert report.ranks[0].failure_count == 0, report.format()
    # only the deliberately wrong comparison fails, in every epoch, with its byte range
    assert report.ranks[1].failure_count == 100
    assert {f.location for f in report.failures} == {"putsig.cco:16"}
    assert "first at dst@1[4096:8192] bytes [4096:" in report.failures[0].detail
    assert report.ranks[0].checks_per_epoch == 2 and report.ranks[1].checks_per_epoch == 2
    assert 0 < report.median_ms < 50


@pytest.mark.gpu
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_debug_hang_names_the_wait(target: str) -> None:
    require_toolchain(target)
    start = time.monotonic()
    report = run_manifest(DATA / f"{PREFIX[target]}_hang", iters=2, debug=True, watchdog_s=30)
    elapsed = time.monotonic() - start
    print(report.format(), f"\n({elapsed:.1f} s)")
    assert not report.ok
    waits = [r.wait for r in report.ranks if r.wait is not None]
    assert waits, report.format()
    expected = {f"rank {r}: wait at hang.cco:7 for (src {1 - r}, queue 0) expected 1, "
                "observed 0 (epoch 0)" for r in (0, 1)}
    assert set(waits) <= expected
    assert elapsed < 30  # the device timeout (~2 s) fires long before the watchdog


@pytest.mark.gpu
def test_watchdog_stops_a_hang_without_debug() -> None:
    require_toolchain("nccl-lsa")
    start = time.monotonic()
    report = run_manifest(DATA / "nccl_hang", iters=1, debug=False, watchdog_s=5,
                          init_timeout_s=30)
    elapsed = time.monotonic() - start
    print(report.format(), f"\n({elapsed:.1f} s)")
    assert not report.ok
    assert any("did not finish within 5 s" in (r.error or "") and "--debug" in (r.error or "")
               for r in report.ranks), report.format()
    assert elapsed < 60
