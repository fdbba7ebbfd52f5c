"""Helpers shared by the tests (import as `from helpers import ...`)."""

from __future__ import annotations

import difflib
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
_DIFF_LINES = 80


def require_tool(name: str, hint: str) -> str:
    """Path of executable `name`, or skip the test saying how to install it."""
    __tracebackhide__ = True  # report the skip at the calling test, not here
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found: install with {hint}")
    return path


def _current_test_id() -> str:
    # PYTEST_CURRENT_TEST is "tests/test_x.py::test_y[param] (call)".
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return current.rsplit(" ", 1)[0] if current else "tests"


def assert_golden(path: Path | str, actual: str, update: bool) -> None:
    """Compare `actual` with the golden file at `path`; rewrite it when `update` is True.

    On a mismatch the test fails with a unified diff (first 80 lines) and the exact command
    that blesses the new output.
    """
    __tracebackhide__ = True
    path = Path(path)
    if update:
        if not path.is_file() or path.read_text(encoding="utf-8") != actual:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual, encoding="utf-8", newline="")
        return

    bless = f"python -m pytest --update-golden '{_current_test_id()}'"
    try:
        shown = path.relative_to(REPO_ROOT)
    except ValueError:
        shown = path
    if not path.is_file():
        pytest.fail(
            f"golden file {shown} does not exist; create it with:\n    {bless}", pytrace=False
        )
    expected = path.read_text(encoding="utf-8")
    if expected == actual:
        return
    diff = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{shown} (golden)",
            tofile=f"{shown} (actual)",
        )
    )
    more = len(diff) - _DIFF_LINES
    text = "".join(line if line.endswith("\n") else line + "\n" for line in diff[:_DIFF_LINES])
    if more > 0:
        text += f"... {more} more diff lines\n"
    pytest.fail(
        f"output differs from golden file {shown}:\n{text}"
        f"if the new output is right, bless it with:\n    {bless}",
        pytrace=False,
    )


def generated_kernels(text_or_name: str, target: str = "nccl-lsa", nranks: int = 2,
                      params: dict[str, object] | None = None) -> str:
    """kernels.cu for `protocols/<name>.cco` (or a protocol's text) at `nranks`."""
    from ccogen.codegen import generate
    from ccogen.instantiate import instantiate
    from ccogen.syntax import load_ir, parse_ir

    if "\n" in text_or_name:
        ir = parse_ir(text_or_name)
    else:
        ir = load_ir(REPO_ROOT / "protocols" / f"{text_or_name}.cco")
    instance, diags = instantiate(ir, nranks, params or {})
    assert instance is not None, diags
    return generate(instance, target, source="p.cco").files["kernels.cu"]


# The library protocols whose defaults are a production shape too large for the unit
# tests (MoE prefill: 4096 tokens x hidden 7168, linted in minutes): the tests use these
# sizes instead; `ccogen lint protocols/NAME.cco` still checks the defaults.
LIBRARY_TEST_PARAMS: dict[str, dict[str, int]] = {
    "moe_dispatch": {"tokens": 8, "hidden": 8, "k": 2},
    "moe_combine": {"tokens": 8, "hidden": 8, "k": 2},
    "moe_dispatch_ll": {"tokens": 8, "hidden": 8, "k": 2},
    # 4 KiB chunks: at its default (512 KiB) the 20 seeds of 4 team sizes took 9 min on the
    # loaded 2-core machine (bf16 windows, f32 partial sums, the rounding counts)
    "allreduce_ring_bf16": {"chunk": 4096},
}


def library_params(path: Path | str) -> dict[str, int]:
    """The parameters the tests give library protocol `path` (its defaults: {})."""
    return dict(LIBRARY_TEST_PARAMS.get(Path(path).stem, {}))

# Library protocols with run-time values (language v2 §3, §4): their amounts are drawn
# per epoch (no static traffic to count); generated for nccl-lsa and nvshmem.
RUNTIME_PROTOCOLS = frozenset({"alltoallv", "moe_dispatch", "moe_combine", "moe_dispatch_ll"})


BLOCKED_WINDOW_S = 60.0


def _tree_cpu_ticks(root: int) -> int | None:
    """CPU clock ticks used by process `root` and its live descendants (and the children
    they reaped); None once `root` is gone.  Linux /proc."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ticks)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17)
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total


def run_child(args: list[str], *, cpu_s: float, window_s: float = BLOCKED_WINDOW_S,
              **kwargs: object) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(args, capture_output=True, text=True, **kwargs)` bounded by CPU
    time, not by wall-clock time: the child runs under RLIMIT_CPU `cpu_s` (the kernel
    stops it past that), and it is killed only when a whole `window_s` of wall-clock
    time passes in which it and its descendants used no CPU at all (blocked, not slow:
    a loaded machine slows a child down, it does not stop it)."""
    import resource

    limit = max(1, math.ceil(cpu_s))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=cap, **kwargs)  # type: ignore[call-overload]
    last = _tree_cpu_ticks(proc.pid)
    while True:
        try:
            out, err = proc.communicate(timeout=window_s)
            break
        except subprocess.TimeoutExpired:
            now = _tree_cpu_ticks(proc.pid)
            if now is not None and now == last:
                proc.kill()
                out, err = proc.communicate()
                raise AssertionError(f"{args[:3]}...: blocked, no CPU used in {window_s:g} s"
                                     f"\n{err[-2000:]}") from None
            last = now
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
