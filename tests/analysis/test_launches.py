"""The back-to-back instance's shortcuts equal what they replace (analysis/launches.py):
`_relaunched` is `dataclasses.replace` of the shifted fields, and the increments of
copied launches are `increments_of` of the back-to-back instance, in the same order."""

from __future__ import annotations

import random
from dataclasses import fields, replace
from pathlib import Path

import pytest

from ccogen.analysis.launches import _relaunched, _relaunched_increments, back_to_back
from ccogen.analysis.matching import increments_of, match
from ccogen.instantiate import instantiate, team_sizes
from ccogen.ir.instance import Instance, OpInst
from ccogen.syntax import parse_ir
from tests.differential.gen import generate
from tests.helpers import REPO_ROOT, library_params

SOURCES = sorted([*(REPO_ROOT / "protocols").glob("*.cco"),
                  *(REPO_ROOT / "tests" / "lint").glob("*.cco")])


def _instances(path: Path) -> list[Instance]:
    try:
        protocol = parse_ir(path.read_text(encoding="utf-8"), path.name)
    except Exception:  # a fixture of a syntax error
        return []
    out = []
    for n in team_sizes(protocol)[:2]:
        inst, diags = instantiate(protocol, n, library_params(path))
        if inst is not None and not any(d.is_error for d in diags):
            out.append(inst)
    return out


def test_relaunched_is_replace() -> None:
    assert all(f.init for f in fields(OpInst))  # `_relaunched` passes every field in order
    inst = _instances(REPO_ROOT / "protocols" / "alltoall.cco")[0]
    for op in inst.ranks[1]:
        new = _relaunched(op, 7, 1)
        old = replace(op, index=op.index + 7, preds=tuple(p + 7 for p in op.preds),
                      group=op.group + 7, epoch=1)
        assert new == old
        assert all(getattr(new, f.name) == getattr(old, f.name) for f in fields(OpInst))


@pytest.mark.parametrize("path", [p for p in SOURCES if "moe" not in p.name],
                         ids=lambda p: p.stem)
def test_copied_launches_have_the_increments_of_the_whole(path: Path) -> None:
    for inst in _instances(path):
        both = back_to_back(inst)
        if both.launches == 1 or both.period != 1:
            continue
        want = increments_of(both)
        got = _relaunched_increments(both, match(inst))
        assert list(got[0].items()) == list(want[0].items())
        assert got[1] == want[1]


def test_copied_launches_of_random_protocols() -> None:
    rng = random.Random(25)
    checked = 0
    for _ in range(150):
        p = generate(rng)
        inst, diags = instantiate(parse_ir(p.text, "gen.cco"), p.ranks)
        if inst is None or any(d.is_error for d in diags):
            continue
        both = back_to_back(inst)
        if both.launches == 1 or both.period != 1:
            continue
        want, got = increments_of(both), _relaunched_increments(both, match(inst))
        assert list(got[0].items()) == list(want[0].items()) and got[1] == want[1], p.text
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("path", [p for p in SOURCES if "moe" not in p.name
                                  and p.parent.name == "protocols"], ids=lambda p: p.stem)
def test_copied_launches_have_the_events_of_the_whole(path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`_hb_build._copy_launches` makes the events and edges the per-op loop makes."""
    from ccogen.analysis import _hb_build
    from ccogen.analysis.launches import launch_matching

    def skeleton(inst: Instance) -> tuple[object, ...]:
        both = back_to_back(inst)
        sk = _hb_build.build_skeleton(both, launch_matching(both, match(inst)))
        return (sk.kinds, sk.ranks, sk.opidx, sk.wheres, sk.keys, list(sk.ids.items()),
                sk.preds, sk.succs, list(sk.edge_kind.items()), sk.issues, sk.completions,
                sk.whos, sorted(sk._signals.items()), sorted(sk.blocked))

    for inst in _instances(path):
        copied = skeleton(inst)
        monkeypatch.setattr(_hb_build, "_copied", lambda ops, n: False)
        assert skeleton(inst) == copied
        monkeypatch.undo()


def test_the_library_s_launches_are_copied() -> None:
    from ccogen.analysis._hb_build import _copied

    inst = _instances(REPO_ROOT / "protocols" / "alltoall.cco")[0]
    both = back_to_back(inst)
    assert both.launches == 2 and both.period == 1
    assert all(_copied(both.ranks[r], both.launch_len(r)) for r in range(both.nranks))
    rotating = back_to_back(_instances(REPO_ROOT / "protocols" / "alltoall_rotating.cco")[0])
    assert rotating.period > 1  # its launches differ: built op by op
