"""One rank's session and `ccogen run`'s rank on the CPU, with a fake driver and engine.

`ccogen.rt.session.RankSession` sets up what both `ccogen run` and `ccogen bench` need
(context, engine, zeroed heap, device communicator, stream); the benchmark side is covered
by tests/bench/test_worker.py.  Here: `run_rank` end to end on the fakes (set-up once,
every epoch, the kernel arguments the manifest asks for, teardown), the engine bootstrap
with its rendezvous and heap variable, and what a rank reports for an exception.
"""

from __future__ import annotations

import struct
import types
from pathlib import Path
from typing import Any

import pytest

from ccogen.errors import ToolchainError
from ccogen.manifest import load_manifest
from ccogen.rt import launch, session
from ccogen.rt.data import CheckFailure
from ccogen.rt.launch import RunConfig, run_rank
from ccogen.rt.report import RankResult

from .conftest import DATA
from .fakes import BASE, FakeEngine, fake_runtime, install


def _config(tmp_path: Path, name: str, iters: int = 3) -> RunConfig:
    cubin = tmp_path / "fake.cubin"
    cubin.write_bytes(b"\0")
    return RunConfig(str(DATA / name), 2, iters, 0, False, str(cubin), "fake-engine.so", (),
                     rendezvous_dir=str(tmp_path), shared_dir=str(tmp_path))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, iters: int = 3,
         **fake: Any) -> tuple[RankResult, Any, FakeEngine]:
    rt = fake_runtime(load_manifest(DATA / name).heap_size, **fake)
    engine = FakeEngine()
    install(monkeypatch, rt, engine)
    hung: list[Any] = []
    result = run_rank(_config(tmp_path, name, iters), 0, 0, None, hung.append)
    assert not hung
    return result, rt, engine


def test_run_rank_sets_up_once_and_runs_every_epoch(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    result, rt, engine = _run(tmp_path, monkeypatch, "nccl_putsig")
    assert result.ok, result.error
    assert (result.epochs, len(result.times_ms)) == (3, 3)
    assert result.library == "NCCL 0.0 (fake)"
    assert rt.executed == ["putsig"] * 3
    # the device communicator with the manifest's LSA barriers, made once
    assert engine.devcomm_barriers == [load_manifest(DATA / "nccl_putsig").lsa_barrier_count]
    # one barrier after the heap is zeroed, two per epoch (before and after the kernels)
    assert engine.barriers == 1 + 2 * 3
    assert engine.modules == 0 and engine.finalized
    assert (tmp_path / "rank0.phase").read_text() == "done"
    # the arguments, in the kinds and order the manifest lists
    for epoch, arguments in enumerate(rt.arguments):
        assert arguments == [("devcomm", bytes(200)), ("window", struct.pack("<Q", 7)),
                             ("epoch", struct.pack("<Q", epoch)),
                             ("debug", struct.pack("<Q", 0))]


def test_windows_are_filled_each_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.rt.data import initial_bytes

    _, rt, _ = _run(tmp_path, monkeypatch, "nvshmem_putsig", iters=2)
    manifest = load_manifest(DATA / "nvshmem_putsig")
    for w in manifest.windows:  # what the last epoch wrote
        expected = initial_bytes(0, 1, 0, w.name, w.size).tobytes()
        assert bytes(rt.memory[w.offset:w.offset + w.size]) == expected


def test_a_kernel_without_devcomm_gets_none(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    result, rt, engine = _run(tmp_path, monkeypatch, "nvshmem_putsig", iters=1)
    assert result.ok and engine.devcomm_barriers == []
    assert [kind for kind, _ in rt.arguments[0]] == ["heap", "epoch", "debug"]
    assert rt.arguments[0][0] == ("heap", struct.pack("<Q", BASE))


def test_failed_checks_are_reported_and_the_rank_abandoned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failure = CheckFailure(0, 0, "putsig.cco:9", "dst == src", "8 of 8 bytes differ")
    monkeypatch.setattr(launch, "evaluate", lambda checks, read, epoch: [failure])
    monkeypatch.setattr(session, "_ABANDONED", [])
    result, _, _ = _run(tmp_path, monkeypatch, "nccl_putsig", iters=2)
    assert not result.ok and result.failure_count == 2 and result.epochs == 2
    assert len(session._ABANDONED) == 1  # its driver objects are never freed


def test_a_hang_stops_the_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "_ABANDONED", [])
    result, _, engine = _run(tmp_path, monkeypatch, "nccl_putsig", hang_after=1)
    assert result.error is not None
    # the kernel whose completion event had not fired is named (release builds)
    assert "epoch 1: kernel `putsig` did not finish within 30 s" in result.error
    assert result.unfinished == "putsig"
    assert "rerun with --debug" in result.error
    assert result.epochs == 1 and not engine.finalized
    assert (tmp_path / "rank0.phase").read_text() == "epoch 1: kernels"
    assert len(session._ABANDONED) == 1


class _Rendezvous:
    def __init__(self, uid: bytes = b"") -> None:
        self.published: list[bytes] = []
        self.uid = uid

    def publish(self, uid: bytes) -> None:
        self.published.append(uid)

    def fetch(self, size: int, timeout_s: float) -> bytes:
        assert size == 128
        return self.uid


class _Shim:
    """The real Engine's surface that the bootstrap uses."""

    def __init__(self, target: str, path: Path, library: Any) -> None:
        self.target, self.path, self.library = target, path, library
        self.lib = types.SimpleNamespace(ccogen_unique_id_size=lambda: 128)
        self.inits: list[tuple[int, int, int, bytes]] = []

    def unique_id(self) -> bytes:
        return b"u" * 128

    def init(self, rank: int, nranks: int, device: int, uid: bytes) -> None:
        self.inits.append((rank, nranks, device, uid))


def _bootstrap(monkeypatch: pytest.MonkeyPatch, target: str, rank: int, heap_size: int,
               rendezvous: _Rendezvous) -> tuple[_Shim, RankResult]:
    from ccogen.rt import engines
    from ccogen.toolchains import libraries as toolchain

    library = types.SimpleNamespace(describe=lambda: f"{target} library (fake)")
    monkeypatch.setattr(engines, "Engine", _Shim)
    monkeypatch.setattr(toolchain, "find_library", lambda name: library)
    monkeypatch.delenv("NVSHMEM_SYMMETRIC_SIZE", raising=False)
    s = session.RankSession(target=target, engine_path="/x/libccogen_engine.so", rank=rank,
                            nranks=2, device=rank, rendezvous=rendezvous, shared_dir="/nonexistent",
                            init_timeout_s=5.0)
    s.ctx = types.SimpleNamespace(make_current=lambda: None)
    s.heap_size = heap_size
    report = RankResult(rank, rank)
    engine = s._bootstrap(report)
    assert isinstance(engine, _Shim)
    return engine, report


def test_bootstrap_exchanges_the_unique_id(monkeypatch: pytest.MonkeyPatch) -> None:
    first = _Rendezvous()
    engine, report = _bootstrap(monkeypatch, "nccl-lsa", 0, 1 << 20, first)
    assert first.published == [b"u" * 128]
    assert engine.inits == [(0, 2, 0, b"u" * 128)] and engine.target == "nccl-lsa"
    assert report.library == "nccl-lsa library (fake)"
    second = _Rendezvous(b"v" * 128)
    engine, _ = _bootstrap(monkeypatch, "nccl-lsa", 1, 1 << 20, second)
    assert second.published == [] and engine.inits == [(1, 2, 1, b"v" * 128)]


def test_bootstrap_sizes_the_nvshmem_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    _bootstrap(monkeypatch, "nvshmem", 0, 1 << 30, _Rendezvous())
    assert os.environ["NVSHMEM_SYMMETRIC_SIZE"] == str(1280 << 20)
    _bootstrap(monkeypatch, "nvshmem", 0, 1 << 20, _Rendezvous())
    assert "NVSHMEM_SYMMETRIC_SIZE" not in os.environ
    _bootstrap(monkeypatch, "nccl-lsa", 0, 1 << 30, _Rendezvous())
    assert "NVSHMEM_SYMMETRIC_SIZE" not in os.environ


def test_bootstrap_refuses_a_target_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ToolchainError, match=r"cannot run target 'mori-sdma': the runtime runs "
                       r"nvshmem, nccl-lsa"):
        _bootstrap(monkeypatch, "mori-sdma", 0, 1 << 20, _Rendezvous())


def test_failure_text(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = fake_runtime(16)
    install(monkeypatch, rt, FakeEngine())
    assert session.failure_text(ToolchainError("nvcc not found")) == "nvcc not found"
    cuda = rt.CudaError("cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS")
    assert session.failure_text(cuda, "rank 1: ") == \
        "rank 1: cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS"
    try:
        raise KeyError("oops")
    except KeyError as exc:
        text = session.failure_text(exc)
    assert text.startswith("internal error: KeyError('oops')\nTraceback")
