"""The command line: formats side by side, exit codes, fmt, explain, placeholders, bugs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ccogen import cli

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "lint" / "E002-bad-name-or-argument.cco"
GOOD = ROOT / "protocols" / "alltoall.cco"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lint_clean_protocol_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lint", str(GOOD))
    assert code == 0
    assert "error[" not in out
    # success says so: one summary line naming what was checked
    assert out == f"{GOOD}: 0 errors, 0 warnings (4 instances checked: nranks=2, 3, 4, 8)\n"


def test_lint_summarises_every_file_and_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lint", str(GOOD), str(BAD), "--ranks", "2")
    assert code == 1
    assert out.splitlines()[-3:] == [
        f"{GOOD}: 0 errors, 0 warnings (1 instance checked: nranks=2)",
        f"{BAD}: 6 errors, 0 warnings (not instantiated: the text has errors)",
        "2 files: 6 errors, 0 warnings"]


@pytest.mark.parametrize("fmt", ["concise", "json", "sarif", "github"])
def test_machine_formats_print_no_summary(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, _ = run(capsys, "lint", str(GOOD), "--ranks", "2", "--format", fmt)
    assert code == 0 and "instances checked" not in out and "0 errors" not in out
    if fmt in ("json", "sarif"):
        json.loads(out)
    else:
        assert out == ""


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github"])
def test_every_format_reports_the_same_findings(capsys: pytest.CaptureFixture[str],
                                                fmt: str) -> None:
    code, out, _ = run(capsys, "lint", str(BAD), "--format", fmt)
    assert code == 1
    if fmt == "json":
        assert [d["code"] for d in json.loads(out)] == ["E002"] * 6
    elif fmt == "sarif":
        assert len(json.loads(out)["runs"][0]["results"]) == 6
    elif fmt == "concise":
        lines = out.strip().splitlines()
        assert len(lines) == 6 and all(": error[E002] " in line for line in lines)
        assert lines[0].startswith("tests/lint/E002-bad-name-or-argument.cco:8:34:") or \
            lines[0].split(":")[1:3] == ["8", "34"]
    elif fmt == "github":
        assert out.count("::error title=ccogen (E002)") == 6
    else:
        assert out.count("error[E002]") == 6
        assert out.rstrip().endswith("6 errors, 0 warnings (not instantiated: the text has errors)")


def test_strict_fails_on_warnings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "w.cco"
    src.write_text(GOOD.read_text().replace('signal="remote")',
                                            'signal="remote", signal_per_copy=True)'))
    code, out, _ = run(capsys, "lint", str(src))
    if "warning[" not in out:
        pytest.skip("no warning rule fires on this input yet")
    assert code == 0
    assert run(capsys, "lint", "--strict", str(src))[0] == 1


def test_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lint", "no/such/file.cco")
    assert code == 2
    assert err.startswith("error: cannot read no/such/file.cco")


def test_bad_param_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lint", str(GOOD), "--param", "block=12XB")
    assert code == 2 and "--param block=12XB" in err


def test_fmt_check_and_rewrite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "a.cco"
    src.write_text(GOOD.read_text())
    assert run(capsys, "fmt", "--check", str(src))[:2] == (1, f"would reformat {src}\n")
    assert run(capsys, "fmt", str(src))[0] == 0
    assert run(capsys, "fmt", "--check", str(src))[0] == 0
    assert "# Every rank sends one block" in src.read_text()  # comments survive


def test_explain_prints_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", "E021")
    assert code == 0 and out.startswith("E021 (unsatisfiable-wait)")
    assert run(capsys, "explain", "E999")[0] == 2


def test_explain_knows_every_registered_code(capsys: pytest.CaptureFixture[str]) -> None:
    from ccogen.diag.codes import RULES

    for code, rule in RULES.items():
        status, out, _ = run(capsys, "explain", code)
        assert status == 0 and out.startswith(f"{code} ({rule.slug})"), code
    status, _, err = run(capsys, "explain", "W999")
    first = min(c for c in RULES if c.startswith("W"))
    last = max(c for c in RULES if c.startswith("W"))
    assert status == 2 and f"{first}–{last}" in err and max(RULES) in err


def test_bench_is_a_real_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert "bench" in cli.COMMANDS
    code, _, err = run(capsys, "bench", str(GOOD), "--target", "nccl-lsa",
                       "--sweep", "block=8B..1KiB:x3x")
    assert code == 2 and "the step is written `:x2`" in err


def test_internal_errors_ask_for_a_report(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_: object) -> int:
        raise RuntimeError("invariant broken")

    monkeypatch.setitem(cli.COMMANDS, "lint", boom)
    code, _, err = run(capsys, "lint", str(GOOD))
    assert code == 3
    assert err.startswith("error: internal error: this is a bug in ccogen\n")
    assert f"ccogen lint {GOOD}" in err


def test_python_dash_m_and_console_script() -> None:
    proc = subprocess.run([sys.executable, "-m", "ccogen", "explain", "W100"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("W100")


def test_the_program_leaves_at_once_with_all_its_output(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """As the program, `lint` ends the process without teardown (`main._exit_at_once`):
    the exit status and every byte of its output (into a file: buffered) are what the
    in-process call gives, and an atexit handler no longer runs, which shows it left."""
    files = [str(BAD), str(GOOD), *map(str, sorted((ROOT / "tests" / "lint").glob("E0*.cco")))]
    code, out, _ = run(capsys, "lint", "--format", "concise", *files)
    probe = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('teardown')); "
             "from ccogen.cli import main; sys.argv[1:] = sys.argv[2:]; raise SystemExit(main())")
    target = tmp_path / "out.txt"
    with target.open("w") as sink:
        proc = subprocess.run([sys.executable, "-c", probe, "x", "lint", "--format", "concise",
                               *files], stdout=sink, stderr=subprocess.PIPE, text=True,
                              check=False, cwd=ROOT)
    assert code == 1 and len(out) > 8192  # over one buffer
    assert proc.returncode == code
    assert target.read_text() == out
    assert "teardown" not in proc.stderr
    # in-process calls (with argv) return; other commands keep the normal exit
    assert cli.main(["lint", str(GOOD)]) == 0
    other = subprocess.run([sys.executable, "-c", probe, "x", "bench", "--help"],
                             capture_output=True, text=True, check=False, cwd=ROOT)
    assert other.returncode == 0 and "teardown" in other.stderr


def _bullets(text: str) -> list[str]:
    """The `- ...` items of a Markdown list, continuation lines joined."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return items


def test_every_flag_of_every_command_is_in_the_cli_reference() -> None:
    """docs/reference/cli.md names each command's flags in its section, or in a common
    option that applies to it (one naming the command, or naming none)."""
    import argparse

    from ccogen.cli.main import _parser

    doc = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    common = _bullets(doc[:doc.index("\n## `ccogen ")])
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in sub.choices.items():
        start = doc.index(f"## `ccogen {name}`")
        end = doc.find("\n## ", start + 1)
        section = doc[start:end if end > 0 else None]
        commands = [f"`{c}`" for c in sub.choices]
        for action in parser._actions:
            for flag in action.option_strings:
                named = re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])")
                if not flag.startswith("--") or flag == "--help" or named.search(section):
                    continue
                if not any(named.search(b) and (
                        f"`{name}`" in b or not any(c in b for c in commands)) for b in common):
                    missing.append(f"{name} {flag}")
    assert not missing
