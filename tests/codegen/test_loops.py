"""codegen.loops: kernels generated from the checked instance (its uniform loops on three
iterations) are byte-identical to the kernels of the unrolled instance (the oracle,
`compile_protocol(loops=False)`), for every library protocol and the language
reference's examples at sizes where a loop is sampled, on every target."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from ccogen.codegen.loops import Unfoldable, fold, shift_syncs
from ccogen.codegen.model import Segment
from ccogen.codegen.reroll import reroll
from ccogen.codegen.steps import Step, StepKind
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError
from ccogen.instantiate import parse_params
from ccogen.syntax import parse_ir

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("nvshmem", "nccl-lsa", "nccl-cft", "mori-sdma")
SMALL = ("hidden=64",)  # MoE rows of 128 bytes: the shapes stay, the kernels shrink
CASES = [(p.stem, 2, ()) for p in sorted((ROOT / "protocols").glob("*.cco"))
         if not p.stem.startswith("moe_")]
CASES += [(f"{m}", r, (f"tokens={t}", *SMALL)) for m in ("moe_dispatch", "moe_combine")
          for r, t in ((2, 16), (4, 16), (2, 64), (4, 64))]
SPEC = ROOT / "docs" / "reference" / "language.md"
EXAMPLES = [b for b in re.findall(r"```python\n(.*?)```", SPEC.read_text(encoding="utf-8"), re.S)
            if re.search(r"^\s*protocol \w+\(", b, re.M)]


def _both(text: str, source: str, target: str, ranks: int,
          params: tuple[str, ...]) -> tuple[object, object]:
    protocol = parse_ir(text, source)
    given = parse_params(list(params), protocol)
    out = []
    for loops in (True, False):
        try:
            compiled = compile_protocol(protocol, target, source=source, ranks=ranks,
                                        params=given, loops=loops)
            out.append((compiled.files, compiled.checked.loops, compiled.unrolled))
        except DiagnosticError as exc:
            out.append(sorted((d.code, d.span.line if d.span else 0) for d in exc.diagnostics))
    return out[0], out[1]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("name", "ranks", "params"), CASES,
                         ids=[f"{n}-n{r}-{'-'.join(p) or 'defaults'}" for n, r, p in CASES])
def test_library_kernels_are_the_unrolled_ones(name: str, ranks: int, params: tuple[str, ...],
                                               target: str) -> None:
    path = ROOT / "protocols" / f"{name}.cco"
    new, old = _both(path.read_text(encoding="utf-8"), f"protocols/{name}.cco", target, ranks,
                     params)
    if isinstance(old, list):  # refused by the target: refused the same way
        assert new == old
        return
    assert isinstance(new, tuple) and isinstance(old, tuple)
    assert new[0] == old[0]  # every file, byte for byte


@pytest.mark.parametrize("target", ("nvshmem", "nccl-lsa"))
@pytest.mark.parametrize("text", EXAMPLES, ids=[re.search(r"protocol (\w+)", b).group(1)  # type: ignore[union-attr]
                                                  for b in EXAMPLES])
def test_reference_kernels_are_the_unrolled_ones(text: str, target: str) -> None:
    new, old = _both(text, "example.cco", target, 4, ())
    if isinstance(old, list):
        assert new == old
        return
    assert isinstance(new, tuple) and isinstance(old, tuple)
    assert new[0] == old[0]


def test_moe_kernels_are_generated_from_three_iterations() -> None:
    """The point of it all: the MoE kernels come from the sampled instance, not from an
    unrolled one (no fallback), and are still the unrolled path's."""
    for name in ("moe_dispatch", "moe_combine"):
        path = ROOT / "protocols" / f"{name}.cco"
        new, old = _both(path.read_text(encoding="utf-8"), f"protocols/{name}.cco", "nvshmem",
                         4, ("tokens=64", *SMALL))
        assert isinstance(new, tuple) and isinstance(old, tuple)
        assert any(note.sampled for note in new[1]) and new[2] == ""
        assert new[0] == old[0]


def test_mori_sdma_falls_back_to_unrolling_and_says_why() -> None:
    path = ROOT / "protocols" / "moe_dispatch.cco"
    new, _ = _both(path.read_text(encoding="utf-8"), "protocols/moe_dispatch.cco", "mori-sdma",
                   2, ("tokens=16", *SMALL))
    if isinstance(new, tuple):
        assert "generates from unrolled instances only" in new[2]


# Loops the library samples only with run-time values (MoE): static protocols whose loops
# are sampled too (block-level copies, a `reduce` loop, warps forking over their loops),
# printed unrolled by both paths, at sizes that fold, expand and change 16-byte vectors.
DATA = Path(__file__).parent / "data" / "loops"
STATIC = [(name, (DATA / f"{name}.cco").read_text(encoding="utf-8"), params)
          for name in ("looped", "forked")
          for params in ((), ("pieces=4",), ("pieces=40", "piece=24"), ("piece=8",))]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("name", "text", "params"), STATIC,
                         ids=[f"{n}-{'-'.join(p) or 'defaults'}" for n, _, p in STATIC])
def test_static_kernels_are_the_unrolled_ones(name: str, text: str, params: tuple[str, ...],
                                              target: str) -> None:
    new, old = _both(text, f"{name}.cco", target, 2, params)
    if isinstance(old, list):
        assert new == old
        return
    assert isinstance(new, tuple) and isinstance(old, tuple)
    assert new[0] == old[0]
    if target != "mori-sdma":  # the sampled path was taken
        assert any(note.sampled for note in new[1]) and new[2] == ""


# ----------------------------------------------------------------------------- the pass


def _iteration(v: int, n: int, key: tuple[object, ...] = ("loop",)) -> list[Step]:
    trip = (key, v, n)
    return [Step(StepKind.COMMENT, text="// x.cco:3: copy", line=3, trip=trip),
            Step(StepKind.COPY, dst_off=64 * v, src_off=4096 + 64 * v, nbytes=64, vec=True,
                 trip=trip),
            Step(StepKind.SYNC, seq=1 + v, trip=trip)]


def test_fold_makes_one_loop_of_every_iteration() -> None:
    steps = [*_iteration(0, 12), *_iteration(1, 12), *_iteration(11, 12)]
    (loop,) = fold(steps, roll=True)
    assert loop.kind is StepKind.LOOP and loop.value == 12 and len(loop.body) == 3
    assert "64LL * t" in loop.body[1].c_dst_off


def _clear(v: int, n: int, key: object, base: int, seq: int, kept: bool = False) -> list[Step]:
    """Iteration v of a loop lowered as `comment, copy, ctasync` (codegen.ctasplit), the
    last one's meet kept as a group sync when `kept`."""
    trip = ((key,), v, n)
    last = kept and v == n - 1
    return [Step(StepKind.COMMENT, text="// x.cco:7: copy", line=7, trip=trip),
            Step(StepKind.COPY, dst_off=base + 64 * v, src_off=8192, nbytes=64, vec=True,
                 trip=trip),
            Step(StepKind.SYNC if last else StepKind.CTASYNC, seq=seq + v, trip=trip)]


def _sampled(iterations: list[list[Step]]) -> list[Step]:
    n = iterations[0][0].trip[2]  # type: ignore[index]
    return [s for v, it in enumerate(iterations) if v in (0, 1, n - 1) for s in it]


WAIT = [Step(StepKind.COMMENT, text="// x.cco:5: wait_signal", line=5),
        Step(StepKind.CWAIT, off=64, value=1), Step(StepKind.CTASYNC, seq=9)]
TAIL = [Step(StepKind.COMMENT, text="// x.cco:9: barrier", line=9), Step(StepKind.BARRIER)]


@pytest.mark.parametrize("shape", ["plain", "after-a-wait", "kept-last", "two-loops",
                                   "two-loops-kept"])
def test_folding_prints_what_reroll_prints_of_the_unrolled_steps(shape: str) -> None:
    """reroll(fold(sampled)) == reroll(unrolled), also where reroll's run starts before
    the loop (the wait's `ctasync` continues the pattern backwards: moe_combine) and
    where the last iteration keeps a group sync."""
    n = 20
    a = [_clear(v, n, "a", 0, 10, kept=shape.endswith("kept") or shape == "kept-last")
         for v in range(n)]
    b = [_clear(v, n, "b", 4096, 10 + n, kept=shape == "two-loops-kept") for v in range(n)]
    head = WAIT if shape != "plain" else []
    loops = [a, b] if shape.startswith("two") else [a]
    unrolled = [*head, *(s for lp in loops for it in lp for s in it), *TAIL]
    sampled = [*head, *(s for lp in loops for s in _sampled(lp)), *TAIL]
    folded = fold(sampled, roll=True)
    assert any(s.kind is StepKind.LOOP for s in folded)
    assert len(folded) < 20  # folded, not expanded
    assert reroll(folded) == reroll(unrolled)
    assert fold(sampled, roll=False) == tuple(unrolled)


def test_expand_gives_every_iteration() -> None:
    steps = [*_iteration(0, 6), *_iteration(1, 6), *_iteration(5, 6)]
    out = fold(steps, roll=False)
    assert [s.dst_off for s in out if s.kind is StepKind.COPY] == [0, 64, 128, 192, 256, 320]
    assert [s.seq for s in out if s.kind is StepKind.SYNC] == [1, 2, 3, 4, 5, 6]


def test_a_last_iteration_that_is_not_affine_is_refused() -> None:
    last = _iteration(9, 10)
    last[1] = replace(last[1], dst_off=7 * 64)  # not 9 strides on
    with pytest.raises(Unfoldable, match="not affine"):
        fold([*_iteration(0, 10), *_iteration(1, 10), *last], roll=True)


def test_vectors_that_change_between_iterations_are_refused() -> None:
    """dst moves by 8 bytes: 16-byte vectors at even iterations only; iterations 0, 1 and
    N-1 alone do not show it, the residues do."""
    def it(v: int) -> list[Step]:
        trip = (("l",), v, 9)
        return [Step(StepKind.COPY, dst_off=8 * v, src_off=8 + 4 * v, nbytes=16,
                     vec=False, trip=trip)]
    with pytest.raises(Unfoldable, match="vectors"):
        fold([*it(0), *it(1), *it(8)], roll=False)


def test_blocks_out_of_order_are_refused() -> None:
    with pytest.raises(Unfoldable, match="three blocks"):
        fold([*_iteration(0, 10), *_iteration(9, 10), *_iteration(1, 10)], roll=True)


def test_sync_numbers_after_a_loop_are_the_unrolled_ones() -> None:
    after = Step(StepKind.SYNC, seq=4)
    steps = [*_iteration(0, 10), *_iteration(1, 10), *_iteration(9, 10)]
    steps[-1] = replace(steps[-1], seq=3)
    segments, syncs = shift_syncs([Segment(steps=(*steps, after))], 4)
    seqs = [s.seq for s in segments[0].steps if s.kind is StepKind.SYNC]
    assert seqs == [1, 2, 10, 11] and syncs == 11


@pytest.mark.parametrize("options", [{"debug": True}, {"epoch_from_heap": True},
                                     {"max_ctas": 4}],
                         ids=["debug", "epoch-from-heap", "max-ctas-4"])
@pytest.mark.parametrize("name", ["moe_dispatch", "moe_combine"])
def test_moe_kernels_under_every_option_are_the_unrolled_ones(name: str,
                                                              options: dict[str, object]) -> None:
    path = ROOT / "protocols" / f"{name}.cco"
    protocol = parse_ir(path.read_text(encoding="utf-8"), f"protocols/{name}.cco")
    given = parse_params(["tokens=64", *SMALL], protocol)
    new, old = (compile_protocol(protocol, "nvshmem", source=f"protocols/{name}.cco", ranks=4,
                                 params=given, loops=loops, **options)  # type: ignore[arg-type]
                for loops in (True, False))
    assert new.unrolled == "" and new.files == old.files
