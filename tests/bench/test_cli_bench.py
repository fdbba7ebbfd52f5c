"""`ccogen bench` on the command line: usage errors (exit 2), set-up errors, --build-only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ccogen import cli
from ccogen.rt.placement import MpsStatus, Placement

ROOT = Path(__file__).resolve().parents[2]
A2A = str(ROOT / "protocols" / "alltoall.cco")
PING = str(ROOT / "protocols" / "pingpong.cco")
ONESHOT = str(ROOT / "protocols" / "allreduce_oneshot.cco")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "message"), [
    ([A2A, "--target", "nccl-lsa", "--sweep", "blk=8B..1MiB"], "has no parameter `blk`"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=1MiB..8B"], "is above"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B..1MiB:x1"], "at least 2"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block"], "--sweep takes PARAM="),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--sweep", "block=16B"],
     "swept twice"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--param", "block=16B"],
     "also fixed with --param"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--param", "block"],
     "--param takes NAME=VALUE"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--iters", "0"],
     "--iters must be at least 1"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--ranks", "0"],
     "--ranks must be at least 1"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--warmup", "-1"],
     "--warmup cannot be negative"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--graph-max", "4MB"],
     "--graph-max 4MB"),
    ([A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--reference", "/no/such/dir"],
     "--reference /no/such/dir: no such directory"),
    (["/no/such.cco", "--target", "nccl-lsa", "--sweep", "block=8B"], "cannot read /no/such.cco"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2, err
    assert err.startswith("error: ") and message in err
    assert out == ""


@pytest.mark.parametrize("argv", [
    [A2A, "--sweep", "block=8B"],                                   # --target is required
    [A2A, "--target", "mori-sdma", "--sweep", "block=8B"],         # not a bench target
    [A2A, "--target", "nccl-lsa"],                                  # --sweep is required
    [A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--compare", "allreduce"],
])
def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run(capsys, *argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ccogen bench: ") and len(err.strip().splitlines()) == 1


def test_without_a_gpu_it_says_so(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.rt import native

    monkeypatch.setattr(native, "device_count", lambda: 0)
    code, _, err = run(capsys, A2A, "--target", "nccl-lsa", "--sweep", "block=8B")
    assert code == 2 and err.startswith("error: no NVIDIA GPU found")


def test_protocol_errors_are_diagnostics(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    code, _, err = run(capsys, PING, "--target", "nccl-lsa", "--ranks", "3",
                       "--sweep", "rounds=1", "--build-only", "-o", str(tmp_path))
    assert code == 1 and "error[" in err  # pingpong is a team of 2


@pytest.mark.toolchain
def test_build_only_generates_and_builds_every_point(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    from tests.runtime.conftest import require_toolchain

    require_toolchain("nccl-lsa")
    code, out, err = run(capsys, A2A, "--target", "nccl-lsa", "--sweep", "block=8B,1MiB",
                         "--build-only", "-o", str(tmp_path))
    assert code == 0, err
    assert "nothing measured" in out
    built = tmp_path / "build" / "nccl-lsa" / "alltoall-block"
    for value in ("8", "1048576"):
        for impl in ("generated", "reference"):
            assert (built / value / impl / "manifest.json").is_file()
    small = json.loads((built / "8" / "reference" / "manifest.json").read_text())
    assert small["kernels"][0]["block"] == 32


def _fake_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: Placement
                  ) -> list[tuple[Any, ...]]:
    """Builds, ceilings, residency and ranks replaced by fakes that answer every case;
    returns the (cases, settings, devices) each run of the ranks was given."""
    from types import SimpleNamespace

    from ccogen.bench import ceiling, runner
    from ccogen.bench.cases import CaseTimes, RankBench
    from ccogen.rt import engines, launch, placement

    monkeypatch.setattr(placement, "place", lambda n, target: where)
    monkeypatch.setattr(placement, "check_residency", lambda m, cubin, p: None)
    monkeypatch.setattr(launch, "device_arch", lambda ordinal: "sm_90")
    library = SimpleNamespace(describe=lambda: "NCCL 2.28.9 (fake)")
    monkeypatch.setattr(engines, "build_engine", lambda target, arch: (tmp_path / "e.so", library))
    monkeypatch.setattr(runner, "build_all", lambda jobs, arch, parallel: (
        {d: tmp_path / "k.cubin" for d, _ in jobs}, {}))
    monkeypatch.setattr(ceiling, "measure_ceilings", lambda spec: ceiling.Ceilings(
        {"ce-bidir": {n: [n / 350e3 + 2] * 3 for n in spec.sizes}}, backend="fake"))
    seen: list[tuple[Any, ...]] = []

    def ranks(cases, compares, settings, engine, devices=()):  # type: ignore[no-untyped-def]
        seen.append((cases, settings, devices))

        def times(key: str, us: float) -> CaseTimes:
            return CaseTimes(key, [us] * 5, mode="graph", verified=True)
        return [RankBench(r, [times(c.key, 5.0 + r) for c in cases]
                          + [times(c.key, 40.0) for c in compares], library="fake")
                for r in range(settings.ranks)]

    monkeypatch.setattr(runner, "_run_ranks", ranks)
    return seen


def test_end_to_end_with_a_fake_machine(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole command on the CPU: builds, ceilings and ranks replaced by fakes that
    answer every case; what is checked is the plumbing from arguments to files."""
    _fake_machine(tmp_path, monkeypatch, Placement((0, 1)))
    code, out, err = run(capsys, A2A, "--target", "nccl-lsa", "--sweep", "block=8B,1MiB",
                         "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert out.startswith("alltoall on nccl-lsa, 2 ranks: sweep of `block`")
    assert "back-to-back empty kernel through the runtime: stream 6.00 us, graph 6.00 us" in out
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"alltoall-block-nccl-lsa.csv", "alltoall-block-nccl-lsa.txt",
            "alltoall-block-nccl-lsa.png", "results.json", "results.csv"} <= files
    from ccogen.bench.results import read_csv

    rows = read_csv(tmp_path / "out" / "alltoall-block-nccl-lsa.csv")
    assert {r["impl"] for r in rows} == {"generated", "reference", "nccl", "ce-bidir"}
    assert all(r["median_us"] for r in rows)


def test_ranks_sharing_a_gpu_are_functional_only(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """2 ranks on one GPU under MPS (nvshmem): the ranks run on device 0 both, the code is
    generated for the shared SM budget, no ceilings, floors or NCCL collectives, and the
    report says the timings mean nothing.  allreduce_oneshot has a local buffer."""
    from ccogen.rt.placement import ENGINE_CTAS

    seen = _fake_machine(tmp_path, monkeypatch,
                         Placement((0, 0), sms=20, mps=MpsStatus(True, "fake")))
    code, out, err = run(capsys, ONESHOT, "--target", "nvshmem", "--sweep", "n=1024,4096",
                         "-o", str(tmp_path / "out"))
    assert code == 0, err
    (cases, settings, devices), = seen
    assert devices == (0, 0)
    assert settings.max_ctas == 20 // 2 - ENGINE_CTAS and not settings.ceiling
    assert [c.key.rsplit("/", 1)[1] for c in cases] == ["generated", "reference"] * 2
    manifest = json.loads((Path(cases[0].manifest_dir) / "manifest.json").read_text())
    assert manifest["max_ctas"] == 20 // 2 - ENGINE_CTAS
    assert [b["name"] for b in manifest["buffers"]] == ["out"]
    assert "2 ranks on 1 GPU under MPS" in out and "functional only" in out
    assert "empty kernel" not in out
    from ccogen.bench.results import read_csv

    rows = read_csv(tmp_path / "out" / "allreduce_oneshot-n-nvshmem.csv")
    assert {r["impl"] for r in rows} == {"generated", "reference"}


def test_an_explicit_sm_budget_is_kept_on_a_shared_gpu() -> None:
    from ccogen.bench.runner import Settings, shared_gpu_settings
    from ccogen.rt.placement import ENGINE_CTAS

    where = Placement((0, 0, 0, 0), sms=132, mps=MpsStatus(True, "fake"))
    assert shared_gpu_settings(Settings("nvshmem", 4, max_ctas=3), where).max_ctas == 3
    chosen = shared_gpu_settings(Settings("nvshmem", 4), where)
    assert chosen.max_ctas == min(32, 132 // 4 - ENGINE_CTAS) and not chosen.floors


def test_a_run_time_protocol_is_timed_on_the_chosen_contents(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """alltoallv (run-time counts) at 2 ranks sharing a GPU: every case carries the drawn
    contents of --contents, and the table's first line (printed, .txt, results.json)
    says which."""
    seen = _fake_machine(tmp_path, monkeypatch,
                         Placement((0, 0), sms=20, mps=MpsStatus(True, "fake")))
    code, out, err = run(capsys, str(ROOT / "protocols" / "alltoallv.cco"), "--target",
                         "nvshmem", "--ranks", "2", "--sweep", "cap=1024", "--contents", "mixed",
                         "-o", str(tmp_path / "out"))
    assert code == 0, err
    (cases, _, _), = seen
    assert [c.impl for c in cases] == ["generated", "reference"]
    assert all(c.drawn is not None and c.contents == "mixed-0" and Path(c.draw_file).is_file()
               for c in cases)
    named = ("contents timed: mixed-0 (each bounded value at its lower bound, its upper bound "
             "or between, seed 0)")
    assert named in out.splitlines()[0]
    assert named in (tmp_path / "out" / "alltoallv-cap-nvshmem.txt").read_text().splitlines()[0]
    info = json.loads((tmp_path / "out" / "results.json").read_text())["info"]
    assert info["contents"] == {"alltoallv:cap": named.removeprefix("contents timed: ")}


def test_an_unknown_contents_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run(capsys, A2A, "--target", "nccl-lsa", "--sweep", "block=8B", "--contents", "skewed")
    assert info.value.code == 2
    assert "--contents" in capsys.readouterr().err
