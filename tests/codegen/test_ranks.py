"""codegen.ranks: a program folded over the ranks runs, on each rank, exactly that rank's
own program.

The oracle: every library protocol on the SM targets at 2, 4 and 8 ranks is lowered per
rank as before (the kernels `SmBackend.generate` hands to `fold_ranks`); each folded
program, its rank expressions evaluated for one of its ranks (`ranks.at_rank`), must print
the text that rank's own program prints, step for step, comments aside (the folded
comment names every rank's).  Then the forms `fit` finds, on hand-made columns.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ccogen.codegen import ranks, reroll
from ccogen.codegen.backends import sm
from ccogen.codegen.model import BlockProgram, KernelModel, Segment
from ccogen.codegen.spell.cuda import step as spell_step
from ccogen.codegen.steps import Step, StepKind
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted(p.stem for p in (ROOT / "protocols").glob("*.cco"))
TARGETS = ("nccl-lsa", "nvshmem", "nccl-cft")


def _kernels(stem: str, target: str, nranks: int,
             monkeypatch: pytest.MonkeyPatch) -> list[KernelModel] | None:
    """The per-rank kernels of one compile (None: the target refuses the protocol)."""
    seen: list[KernelModel] = []

    def spy(k: KernelModel, n: int, inline_steps: int | None = None) -> KernelModel:
        seen.append(k)
        return ranks.fold_ranks(k, n, inline_steps)

    monkeypatch.setattr(sm, "fold_ranks", spy)
    path = ROOT / "protocols" / f"{stem}.cco"
    try:
        compile_protocol(load_ir(path), target, source=f"protocols/{stem}.cco", ranks=nranks,
                         params=library_params(path) or None)
    except DiagnosticError:
        return None
    return seen


def _printed(segments: tuple[Segment, ...]) -> tuple[list[str], list[str]]:
    """(every step's text at its scope with the comments blanked, the comments)."""
    notes = ranks.comments(BlockProgram(0, 0, segments, 0, 0))
    blank = ranks.map_program(
        segments, lambda s: replace(s, text="") if s.kind in ranks.COMMENTED else s)
    code: list[str] = []
    for seg in blank:
        code += [spell_step(s, "group", "") for s in seg.steps]
        for br in seg.branches:
            code += [spell_step(s, br.scope, "") for s in br.steps]
        if seg.join is not None:
            code.append(spell_step(seg.join, "group", ""))
    return code, notes


def _unrolled(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """`steps` with every loop of literal trips (`codegen.reroll`'s) expanded, trip by trip
    (`reroll.at_trip`), and the comments left out (a folded program prints a run of one
    comment once)."""
    out: list[Step] = []
    for s in steps:
        if s.kind is StepKind.LOOP and s.var == "t" and s.c_trips.isdigit():
            out += [reroll.at_trip(b, t) for t in range(int(s.c_trips))
                    for b in _unrolled(s.body)]
        elif s.kind is not StepKind.COMMENT:
            out.append(s)
    return tuple(out)


def _flat(segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
    return tuple(replace(seg, steps=_unrolled(seg.steps), branches=tuple(
        replace(b, steps=_unrolled(b.steps)) for b in seg.branches)) for seg in segments)


@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stem", PROTOCOLS)
def test_folded_programs_run_each_ranks_own_program(stem: str, target: str, nranks: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = _kernels(stem, target, nranks, monkeypatch)
    if kernels is None:
        pytest.skip(f"{target} refuses {stem}")
    for k in kernels:
        own = {(p.rank, p.block): p for p in k.programs}
        folded = ranks.fold_kernel(k, nranks)
        covered = sorted(label for p in folded.programs for label in p.labels)
        assert covered == sorted(p.case for p in k.programs)  # every rank, once
        for p in folded.programs:
            for label in p.labels:
                rank, block = divmod(label, k.blocks)
                mine = own[(rank, block)]
                at = BlockProgram(rank, block, ranks.at_rank(p, rank), p.syncs, label)
                code, notes = _printed(at.segments)
                want_code, want_notes = _printed(mine.segments)
                assert code == want_code, (k.name, rank, block)
                assert p.syncs == mine.syncs
                assert len(notes) == len(want_notes)
                assert all(w.removeprefix("// ") in n for n, w in zip(notes, want_notes,
                                                                      strict=True))
        # then the folded programs' per-peer runs rolled into loops (`fold_ranks`), affine
        # or alternating (`t % 2`): each trip prints the step the rank's own program does
        for p in ranks.fold_ranks(k, nranks).programs:
            for label in p.labels:
                rank, block = divmod(label, k.blocks)
                at = ranks.at_rank(replace(p, segments=_flat(p.segments)), rank)
                assert _printed(at)[0] == _printed(_flat(own[(rank, block)].segments))[0], (
                    k.name, rank, block)


def test_library_folds_to_one_program_per_block_at_eight_ranks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The protocols uniform in `me` get one function per logical block."""
    for stem in ("alltoall", "allreduce_oneshot", "moe_dispatch", "ring_allgather"):
        kernels = _kernels(stem, "nccl-lsa", 8, monkeypatch)
        assert kernels is not None
        for k in kernels:
            assert len(ranks.fold_kernel(k, 8).programs) == k.blocks, stem


@pytest.mark.parametrize(("column", "form"), [
    ([5, 5, 5, 5], ()),
    ([512, 516, 520, 524], (512, 4)),
    ([1, 2, 3, 0], (0, 1, 1, 1)),  # (me + 1) % 4
    ([3, 0, 1, 2], (0, 1, 1, 3)),  # (me - 1) % 4
    ([2, 2, 1, 1], (1, 1, 1)),  # lane 1 of peers(): 2 where me <= 1
    ([-1, 1, 1, 1], (1, -2, 0)),  # rank 0 apart (also a step: me <= 0)
    ([1, -1, 1, 1], (1, -2, 1, -1)),  # my own lane: local
])
def test_fit_finds_the_form(column: list[int], form: tuple[int, ...]) -> None:
    assert ranks.fit([0, 1, 2, 3], column, 4) == form


def test_fit_refuses_what_no_form_fits() -> None:
    assert ranks.fit([0, 1, 2, 3], [0, 7, 1, 9], 4) is None


@pytest.mark.parametrize("form", [(3, 5), (1, 1, 2), (0, 1, 3, -1), (4, -1, 3, 2)])
@pytest.mark.parametrize("suffix", ["", "LL", "ULL"])
def test_spelled_forms_evaluate_back(form: tuple[int, ...], suffix: str) -> None:
    """`at_rank` reads back every form `spell` prints, with the literal's suffix."""
    text = ranks.spell(form, suffix, 4)
    for r in range(4):
        s = Step(StepKind.COPY, rt=(("dst_off", text),))
        p = BlockProgram(0, 0, (Segment(steps=(s,)),), 0, 0, cases=(0, 1))
        (seg,) = ranks.at_rank(p, r)
        got = seg.steps[0].c_dst_off
        if len(form) == 2:
            want = form[0] + form[1] * r
        elif len(form) == 3:
            want = form[0] + form[1] * (r <= form[2])
        elif form[3] < 0:
            want = form[0] + form[1] * (r == form[2])
        else:
            want = form[0] + form[1] * ((form[2] * r + form[3]) % 4)
        assert got == f"{want}{suffix}"
