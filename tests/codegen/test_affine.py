"""`steps.Affine`: a loop body's moving slot is a typed value (constant, coefficient of the
trip `t`, coefficient of `t % 2`), decided on by the passes and printed only by
`codegen.spell.affine` (issue 26 item 2: no C text parsed back)."""

from __future__ import annotations

from dataclasses import replace

from ccogen.codegen.model import Segment
from ccogen.codegen.reroll import at_trip, evaluated, reroll
from ccogen.codegen.spell.affine import affine
from ccogen.codegen.spell.cuda import step as spell_step
from ccogen.codegen.spread import spread_reduce_rows
from ccogen.codegen.steps import Affine, Reduction, Step, StepKind


def test_an_affine_value_and_its_spelling() -> None:
    a = Affine(4096, 1024)
    assert [a.at(t) for t in range(3)] == [4096, 5120, 6144]
    assert Affine(10, 3, -5).at(1) == 8 and Affine(10, 3, -5).at(2) == 16
    assert affine(4096, 1024, 0, unsigned=True) == "static_cast<uint64_t>(4096LL + 1024LL * t)"
    assert affine(-1, 2, 0, unsigned=False) == "(-1 + 2LL * t)"
    assert affine(8, 0, 4, unsigned=True) == "static_cast<uint64_t>(8LL + 4LL * (t % 2))"
    assert affine(7, 0, 0, unsigned=True) == "7ULL" and affine(7, 0, 0, unsigned=False) == "7"


def test_reroll_gives_a_moving_offset_as_a_typed_affine() -> None:
    """Three copies whose offsets grow fold into a loop whose body carries the offsets as
    `Affine`s (not as C text in `rt`), prints the text reroll always printed, and
    evaluates back to the unrolled steps at every trip."""
    steps = [Step(StepKind.COPY, dst_peer=1, dst_off=4096 + 1024 * i, src_off=64 * i,
                  nbytes=64) for i in range(4)]
    (loop,) = reroll(steps)
    assert loop.kind is StepKind.LOOP and loop.value == 4
    (body,) = loop.body
    assert body.rt == ()
    assert dict(body.affine) == {"dst_off": Affine(4096, 1024), "src_off": Affine(0, 64)}
    assert body.moving("dst_off") == Affine(4096, 1024) and body.moving("nbytes") is None
    assert body.c_dst_off == "static_cast<uint64_t>(4096LL + 1024LL * t)"
    assert [evaluated(body, t) for t in range(4)] == steps
    assert [spell_step(at_trip(body, t), "group", "") for t in range(4)] \
        == [spell_step(s, "group", "") for s in steps]


def test_a_run_time_text_stays_a_text_and_wins_over_an_affine() -> None:
    """A slot with a run-time C text (`rt`) is not a typed offset: `moving` is None, so
    that no pass decides on text that only looks affine."""
    s = Step(StepKind.COPY, dst_off=0, nbytes=64, affine=(("dst_off", Affine(0, 64)),))
    assert s.moving("dst_off") == Affine(0, 64)
    text = replace(s, rt=(("dst_off", "static_cast<uint64_t>(0LL + 64LL * t)"),))
    assert text.moving("dst_off") is None


def test_reduce_rows_are_recognised_on_the_typed_offset_only() -> None:
    """codegen.spread spreads a `reduce` loop whose destination moves by at least a row
    (`Affine` coefficient >= the row's bytes); the same offset given only as C text, an
    overlapping stride or an alternating one keeps the loop."""
    red = Reduction(op="sum", dtype="f32", ctype="float", acc="float",
                    srcs=((-1, 0), (-1, 64)), weights=(), vector=16, elements=16)

    def spread(row: Step) -> StepKind:
        loop = Step(StepKind.LOOP, value=8, body=(row, Step(StepKind.CTASYNC)))
        (seg,) = spread_reduce_rows([Segment(steps=(Step(StepKind.SYNC), loop))])
        return seg.steps[1].kind

    row = Step(StepKind.REDUCE, dst_peer=-3, nbytes=64, reduction=red)
    assert spread(replace(row, affine=(("dst_off", Affine(0, 64)),))) is StepKind.SPREAD
    assert spread(replace(row, rt=(("dst_off", "static_cast<uint64_t>(0LL + 64LL * t)"),))) \
        is StepKind.LOOP
    assert spread(replace(row, affine=(("dst_off", Affine(0, 32)),))) is StepKind.LOOP
    assert spread(replace(row, affine=(("dst_off", Affine(0, 64, 64)),))) is StepKind.LOOP
    assert spread(row) is StepKind.LOOP  # a destination that does not move
