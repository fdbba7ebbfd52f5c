"""`ccogen simulate`: output, summary line and exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccogen.cli import main
from ccogen.sim.report import TIMES
from tests.helpers import REPO_ROOT

PINGPONG = str(REPO_ROOT / "protocols" / "pingpong.cco")
RACE = "tests/sim/fixtures/race.cco"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return int(code), out, err


def test_a_correct_protocol_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, PINGPONG)
    assert (code, out) == (0, f"20 schedules {TIMES} 2 epochs on nranks=2: all passed\n")


def test_a_buggy_protocol_fails(capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    code, out, _ = _run(capsys, RACE, "--seeds", "4")
    assert code == 1
    assert out.startswith("error[E031]: data race")
    assert f"`ccogen simulate {RACE} --ranks 3 --seed 0` shows it" in out
    assert out.endswith(f"4 schedules {TIMES} 2 epochs on nranks=3: 4 schedules failed\n")


def test_one_seed_replays_one_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, PINGPONG, "--seed", "7", "--epochs", "3", "--param", "rounds=2")
    assert (code, out) == (0, f"1 schedule {TIMES} 3 epochs on nranks=2: all passed\n")


def test_exhaustive(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, PINGPONG, "--exhaustive")
    assert (code, out) == (0, f"exhaustive: 1 schedule {TIMES} 2 epochs on nranks=2: all passed\n")


def test_exhaustive_says_when_it_stops_early(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(REPO_ROOT / RACE), "--exhaustive", "--max-schedules", "3")
    assert code == 1
    assert out.rstrip().endswith("(not exhaustive: nranks=3 stopped after 3 schedules)")


def test_json_output(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    code, out, _ = _run(capsys, RACE, "--seeds", "2", "--format", "json")
    assert code == 1
    [finding] = json.loads(out)
    assert finding["code"] == "E031" and finding["filename"] == RACE


def test_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "t.json"
    code, out, _ = _run(capsys, PINGPONG, "--seeds", "1", "--trace", str(out_file),
                        "--target", "nvshmem")
    assert code == 0
    assert out.splitlines()[-1] == f"trace of nranks=2, size=8, rounds=4 written to {out_file}"
    assert json.loads(out_file.read_text())["otherData"]["cost_model"] == "nvshmem"


@pytest.mark.parametrize("argv, message", [
    (("--seeds", "0"), "error: --seeds and --epochs must be at least 1"),
    (("--target", "nope"), "error: --target: unknown target `nope`"),
    (("--ranks", "x"), "error: --ranks takes integers"),
    (("--param", "size=abc"), "error: --param size=abc: `abc` is not an integer"),
])
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                      message: str) -> None:
    code, _, err = _run(capsys, PINGPONG, *argv)
    assert code == 2
    assert err.startswith(message)


def test_an_unreadable_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "no/such/file.cco")
    assert code == 2 and err.startswith("error: cannot read no/such/file.cco")


def test_a_wrong_team_size_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, PINGPONG, "--ranks", "3")
    assert code == 1
    assert "error[E002]: the team is fixed at 2 ranks, not 3" in out
    assert out.endswith(f"0 schedules {TIMES} 2 epochs on nranks=3: "
                        "1 instance could not be built\n")
