"""Rank placement, MPS detection and the residency rule (ccogen.rt.placement), no GPU."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ccogen.errors import NotEnoughGpusError
from ccogen.manifest import load_manifest
from ccogen.rt.placement import (
    ENGINE_CTAS,
    Footprint,
    MpsStatus,
    Placement,
    detect_mps,
    place,
    residency_problem,
    shared_budget,
)

from .conftest import DATA

MPS = MpsStatus(True, "test", 100.0)


def _fake_control(tmp_path: Path, reply: str, code: int = 0) -> dict[str, str]:
    """PATH with an `nvidia-cuda-mps-control` that answers `reply` (exit `code`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-cuda-mps-control"
    tool.write_text(f"#!/bin/sh\ncat > {tmp_path}/asked\nprintf '{reply}'\nexit {code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin",
            "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "pipes")}


def test_mps_is_detected_by_asking_the_daemon(tmp_path: Path) -> None:
    env = _fake_control(tmp_path, "100.0\\n")
    status = detect_mps(env)
    assert status.running and status.default_percentage == 100.0
    assert (tmp_path / "asked").read_text() == "get_default_active_thread_percentage\n"


def test_a_daemon_that_does_not_answer_is_no_mps(tmp_path: Path) -> None:
    env = _fake_control(tmp_path, "", code=1)
    status = detect_mps(env)
    assert not status.running and "does not answer" in status.detail


def test_without_the_binary_the_control_pipe_decides(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty"), "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    assert not detect_mps(env).running
    os.mkfifo(tmp_path / "control")
    status = detect_mps(env)
    assert status.running and "control pipe" in status.detail


def test_a_hanging_client_is_no_mps(tmp_path: Path) -> None:
    env = _fake_control(tmp_path, "100.0\\n")

    def hang(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired("nvidia-cuda-mps-control", 10)

    assert not detect_mps(env, run=hang).running


def test_one_gpu_per_rank_when_there_are_enough() -> None:
    p = place(4, "nccl-lsa", gpus=8)
    assert p.devices == (0, 1, 2, 3) and not p.shared and p.describe() == ""


def test_ranks_share_gpus_round_robin_on_nvshmem_under_mps() -> None:
    p = place(8, "nvshmem", gpus=3, sms=132, mps=MPS, env={})
    assert p.devices == (0, 1, 2, 0, 1, 2, 0, 1)
    assert p.per_gpu == 3 and p.shared and p.ranks_on(2) == 2
    assert "functional only" in p.describe() and "timings mean nothing" in p.describe()


def test_nccl_lsa_refuses_to_share_a_gpu() -> None:
    with pytest.raises(NotEnoughGpusError, match=r"^protocol needs 3 GPUs, this machine has 1; "
                       r".*NCCL refuses two ranks of one communicator on one GPU"):
        place(3, "nccl-lsa", gpus=1, mps=MPS, env={})


def test_sharing_without_mps_is_refused_with_the_command_to_start_it() -> None:
    with pytest.raises(NotEnoughGpusError, match=r"need CUDA MPS, which is not running \(no pipe\)"
                       r".*nvidia-cuda-mps-control -d"):
        place(3, "nvshmem", gpus=1, mps=MpsStatus(False, "no pipe"), env={})


@pytest.mark.parametrize(("env", "default"), [({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}, 100.0),
                                              ({}, 33.0)])
def test_capped_mps_clients_are_refused(env: dict[str, str], default: float) -> None:
    with pytest.raises(NotEnoughGpusError, match="must each be able to use every free SM"):
        place(2, "nvshmem", gpus=1, mps=MpsStatus(True, "t", default), env=env)


def test_shared_budget() -> None:
    assert shared_budget(132, 2) == 65
    assert shared_budget(132, 3) == 43
    assert shared_budget(132, 8) == 15
    assert shared_budget(4, 8) == 1  # never below one CTA
    for ranks in range(1, 17):
        budget = shared_budget(132, ranks)
        assert budget == 1 or ranks * (budget + ENGINE_CTAS) <= 132


def _k(grid: int, occupancy: int = 1, name: str = "k", block: int = 512,
       registers: int = 64) -> Footprint:
    return Footprint(name, grid, block, 0, grid > 1, occupancy, registers, 0)


def test_one_rank_per_gpu_needs_the_grid_within_the_reported_occupancy() -> None:
    assert residency_problem([_k(128, 1)], 132, 1) is None
    problem = residency_problem([_k(128, 1)], 100, 1, "GPU 3")
    assert problem is not None
    assert "launches 128 CTAs that must be resident at once" in problem
    assert "GPU 3 holds 100 SMs x 1 = 100" in problem and "--max-ctas 100" in problem
    assert residency_problem([_k(128, 2)], 100, 1) is None


def test_a_kernel_that_fits_nowhere_is_refused() -> None:
    problem = residency_problem([_k(1, 0)], 132, 1)
    assert problem is not None and "does not fit on an SM" in problem


def test_the_issue_20_hang_is_refused_and_the_budget_that_fits_named() -> None:
    """counted_broadcast at 8 MiB, 3 ranks on one H200 under MPS: 128 CTAs of 512 threads
    each, two per SM: 3 x 129 > 264 (it hung in its second launch)."""
    problem = residency_problem([_k(128, 2)], 132, 3, "GPU 0")
    assert problem is not None
    assert "3 ranks share GPU 0" in problem
    assert "3 ranks x (128 CTAs + 1 for the engine) = 387" in problem
    assert "--max-ctas 87 or less" in problem  # 3 x (87 + 1) = 264
    assert residency_problem([_k(87, 2)], 132, 3) is None
    assert residency_problem([_k(88, 2)], 132, 3) is not None
    assert residency_problem([_k(128, 2)], 132, 2) is None  # 2 x 129 <= 264: it passed


def test_kernels_of_different_footprints_count_one_cta_per_sm() -> None:
    mixed = [_k(40, 4, "a", block=512), _k(40, 4, "b", block=256)]
    problem = residency_problem(mixed, 132, 4)
    assert problem is not None and "the kernels differ in footprint" in problem
    assert residency_problem([_k(40, 4, "a"), _k(40, 4, "b")], 132, 4) is None  # one footprint
    assert residency_problem([_k(32, 4, "a", block=512), _k(32, 4, "b", block=256)], 132, 4) is None


def test_too_many_ranks_for_one_gpu() -> None:
    problem = residency_problem([_k(1, 1)], 4, 3)
    assert problem is not None and "put fewer ranks on a GPU" in problem


def test_manifest_records_the_budget_and_the_header(tmp_path: Path) -> None:
    data = json.loads((DATA / "nccl_putsig" / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps(
        {**data, "max_ctas": 24, "headers": ["ccogen_device.cuh"]}))
    m = load_manifest(tmp_path)
    assert m.max_ctas == 24 and m.header_paths == (tmp_path / "ccogen_device.cuh",)
    assert load_manifest(DATA / "nccl_putsig").max_ctas is None
    from ccogen.errors import ManifestError

    for bad in ({"max_ctas": 0}, {"headers": ["../x.cuh"]}, {"headers": [3]}):
        (tmp_path / "manifest.json").write_text(json.dumps({**data, **bad}))
        with pytest.raises(ManifestError):
            load_manifest(tmp_path)


def test_run_picks_the_shared_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.rt import api, placement

    monkeypatch.setattr(placement, "device_count", lambda: 1)
    monkeypatch.setattr(placement, "fewest_sms", lambda gpus: 132)
    monkeypatch.setattr(placement, "detect_mps", lambda env=None: MPS)
    monkeypatch.delenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", raising=False)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    p, budget = api.placement_and_budget("nvshmem", 8, None)
    assert p == Placement((0,) * 8, 132, MPS) and budget == 15
    assert api.placement_and_budget("nvshmem", 3, None)[1] == 32  # the default fits: 3 x 33
    assert api.placement_and_budget("nvshmem", 3, 100)[1] == 100  # asked for: checked later
    assert api.placement_and_budget("nccl-lsa", 3, None) == (None, None)  # refused by the run
