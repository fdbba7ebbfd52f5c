"""The host preparation of `ccogen run` without the unrolled instance (ccogen.rt.prepare,
ccogen.instantiate.checks, ccogen.instantiate.vector) against the unrolled path, its
oracle: on small instances of every library protocol (and the run-time-count fixture
moe_dispatch_ntok), the same `ensure` comparisons in the same order, the same drawn
contents, and the same verdicts on finals that satisfy `ensure` and on corrupted ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ccogen.instantiate import instantiate, team_sizes
from ccogen.instantiate.checks import ensure_checks
from ccogen.instantiate.runtime import Contents
from ccogen.ir import values
from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp
from ccogen.rt.data import CheckSpec, RegionSpec, check_specs, evaluate, initial_bytes
from ccogen.rt.drawn import DrawSpec, draw_epoch
from ccogen.rt.prepare import UNROLLED_ENV, checks_for, coalesce, reads_remote_finals
from ccogen.sim import runtime as sim_runtime
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = sorted(p.stem for p in (ROOT / "protocols").glob("*.cco"))
NTOK = ROOT / "tests" / "torch" / "protocols" / "moe_dispatch_ntok.cco"
DRAWS = ("low", "high", "mixed-2", "interior-3")


def _path(name: str) -> Path:
    return NTOK if name == "moe_dispatch_ntok" else ROOT / "protocols" / f"{name}.cco"


def _params(name: str) -> dict[str, int]:
    if name == "moe_dispatch_ntok":
        return {"tokens": 6, "hidden": 4, "k": 2}
    return library_params(name) or ({"cap": 8} if name == "alltoallv" else {})


def _ranks(name: str) -> list[int]:
    sizes = team_sizes(load_ir(_path(name)), params=_params(name))
    return sizes[:2] if len(sizes) > 1 else sizes


CASES = [(name, n) for name in [*LIBRARY, "moe_dispatch_ntok"] for n in _ranks(name)]


def _instance(name: str, nranks: int, contents: Contents | None = None) -> Any:
    instance, diags = instantiate(load_ir(_path(name)), nranks, _params(name),
                                  contents=contents)
    assert instance is not None, [d.message for d in diags]
    return instance


def _copy(contents: Contents) -> Contents:
    return Contents({k: a.copy() for k, a in contents.arrays.items()}, dict(contents.dtypes),
                    contents.label)


@pytest.mark.parametrize(("name", "nranks"), CASES)
def test_the_checks_are_the_unrolled_instances(name: str, nranks: int) -> None:
    """Every rank's comparisons, in order, for every draw (or the static instance)."""
    protocol = load_ir(_path(name))
    static = _instance(name, nranks)
    draws = [None] if not static.runtime else [
        sim_runtime.draw(protocol, nranks, _params(name), w, 0)[0] for w in DRAWS]
    for contents in draws:
        if static.runtime and contents is None:
            continue
        unrolled = _instance(name, nranks, None if contents is None else _copy(contents))
        expected = check_specs(unrolled.checks)
        got, diags = ensure_checks(protocol, nranks, _params(name), contents)
        assert got is not None, [d.message for d in diags]
        assert check_specs(got) == expected
        for rank in range(nranks):
            mine, _ = ensure_checks(protocol, nranks, _params(name), contents, [rank])
            assert mine is not None
            assert check_specs(mine) == [c for c in expected if c.rank == rank]


RUNTIME_CASES = [(name, n) for name, n in CASES if _instance(name, n).runtime]


@pytest.mark.parametrize(("name", "nranks"), RUNTIME_CASES)
def test_vectorised_require_draws_what_the_interpreter_draws(
        name: str, nranks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.instantiate import vector

    protocol = load_ir(_path(name))
    fast = [sim_runtime.draw(protocol, nranks, _params(name), w, 7) for w in DRAWS]

    def refuse(*_: object) -> None:
        raise vector.Unsupported("the interpreter, for the comparison")

    monkeypatch.setattr(vector.Vector, "derive", refuse)
    monkeypatch.setattr(vector.Vector, "unsatisfied", refuse)
    slow = [sim_runtime.draw(protocol, nranks, _params(name), w, 7) for w in DRAWS]
    assert [label for _, label in fast] == [label for _, label in slow]
    for (a, _), (b, _) in zip(fast, slow, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a.arrays.keys() == b.arrays.keys()
            for key in a.arrays:
                assert np.array_equal(a.arrays[key], b.arrays[key]), key


def test_the_vectorised_verdict_names_the_broken_lines_in_order() -> None:
    from ccogen.instantiate.vector import Vector

    protocol = load_ir(ROOT / "protocols" / "moe_dispatch.cco")
    params = _params("moe_dispatch")
    contents, _ = sim_runtime.draw(protocol, 2, params, "mixed-2", 0)
    assert contents is not None
    _, memories, bound = sim_runtime._preconditions(protocol, 2, params)
    assert Vector(protocol, 2, bound, contents).unsatisfied() == []
    contents.set("topk_rank", 1, 3, 2)      # a rank outside the team
    contents.set("rank_counts", 0, 1, 99)   # a count the routing does not give
    expected = sim_runtime.unsatisfied(protocol, 2, bound, memories, contents)
    assert expected and Vector(protocol, 2, bound, contents).unsatisfied() == expected


@pytest.mark.parametrize(("name", "nranks"), RUNTIME_CASES)
def test_an_epochs_draw_is_the_unrolled_paths(name: str, nranks: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec = DrawSpec.of(_instance(name, nranks), 3)
    assert spec is not None
    for epoch in range(4):
        new = draw_epoch(spec, epoch)
        monkeypatch.setenv(UNROLLED_ENV, "1")
        old = draw_epoch(spec, epoch)
        monkeypatch.delenv(UNROLLED_ENV)
        assert new.label == old.label
        assert new.arrays.keys() == old.arrays.keys()
        assert all(np.array_equal(new.arrays[k], old.arrays[k]) for k in new.arrays)
        assert list(new.checks) == coalesce(old.checks)
        for rank in range(nranks):
            mine = draw_epoch(spec, epoch, rank)
            assert list(mine.checks) == [c for c in new.checks if c.rank == rank]
            for (r, w), data in mine.arrays.items():
                assert np.array_equal(data, new.arrays[(r, w)])
            assert all((rank, w) in mine.arrays for (r, w) in new.arrays if r == rank)


def _satisfying_finals(checks: list[CheckSpec], initial: dict[tuple[str, int], np.ndarray],
                       dtypes: dict[str, str]) -> dict[tuple[str, int], np.ndarray]:
    """Final contents that every comparison holds on (the left side written from the
    right), starting from the initial ones."""
    finals = {k: a.copy() for k, a in initial.items()}

    def read(r: RegionSpec) -> np.ndarray:
        whole = initial[(r.window, r.rank)] if r.init else finals[(r.window, r.rank)]
        return whole[r.start:r.stop]

    for c in checks:
        target = finals[(c.left.window, c.left.rank)]
        if c.op != "==":
            continue
        if c.reduction is not None:
            dtype = DType(c.reduction.dtype)
            terms = [read(t) for t in c.reduction.terms]
            target[c.left.start:c.left.stop] = values.combine(
                ReduceOp(c.reduction.op), terms, c.reduction.weights, dtype)
        else:
            assert c.right is not None
            target[c.left.start:c.left.stop] = read(c.right)
    return finals


def _verdicts(name: str, nranks: int, epoch: int
              ) -> tuple[list[CheckSpec], list[CheckSpec], dict[tuple[str, int], np.ndarray],
                         dict[str, str]]:
    protocol = load_ir(_path(name))
    static = _instance(name, nranks)
    dtypes = {n: d.value for n, d in static.dtypes}
    sizes = dict(static.window_sizes) | dict(static.buffer_sizes)
    if static.runtime:
        spec = DrawSpec.of(static, 0)
        assert spec is not None
        drawn = draw_epoch(spec, epoch)
        initial = {(w, r): a for (r, w), a in drawn.arrays.items()}
        contents = Contents(dict(drawn.arrays), {n: DType(d) for n, d in dtypes.items()})
        unrolled = check_specs(_instance(name, nranks, _copy(contents)).checks)
        new = list(drawn.checks)
    else:
        initial = {(w, r): initial_bytes(0, epoch, r, w, size, dtypes.get(w, "u8"))
                   for w, size in sizes.items() for r in range(nranks)}
        unrolled = check_specs(static.checks)
        new = checks_for(protocol, nranks, _params(name))
    return unrolled, new, initial, dtypes


def _fails(checks: list[CheckSpec], initial: dict[tuple[str, int], np.ndarray],
           finals: dict[tuple[str, int], np.ndarray]) -> bool:
    def read(r: RegionSpec) -> np.ndarray:
        whole = initial[(r.window, r.rank)] if r.init else finals[(r.window, r.rank)]
        return whole[r.start:r.stop]

    return bool(evaluate(checks, read, 0))


@pytest.mark.parametrize(("name", "nranks"), CASES)
def test_the_verdicts_are_the_unrolled_paths(name: str, nranks: int) -> None:
    """Finals written to satisfy the unrolled comparisons pass both sets of checks; one
    corrupted byte in any compared final region (a seeded bug) fails both."""
    for epoch in (1, 2):  # every count at its bound, then mixed counts
        unrolled, new, initial, dtypes = _verdicts(name, nranks, epoch)
        finals = _satisfying_finals(unrolled, initial, dtypes)
        ok = not _fails(unrolled, initial, finals)
        assert _fails(new, initial, finals) == (not ok)
        if not ok:  # `!=` lines or overlapping regions: no such finals to write
            continue
        compared = [c for c in unrolled if c.op == "==" and c.left.stop > c.left.start
                    and not c.left.init]
        for c in compared[:: max(1, len(compared) // 6)]:
            bad = {k: a.copy() for k, a in finals.items()}
            region = bad[(c.left.window, c.left.rank)]
            middle = (c.left.start + c.left.stop) // 2
            region[middle] ^= 0x40  # a float's exponent bit or an integer's: always differs
            assert _fails(unrolled, initial, bad), c.text
            assert _fails(new, initial, bad), c.text


def test_the_library_moe_protocols_have_satisfiable_finals() -> None:
    """The verdict test above compares failures with something that passes, not only two
    failing paths."""
    for name in ("moe_dispatch", "moe_combine", "alltoallv", "moe_dispatch_ntok"):
        unrolled, new, initial, dtypes = _verdicts(name, 2, 2)
        finals = _satisfying_finals(unrolled, initial, dtypes)
        assert not _fails(unrolled, initial, finals)
        assert not _fails(new, initial, finals)


def test_a_run_time_count_is_drawn_zero_at_the_cap_and_between() -> None:
    """moe_dispatch_ntok (the count `ntok[0]`, `require: 0 <= ntok[0] <= tokens`): over
    the epochs every rank's count is 0, then the cap, then values between; each epoch's
    checks compare exactly the rows below the rank's count that go to a receiver."""
    spec = DrawSpec.of(_instance("moe_dispatch_ntok", 2), 0)
    assert spec is not None
    cap = _params("moe_dispatch_ntok")["tokens"]
    counts: list[int] = []
    for epoch in range(12):
        drawn = draw_epoch(spec, epoch)
        for rank in range(2):
            n = int(drawn.arrays[(rank, "ntok")].view(np.int32)[0])
            counts.append(n)
            assert 0 <= n <= cap
            rows = sum((c.left.stop - c.left.start) for c in drawn.checks
                       if c.left.window == "recv" and c.right is not None
                       and c.right.rank == rank)
            routed = drawn.arrays[(rank, "topk_rank")].view(np.int32).reshape(cap, -1)
            hits = sum(int(any(routed[t] == q)) for t in range(n) for q in range(2))
            row_bytes = _params("moe_dispatch_ntok")["hidden"] * 4
            assert rows == hits * row_bytes  # every receiver gets the rows routed to it
    assert counts[:2] == [0, 0] and counts[2:4] == [cap, cap]
    assert any(0 < n < cap for n in counts[4:])


def test_coalesce_merges_continuing_comparisons_of_one_line_and_drops_empty_ones() -> None:
    def check(start: int, stop: int, rstart: int, location: str = "a.cco:3") -> CheckSpec:
        return CheckSpec(0, "==", RegionSpec("recv", start, stop, 0, False),
                         RegionSpec("x", rstart, rstart + stop - start, 1, True), location, "t")

    merged = coalesce([check(0, 4, 8), check(4, 8, 12), check(8, 8, 16), check(8, 12, 16),
                       check(12, 16, 40), check(16, 20, 44, "a.cco:4")])
    assert [(c.left.start, c.left.stop, c.right.start, c.right.stop)  # type: ignore[union-attr]
            for c in merged] == [(0, 12, 8, 20), (12, 16, 40, 44), (16, 20, 44, 48)]
    unequal = CheckSpec(0, "!=", RegionSpec("a", 0, 0, 0, False),
                        RegionSpec("b", 0, 0, 0, True), "a.cco:5", "t")
    assert coalesce([unequal]) == [unequal]  # an empty `!=` fails: kept


def test_remote_final_reads_are_found() -> None:
    found = {name: reads_remote_finals(load_ir(_path(name))) for name in LIBRARY}
    for name, remote in found.items():
        instance = _instance(name, _ranks(name)[0])
        if instance.runtime:
            continue
        reads = any(not r.init and r.rank != c.rank for c in check_specs(instance.checks)
                    for r in c.regions())
        assert not reads or remote, name  # a rank reads another's finals: exchanged


@pytest.mark.parametrize(("name", "nranks"), [c for c in CASES if c not in RUNTIME_CASES])
def test_a_run_checks_every_comparison_even_from_a_sampled_instance(
        name: str, nranks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `ccogen run` checks for a protocol without run-time values when it is handed
    the checked instance (loops sampled on three iterations): every comparison of the
    unrolled instance (merged), and exactly those under the oracle switch."""
    from ccogen.rt.launch import _instance_checks

    protocol = load_ir(_path(name))
    checked, _ = instantiate(protocol, nranks, _params(name), sample=True)
    assert checked is not None
    unrolled = _instance(name, nranks)
    assert _instance_checks(checked) == coalesce(check_specs(unrolled.checks))
    monkeypatch.setenv(UNROLLED_ENV, "1")
    assert _instance_checks(unrolled) == check_specs(unrolled.checks)


def test_large_draws_are_left_to_the_ranks(tmp_path: Path) -> None:
    """A draw over PRECOMPUTE_MAX_BYTES per epoch is not written by the launcher (a MoE
    prefill draw is GiBs: 100 epochs would not fit the disk); a small one is."""
    from ccogen.rt.drawn import PRECOMPUTE_MAX_BYTES, drawn_bytes, precompute

    small = DrawSpec.of(_instance("alltoallv", 2), 0)
    assert small is not None
    assert drawn_bytes(small) == 2 * sum(
        size for _, size in (*_instance("alltoallv", 2).window_sizes,
                             *_instance("alltoallv", 2).buffer_sizes))
    assert precompute(small, 2, tmp_path / "small")
    assert sorted(p.name for p in (tmp_path / "small").iterdir()) == ["draw-0.pkl", "draw-1.pkl"]
    protocol = load_ir(ROOT / "protocols" / "moe_dispatch.cco")
    big = DrawSpec(protocol, 2, (("tokens", 4096), ("hidden", 7168), ("k", 8), ("T", "bf16")), 0)
    assert drawn_bytes(big) > PRECOMPUTE_MAX_BYTES
    assert not precompute(big, 2, tmp_path / "big")
    assert list((tmp_path / "big").iterdir()) == []


@pytest.mark.parametrize(("name", "nranks"), CASES)
def test_vectorised_ensure_gives_the_interpreters_checks(name: str, nranks: int) -> None:
    """ccogen/rt/ensure_vector.py against the interpreter (`ensure_checks`, coalesced): the
    same comparisons in the same order, for every draw and for every rank alone."""
    from ccogen.rt.prepare import vectorised_checks

    protocol = load_ir(_path(name))
    static = _instance(name, nranks)
    draws = [None] if not static.runtime else [
        sim_runtime.draw(protocol, nranks, _params(name), w, 0)[0] for w in DRAWS]
    for contents in draws:
        for ranks in [None, *([r] for r in range(nranks))]:
            got = vectorised_checks(protocol, nranks, _params(name), contents, ranks)
            checks, diags = ensure_checks(protocol, nranks, _params(name), contents, ranks)
            assert checks is not None, [d.message for d in diags]
            if got is not None:  # None: outside the subset, the interpreter's
                assert got == coalesce(check_specs(checks))


def test_the_moe_protocols_ensure_is_vectorised() -> None:
    """The library MoE protocols stay inside the vectorised subset (else each launch at
    prefill takes seconds again; alltoallv's `ensure` reads final counts, `got[p]`: the
    interpreter's)."""
    from ccogen.rt.prepare import vectorised_checks

    for name in ("moe_dispatch", "moe_combine", "moe_dispatch_ntok"):
        protocol = load_ir(_path(name))
        contents = sim_runtime.draw(protocol, 2, _params(name), "mixed-2", 0)[0]
        assert vectorised_checks(protocol, 2, _params(name), contents, [0]) is not None, name


def test_a_ranks_draw_holds_what_it_reads_in_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """With chunks smaller than a memory, a rank's own draw holds its own memories whole
    and, of the other ranks' memories, at least the `init(...)` regions its checks read:
    byte for byte the draw of every rank there."""
    monkeypatch.setattr(sim_runtime, "CHUNK_BYTES", 64)
    monkeypatch.setattr(sim_runtime, "_UNWRITTEN", [])
    for name in ("moe_combine", "moe_dispatch"):
        spec = DrawSpec.of(_instance(name, 3), 5)
        assert spec is not None
        for epoch in (1, 2):
            whole = draw_epoch(spec, epoch)
            for rank in range(3):
                mine = draw_epoch(spec, epoch, rank)
                assert list(mine.checks) == [c for c in whole.checks if c.rank == rank]
                for (r, w), data in mine.arrays.items():
                    if r == rank:
                        assert np.array_equal(data, whole.arrays[(r, w)]), (r, w)
                for c in mine.checks:
                    for reg in c.regions():
                        if reg.init:
                            got = mine.arrays[(reg.rank, reg.window)][reg.start:reg.stop]
                            want = whole.arrays[(reg.rank, reg.window)][reg.start:reg.stop]
                            assert np.array_equal(got, want), str(reg)
