"""codegen.reroll: runs of steps that differ by affine numbers become `loop` steps that
print, iteration by iteration, exactly the unrolled steps (checked by expanding every
loop back and comparing the printed texts), and kernels of run-time protocols shrink."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccogen.codegen import Options, generate
from ccogen.codegen.backends import sm
from ccogen.codegen.model import Segment, Step
from ccogen.codegen.reroll import MIN_COUNT, reroll, reroll_segments
from ccogen.codegen.steps import StepKind
from ccogen.instantiate import instantiate
from ccogen.syntax import load_ir

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")

ROOT = Path(__file__).resolve().parents[2]
SLOTS = ("c_dst_off", "c_src_off", "c_nbytes", "c_value", "c_vec", "c_seq")
_ULL = re.compile(r"static_cast<uint64_t>\((-?\d+)LL \+ (-?\d+)LL \* t\)")
_ANY = re.compile(r"\((-?\d+)(LL)? \+ (-?\d+)LL \* t\)")


def _printed(s: Step) -> tuple[object, ...]:
    red = s.reduction
    fixed = None if red is None else (red.op, red.ctype, red.acc, red.vector, red.elements,
                                      tuple(p for p, _ in red.srcs))
    return (s.kind, s.text, s.peer, s.off, s.dst_peer, s.src_peer, s.line,
            *(getattr(s, f) for f in SLOTS), tuple(s.let),
            fixed, tuple(off for _, off in s.c_srcs), () if red is None else red.weights)


def _at(text: str, t: int) -> str:
    text = _ULL.sub(lambda m: f"{int(m[1]) + int(m[2]) * t}ULL", text)
    return _ANY.sub(lambda m: f"{int(m[1]) + int(m[3]) * t}{m[2] or ''}", text)


def _expand(steps: tuple[Step, ...]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for s in steps:
        if s.kind is not StepKind.LOOP:
            out.append(_printed(s))
            continue
        for t in range(s.value):
            for b in s.body:
                p = _printed(b)
                out.append((*p[:7], *(_at(x, t) for x in p[7:13]),  # type: ignore[arg-type]
                            tuple((n, _at(v, t)) for n, v in p[13]),  # type: ignore[attr-defined]
                            p[14], *(tuple(_at(x, t) for x in p[i]) for i in (15, 16))))  # type: ignore[attr-defined]
    return out


def _segments(name: str, nranks: int, params: dict[str, int], target: str,
              monkeypatch: pytest.MonkeyPatch) -> list[list[Segment]]:
    """The unrolled programs the backend hands to `reroll_segments`."""
    seen: list[list[Segment]] = []

    def record(segments: list[Segment]) -> list[Segment]:
        seen.append(list(segments))
        return list(segments)

    monkeypatch.setattr(sm, "reroll_segments", record)
    path = ROOT / "protocols" / f"{name}.cco"
    instance, _ = instantiate(load_ir(path), nranks, params)
    assert instance is not None
    generate(instance, target, source=path.name, options=Options())
    assert seen
    return seen


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize(("name", "params"), [
    ("alltoallv", {"cap": 64}),
    ("moe_dispatch", {"tokens": 8, "hidden": 16, "k": 2}),
    ("moe_combine", {"tokens": 8, "hidden": 16, "k": 2}),
])
def test_loops_print_the_unrolled_steps(name: str, params: dict[str, int], target: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folded = 0
    for segments in _segments(name, 3, params, target, monkeypatch):
        flat = [s for seg in segments if not seg.branches for s in seg.steps]
        rolled = reroll_segments(segments)
        assert _expand(tuple(s for seg in rolled if not seg.branches for s in seg.steps)) \
            == [_printed(s) for s in flat]
        for seg, new in zip([s for s in segments if s.branches],
                            [s for s in rolled if s.branches], strict=True):
            for a, b in zip(seg.branches, new.branches, strict=True):
                assert _expand(b.steps) == [_printed(s) for s in a.steps]
                folded += sum(s.kind is StepKind.LOOP for s in b.steps)
    # forks of run-time rows are spread over the group (codegen.spread), which folds the
    # rows through `reroll` before this pass: their loops are the spread's iterations
    folded += sum(s.kind is StepKind.SPREAD and s.spread is not None and s.spread.iterations > 1
                  for segments in _segments(name, 3, params, target, monkeypatch)
                  for seg in segments for s in seg.steps)
    assert folded or name == "alltoallv"


def test_a_short_or_irregular_run_stays_unrolled() -> None:
    steps = [Step(StepKind.COPY, dst_peer=1, dst_off=16 * i, nbytes=16)
             for i in range(MIN_COUNT - 1)]
    assert reroll(steps) == tuple(steps)
    odd = [Step(StepKind.COPY, dst_peer=1, dst_off=x, nbytes=16) for x in (0, 16, 48, 64)]
    assert all(s.kind is StepKind.COPY for s in reroll(odd))
    peers = [Step(StepKind.COPY, dst_peer=p, dst_off=0, nbytes=16) for p in range(4)]
    assert reroll(peers) == tuple(peers)  # a peer is printed as a number, never folded


def test_run_time_kernels_shrink() -> None:
    path = ROOT / "protocols" / "moe_dispatch.cco"
    instance, _ = instantiate(load_ir(path), 4, {"tokens": 16, "hidden": 64, "k": 2})
    assert instance is not None
    text = generate(instance, "nvshmem", source=path.name, options=Options()).files[
        "kernels.cu"]
    # one spread loop per rank (codegen.spread), a case per destination, no per-warp loop
    assert text.count("for (uint64_t i = ccogen_spread_first(c); i < 64ULL;") == 4
    assert text.count("ccogen_copy_chunk_warp(c, ") == 4 * 4
    assert "for (int64_t t = 0; t < 16; ++t) {" not in text


def test_a_run_of_reduces_folds() -> None:
    """moe_combine's `for t in range(n): reduce(...)` (run-time weights) and its row
    clearing `copy` loop stay loops over `t`: one `reduce` call per program, never one
    per token; both loops are spread over the group's warps (codegen.spread: the clear is
    a `warps` fork, the reduce rows are independent), and the printed reduce reads `t`."""
    path = ROOT / "protocols" / "moe_combine.cco"
    nranks, tokens = 4, 16
    reduce_line = next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                       if line.strip().startswith("reduce("))
    instance, _ = instantiate(load_ir(path), nranks, {"tokens": tokens, "hidden": 64, "k": 2})
    assert instance is not None
    for target in ("nccl-lsa", "nvshmem"):
        text = generate(instance, target, source=path.name, options=Options()).files[
            "kernels.cu"]
        calls = text.count("ccogen_reduce_group<") + text.count("ccogen_reduce_warp<")
        assert 1 <= calls <= nranks  # one per program (unrolled: nranks * tokens)
        # the comment stays, once per call
        assert text.count(f"// moe_combine.cco:{reduce_line}: reduce") == calls
        assert "one row a warp" in text  # the reduce's rows are spread
        # neither the clear nor the reduce is a per-CTA loop over the tokens any more
        assert f"for (int64_t t = 0; t < {tokens}; ++t) {{" not in text
        assert "{ -1, static_cast<uint64_t>(" in text  # the sources' offsets follow t
        assert "ccogen_ld<float>(c, -2, static_cast<uint64_t>(0LL + 8LL * t))" in text


def test_weights_print_in_element_order() -> None:
    """A sum's terms print as the elements come (x[9] before x[10]), so that token 1's
    weight has token 0's shape and the run folds."""
    from ccogen.codegen.rtexpr import natural

    texts = ["w@0[10]", "w@0[8]", "w@0[9]", "w@1[0]"]
    assert sorted(texts, key=natural) == ["w@0[8]", "w@0[9]", "w@0[10]", "w@1[0]"]


def test_alternating_literals_roll_in_folded_programs() -> None:
    """A ring's steps land in two slots in turn (`v0 + e * (t % 2)`) while its chunk
    offset grows: in a program folded over the ranks (`peers=True`) the run is one loop
    whose trips (`reroll.at_trip`) print the unrolled steps; three repetitions (three
    values fit any such form) stay unrolled."""
    from ccogen.codegen.reroll import MIN_PERIODIC, at_trip
    from ccogen.codegen.spell.cuda import step as spell_step

    steps = [Step(StepKind.COPY, dst_peer=1, dst_off=4096 + 1024 * (i % 2), src_off=64 * i,
                  nbytes=64, seq=3 * i + 5 * (i % 2)) for i in range(6)]
    (loop,) = reroll(steps, peers=True)
    assert loop.kind is StepKind.LOOP and loop.value == 6
    (body,) = loop.body
    assert "(t % 2)" in spell_step(body, "group", "")
    assert [spell_step(at_trip(body, t), "group", "") for t in range(loop.value)] \
        == [spell_step(s, "group", "") for s in steps]
    short = steps[:MIN_PERIODIC - 1]
    assert reroll(short, peers=True) == tuple(short)
