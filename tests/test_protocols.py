"""The protocol library: every `protocols/*.cco` is free of errors at its default sizes.

Each protocol is linted like `ccogen lint` does (every team size it allows, the
parameter defaults, every check), and each of its instances must have had its
postconditions proved symbolically (not skipped because of a race or a deadlock).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccogen.diag.render import render
from ccogen.driver import CheckOptions, check_text
from ccogen.passes import PIPELINE, PassContext
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parent.parent
PROTOCOLS = sorted((ROOT / "protocols").glob("*.cco"))


@pytest.mark.parametrize("path", PROTOCOLS, ids=lambda p: p.stem)
def test_library_protocol_has_no_errors(path: Path) -> None:
    result = check_text(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix(),
                        CheckOptions(params=library_params(path)))
    errors = [d for d in result.diagnostics if d.is_error]
    assert not errors, render(errors, "full")
    assert result.instances, "no instance was checked"


@pytest.mark.parametrize("path", PROTOCOLS, ids=lambda p: p.stem)
def test_library_postconditions_are_proved(path: Path) -> None:
    result = check_text(path.read_text(encoding="utf-8"), str(path),
                        CheckOptions(params=library_params(path)))
    for instance in result.instances:
        ctx = PassContext(instance=instance)
        for check in PIPELINE:
            check().run(ctx)
        # lines with run-time bounds or weights are the simulator's (tests/sim/test_runtime.py)
        assert instance.checks or instance.unchecked, f"{path.name} states no postcondition"
        static = [c for c in instance.checks if not c.runtime]
        assert ctx.cache.get("postconditions-checked", 0) == len(static), instance.label()


def test_the_library_is_not_empty() -> None:
    assert len(PROTOCOLS) >= 10


def test_the_readme_table_lists_every_protocol_with_its_launch_order() -> None:
    """protocols/README.md: one row per file, and its *launches* column is what the file
    declares (`host_sync`) or not (`back to back`)."""
    from ccogen.ir.nodes import LaunchOrder
    from ccogen.syntax import parse_ir

    rows: dict[str, str] = {}
    for line in (ROOT / "protocols" / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith("`") and cells[0].endswith(".cco`"):
            rows[cells[0].strip("`")] = cells[-1]
    assert sorted(rows) == [p.name for p in PROTOCOLS]
    for path in PROTOCOLS:
        protocol = parse_ir(path.read_text(encoding="utf-8"), path.name)
        declared = protocol.between_launches is LaunchOrder.HOST_SYNC
        assert rows[path.name] == ("`host_sync`" if declared else "back to back"), path.name


# The credit waits that order the next launch of the protocols converted from a leading
# `barrier()` (issue 30): each protocol's one wait for its peers' credits (`name/what`
# for a second credit of one protocol: `moe_combine`'s "done reading" signal, which
# orders the caller's next `topk_rank` after the peers' remote loads of it).
CREDIT_WAITS = {
    "moe_combine": "wait_signal(p, queue=1)",
    "moe_combine/done": "wait_signal(p, queue=0)",
    "moe_dispatch": "wait_signal(p, queue=2)",
    "moe_dispatch_ll": "wait_signal(p, queue=k)",
    "ring_allgather": "wait_signal((me + 1) % nranks, queue=1)",
    "counted_broadcast": "wait_signal(p, queue=1)",
    "counted_gather": "wait_signal(0, queue=1)",
    "pack_then_send": "wait_signal(1, queue=1)",
    "striped_put": "wait_signal(1, queue=0)",
    "two_queue_pipeline": "wait_signal(1, queue=2)",
    "aggregated_batch": "wait_signal(1, queue=1)",
    "lane_ship": "wait_signal(1, queue=1)",
}


def _without_the_credit_wait(text: str, wait: str) -> str:
    """`text` without the credit wait (and the `for`/`lanes p in peers():` around it, if
    any)."""
    loop = re.compile(r"\n( *)(?:for|lanes) p in peers\(\):\n\1    " + re.escape(wait) + r"\n")
    if loop.search(text):
        return loop.sub("\n", text, count=1)
    assert text.count(wait) == 1
    return re.sub(r"\n *" + re.escape(wait) + r"\n", "\n", text, count=1)


@pytest.mark.parametrize("name", sorted(CREDIT_WAITS))
def test_a_credit_protocol_without_its_credit_wait_is_not_back_to_back(name: str) -> None:
    """The credit is what orders the next launch: without its wait the checker finds a
    write of the next launch racing the caller's use of this launch's output."""
    path = ROOT / "protocols" / f"{name.split('/')[0]}.cco"
    text = path.read_text(encoding="utf-8")
    assert "barrier()" not in text
    mutant = _without_the_credit_wait(text, CREDIT_WAITS[name])
    assert mutant != text
    result = check_text(mutant, path.relative_to(ROOT).as_posix(),
                        CheckOptions(params=library_params(path)))
    errors = [d for d in result.diagnostics if d.is_error]
    assert errors, f"{name}: no error without the credit wait"
    assert "the two span consecutive launches" in render(errors, "full")
