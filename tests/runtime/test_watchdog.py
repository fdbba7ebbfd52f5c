"""ccogen.rt.watchdog and the launcher's use of it (issue 31), without a GPU: phases and
their limits, the injected stall, bounded calls, and `spawn_ranks` stopping a rank that stays
in one phase (a stalled bootstrap) with a message naming the rank and the phase."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ccogen.rt.launch import spawn_ranks
from ccogen.rt.report import RankResult, RunReport
from ccogen.rt.session import phase_file
from ccogen.rt.watchdog import (
    FAULT_ENV,
    STARTUP_S,
    Phase,
    StallError,
    bounded,
    fault_stall,
    read_phase,
    stalled,
    write_phase,
)


def test_a_phase_reads_back_with_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "rank0.phase"
    assert read_phase(path) is None
    write_phase(path, "nvshmem engine bootstrap", 7.5)
    got = read_phase(path)
    assert got is not None and (got.text, got.limit_s) == ("nvshmem engine bootstrap", 7.5)
    write_phase(path, "epoch 3: kernels")
    got = read_phase(path)
    assert got is not None and (got.text, got.limit_s) == ("epoch 3: kernels", None)
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.phase"]  # no temporary left


def test_a_rank_stalls_past_its_phase_limit_and_the_margin() -> None:
    phase = Phase("host barrier after the heap allocation", None, since=100.0)
    assert stalled(phase, 0.0, watchdog_s=20, margin_s=10, now=129.0) is None
    assert stalled(phase, 0.0, watchdog_s=20, margin_s=10, now=131.0) == (
        "host barrier after the heap allocation", 31.0, 20)
    own = Phase("nvshmem engine bootstrap", 60.0, since=100.0)  # a limit of its own
    assert stalled(own, 0.0, watchdog_s=20, margin_s=10, now=131.0) is None
    assert stalled(own, 0.0, watchdog_s=20, margin_s=10, now=171.0) is not None
    # no phase yet: `starting` since the launcher started the processes, for a minute
    # at least (imports on a loaded machine)
    assert stalled(None, 50.0, watchdog_s=20, margin_s=10, now=81.0) is None
    assert stalled(None, 50.0, watchdog_s=20, margin_s=10, now=50.0 + STARTUP_S + 11) == (
        "starting", STARTUP_S + 11, STARTUP_S)


def test_the_injected_stall_names_a_rank_and_a_phase_prefix() -> None:
    env = {FAULT_ENV: "2:epoch 0: kernels, 1:nvshmem engine"}
    assert fault_stall(2, "epoch 0: kernels", env)
    assert not fault_stall(2, "epoch 1: kernels", env)
    assert fault_stall(1, "nvshmem engine bootstrap", env)
    assert not fault_stall(0, "nvshmem engine bootstrap", env)
    assert not fault_stall(0, "anything", {})


def test_a_bounded_call_returns_raises_or_stalls() -> None:
    assert bounded(lambda: 41 + 1, 5.0, "a sum") == 42

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        bounded(boom, 5.0, "a failure")
    release = threading.Event()
    with pytest.raises(StallError, match=r"rank 1: the nvshmem engine bootstrap did not "
                                         r"finish within 0.05 s"):
        bounded(release.wait, 0.05, "rank 1: the nvshmem engine bootstrap")
    release.set()


def test_the_report_names_the_kernel_and_the_ranks_that_had_not_finished() -> None:
    ranks = [RankResult(0, 0, error="rank 0, epoch 0: kernel `exchange` did not finish",
                        unfinished="exchange"),
             RankResult(1, 0, error="rank 1 stalled: 16 s in `epoch 0: kernels`"),
             RankResult(2, 0, error="rank 2, epoch 0: kernel `exchange` did not finish",
                        unfinished="exchange")]
    text = RunReport("halo2d", "nvshmem", 3, 5, ranks).format()
    assert ("kernels that had not finished: `exchange` on ranks 0, 2 (rank 1 stopped before "
            "or after it: see below)") in text


# ------------------------------------------------------------------ the launcher, no GPU

@dataclass(frozen=True)
class _Config:
    nranks: int
    shared_dir: str
    watchdog_s: float = 1.0
    init_timeout_s: float = 1.0
    iters: int = 1


def _rank_main(config: _Config, rank: int, results: Any) -> None:
    """Rank 1 enters its bootstrap and never leaves it; rank 0 reports at once."""
    if rank == 1:
        write_phase(phase_file(config.shared_dir, rank), "nvshmem engine bootstrap", 0.5)
        threading.Event().wait()
    results.put(RankResult(rank, rank, epochs=1))
    results.close()
    results.join_thread()
    os._exit(0)


def test_the_launcher_stops_a_rank_stalled_in_its_bootstrap(tmp_path: Path) -> None:
    config = _Config(2, str(tmp_path))
    got = spawn_ranks(config, main=_rank_main, deadline_s=600.0, margin_s=0.5)
    assert got[0].ok
    assert got[1].error is not None
    assert got[1].error.startswith("rank 1 stalled: ")
    assert "in `nvshmem engine bootstrap`, past its limit of 0.5 s" in got[1].error
    assert "rank 1 was at: nvshmem engine bootstrap" in got[1].error
