"""`ccogen lint` imports only what the command needs (issue 25: a cold lint of a small
protocol in <= 0.5 s).  Checked by what a fresh interpreter has imported, not by time."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO_ROOT

HEAVY = ("networkx", "jinja2", "torch", "cupy", "ccogen.codegen", "ccogen.rt", "ccogen.sim",
         "ccogen.builder", "ccogen.bench", "ccogen.toolchains", "ccogen.torch")

PROBE = """
import json, sys
from ccogen.cli.main import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]))
"""


def _modules(*argv: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         cwd=REPO_ROOT, check=True).stdout
    code, modules = json.loads(out.strip().splitlines()[-1])
    return code, modules


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_lint_imports_no_generator_simulator_runtime_or_networkx() -> None:
    code, modules = _modules("lint", "protocols/alltoall.cco")
    assert code == 0
    assert _heavy(modules) == []
    assert "ccogen.analysis" in modules  # it did check


def test_a_hang_still_finds_its_cycle() -> None:
    # networkx is imported where a cycle is looked for, so a deadlock still reports it
    code, modules = _modules("lint", "tests/lint/E030-pingpong-both-wait.cco")
    assert code == 1 and "networkx" in modules


def test_the_other_commands_still_register() -> None:
    out = subprocess.run([sys.executable, "-m", "ccogen", "--help"], capture_output=True,
                         text=True, cwd=REPO_ROOT, check=True).stdout
    for command in ("lint", "fmt", "explain", "compile", "build", "run", "simulate", "bench"):
        assert command in out
