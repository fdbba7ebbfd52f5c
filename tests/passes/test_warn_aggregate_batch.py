"""W105: aggregate batches outside 8-16 ops per commit."""

from __future__ import annotations

import pytest

from ccogen.passes.warn_aggregate_batch import WarnAggregateBatch
from tests.helpers import REPO_ROOT
from tests.passes.run_pass import codes, instance_of, kernel, run_pass


def batch(n: int, every: int | None = None) -> str:
    commit = (f"if i % {every} == {every - 1}:\n                commit(1, queue=0)"
              if every else "pass")
    body = f"""
    if me == 0:
        for i in range({n}):
            put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], queue=0, aggregate=True)
            {commit}
        {'pass' if every else 'commit(1, queue=0)'}
        quiet(1)
    """
    return kernel(body)


@pytest.mark.parametrize("n", [8, 12, 16])
def test_sweet_spot(n: int) -> None:
    assert run_pass(WarnAggregateBatch, batch(n)) == []


def test_too_many() -> None:
    [d] = run_pass(WarnAggregateBatch, batch(64))
    assert d.message == "`commit` rings more than 16 aggregate ops"
    assert d.labels[0].message == "rings 64 aggregate ops on queue 0 of rank 1"
    assert d.help == "`commit` every 16 ops inside the loop (e.g. `if i % 16 == 15:`)"
    assert run_pass(WarnAggregateBatch, batch(64, every=8)) == []


def test_too_few() -> None:
    [d] = run_pass(WarnAggregateBatch, batch(3))
    assert d.message == "`commit` rings fewer than 8 aggregate ops"


def test_one_op_per_commit_per_peer() -> None:
    text = (REPO_ROOT / "protocols/counted_broadcast.cco").read_text(encoding="utf-8")
    from ccogen.passes.base import PassContext

    ctx = PassContext(instance=instance_of(text, 4))
    WarnAggregateBatch().run(ctx)
    [d] = list(ctx.sink)
    assert d.labels[0].message == "rings 1 aggregate op on queue 0 of rank 1"
    assert "one `commit` cannot ring ops to several peers" in d.notes[1]


def test_targets() -> None:
    assert codes(run_pass(WarnAggregateBatch, batch(64), target="mori-sdma")) == ["W105"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnAggregateBatch, batch(64), target=target) == [], target
