"""codegen.spread: the rows of a run-time `warps` block are spread over every warp of a
persistent group of CTAs (no warp loops over its destination's rows), each CTA signals
its share after its rows, the receivers wait for the count times the CTA count, and a
fork whose rows are not provably independent keeps today's code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccogen.codegen.model import Branch, Segment, Step
from ccogen.codegen.spread import CHUNK_BYTES, plan_fork
from ccogen.codegen.steps import StepKind
from ccogen.compiler import compile_protocol
from ccogen.syntax import load_ir

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("nccl-lsa", "nvshmem")
SHAPES: dict[str, dict[str, int]] = {
    "alltoallv": {"cap": 65536},  # 128 KiB to each peer: 16 chunks each
    "moe_dispatch": {"tokens": 16, "hidden": 128, "k": 4},
    "moe_combine": {"tokens": 16, "hidden": 128, "k": 4},
}


def _generate(stem: str, target: str, ranks: int, **options: object) -> tuple[str, dict]:
    path = ROOT / "protocols" / f"{stem}.cco"
    files = compile_protocol(load_ir(path), target, source=path.name, ranks=ranks,
                             params=dict(SHAPES[stem]), **options).files  # type: ignore[arg-type]
    return files["kernels.cu"], json.loads(files["manifest.json"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ranks", [2, 4, 8])
@pytest.mark.parametrize("stem", sorted(SHAPES))
def test_rows_are_spread_over_a_persistent_grid(stem: str, ranks: int, target: str) -> None:
    text, manifest = _generate(stem, target, ranks)
    (kernel,) = manifest["kernels"]
    assert kernel["grid"] > 1 and kernel["cooperative"]
    assert kernel["grid"] <= manifest["max_ctas"]
    # no warp of CTA 0 loops over its destination's rows any more
    assert "if (c.cta_in_group == 0) {" not in text
    assert "ccogen_copy_warp(c, " not in text.split("// ---- end of the")[-1]
    programs = text.count("for (uint64_t i = ccogen_spread_first(c); i < ")
    # combine: the rows back, the clear (forks of copies), then its reduce rows
    forks = 2 if stem == "moe_combine" else 1
    assert programs == ranks * (forks + (stem == "moe_combine"))
    # every destination a case, each a chunked copy
    cases = ranks if stem != "alltoallv" else ranks - 1
    assert text.count("ccogen_copy_chunk_warp(c, ") == ranks * cases * forks
    # the `// file.cco:LINE` comments of the ops stay
    assert re.search(rf"// {stem}.cco:\d+: (put|copy)\n", text)


@pytest.mark.parametrize("target", TARGETS)
def test_signals_follow_the_rows_of_every_cta_and_waits_count_them(target: str) -> None:
    text, manifest = _generate("moe_dispatch", target, 4)
    grid = manifest["kernels"][0]["grid"]
    body = text.split("ccogen_moe_dispatch_dispatch_r1_b0(const ccogen_ctx& c) {")[1]
    body = body.split("\n}\n")[0]
    # after the spread loop: the CTA meets, then each CTA signals each destination once,
    # then the group barrier of the fork's join
    tail = body.split("default: break;\n    }\n  }\n", 1)[1]
    calls = [line.strip().split("(")[0] for line in tail.splitlines()
             if line.strip().startswith("ccogen_")]
    assert calls[:5] == ["ccogen_ctasync_group", *["ccogen_csignal_group"] * 3,
                         "ccogen_sync_group"]
    queue1 = re.findall(r"ccogen_csignal_group\(c, (\d+), (\d+)ULL, (\d+)ULL\)", tail)[:3]
    assert sorted(int(p) for p, _, _ in queue1) == [0, 2, 3]
    # receivers wait for 1 signal x every CTA x the epoch (monotonic slots, no reset): the
    # rows' signal on queue 1, and as every CTA also runs the ops outside the spread loop,
    # the credit (queue 2) and the count's put (queue 0) too; 3 peers each at 4 ranks
    source = (ROOT / "protocols" / "moe_dispatch.cco").read_text().splitlines()
    for queue in (0, 1, 2):
        line = next(i for i, t in enumerate(source, 1) if f"wait_signal(p, queue={queue})" in t)
        waits = re.findall(rf"ccogen_cwait_group\(c, (\d+)ULL, 1ULL, 1ULL, {line}, (\d), "
                           rf"{queue}, 1, (\d+)ULL\)", body)
        assert sorted(int(p) for _, p, _ in waits) == [0, 2, 3], queue
        assert all(int(scale) == grid for _, _, scale in waits)
    assert "ccogen_reset" not in body


@pytest.mark.parametrize("target", TARGETS)
def test_the_grid_stays_within_the_sm_budget(target: str) -> None:
    _, manifest = _generate("moe_dispatch", target, 8, max_ctas=3)
    assert manifest["kernels"][0]["grid"] == 3
    _, manifest = _generate("moe_dispatch", target, 8)
    # 8 destinations x 16 tokens = 128 rows over 16 warps a CTA: 8 CTAs, one row a warp
    assert manifest["kernels"][0]["grid"] == 8


# ----------------------------------------------------------------------------- plan_fork


def _row(peer: int, t: int, rt: bool = True) -> list[Step]:
    dst = 4096 + 256 * t
    copy = Step(StepKind.COPY, dst_peer=peer, dst_off=dst, src_peer=-2, src_off=256 * t, nbytes=256,
                vec=True,
                rt=(("dst_off", "rt_dst"), ("nbytes", "rt_n")) if rt else (),
                let=((("rt_dst", f"{dst}LL"), ("rt_n", f"ld({8 * t}LL)")) if rt else ()))
    return [Step(StepKind.COMMENT, text="// p.cco:9: put", line=9), copy,
            Step(StepKind.SYNC, seq=t + 1)]


def _fork(rows: int, *, tail: tuple[Step, ...] = (Step(StepKind.SYNC, seq=99),
                                                   Step(StepKind.SIGNAL, peer=1, off=64, value=1)),
          rt: bool = True) -> Segment:
    branches = tuple(Branch("warp", w, tuple(s for t in range(rows)
                                             for s in _row(w + 1, t, rt)) + tail)
                     for w in range(2))
    return Segment(branches=branches, join=Step(StepKind.SYNC, seq=100))


def test_plan_folds_each_branch_into_one_case() -> None:
    plan = plan_fork(_fork(5), frozenset())
    assert plan is not None
    spread = plan.step.spread
    assert spread is not None
    assert (spread.branches, spread.iterations, spread.chunks) == (2, 5, 1)
    assert spread.chunk_bytes == CHUNK_BYTES and plan.items == 10
    for case in spread.cases:
        assert [s.kind for s in case] == [StepKind.COMMENT, StepKind.CHUNK]  # no per-row sync
        (lets,) = [s.let for s in case if s.kind is StepKind.CHUNK]
        assert dict(lets)["rt_n"] == "ld((0LL + 8LL * t))"
    assert [s.kind for s in plan.tail] == [StepKind.CSIGNAL, StepKind.CSIGNAL]


def test_dependent_or_static_or_counted_rows_stay_a_fork() -> None:
    # every row of a branch to the same bytes: the order of the rows matters
    same = tuple(Branch("warp", w, tuple(s for t in range(4) for s in (
        Step(StepKind.COMMENT, text="// p.cco:9: put"),
        Step(StepKind.COPY, dst_peer=w + 1, dst_off=4096, src_peer=-2, src_off=256 * t, nbytes=256,
             rt=(("nbytes", "rt_n"),), let=(("rt_n", f"ld({8 * t}LL)"),)),
        Step(StepKind.SYNC, seq=t + 1)))) for w in range(2))
    assert plan_fork(Segment(branches=same, join=Step(StepKind.SYNC)), frozenset()) is None
    assert plan_fork(_fork(4, rt=False), frozenset()) is None  # no run-time rows
    assert plan_fork(_fork(4), frozenset({64})) is None  # a counter's bytes: the leader's
    waits = _fork(4, tail=(Step(StepKind.WAIT, off=8, value=1),))
    assert plan_fork(waits, frozenset()) is None
    assert plan_fork(Segment(steps=(Step(StepKind.SYNC),)), frozenset()) is None


def test_branches_of_different_lengths_stay_a_fork() -> None:
    seg = _fork(4)
    short = Branch("warp", 1, tuple(s for t in range(3) for s in _row(2, t)))
    seg = Segment(branches=(seg.branches[0], short), join=seg.join)
    assert plan_fork(seg, frozenset()) is None


def test_large_rows_are_chunked() -> None:
    rows = [Step(StepKind.COMMENT, text="// p.cco:9: put"),
            Step(StepKind.COPY, dst_peer=1, dst_off=0, src_peer=-2, src_off=0,
                 nbytes=3 * CHUNK_BYTES + 16, rt=(("nbytes", "rt_n"),),
                 let=(("rt_n", "ld(0LL)"),)),
            Step(StepKind.SYNC, seq=1)]
    plan = plan_fork(Segment(branches=(Branch("warp", 0, tuple(rows)),), join=Step(StepKind.SYNC)),
                     frozenset())
    assert plan is not None and plan.step.spread is not None
    assert plan.step.spread.chunks == 4 and plan.items == 4


# ----------------------------------------------------------------------------- toolchain


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ranks", [4])  # 2 and 8 print the same templates (a build is ~10 s)
@pytest.mark.parametrize("stem", sorted(SHAPES))
def test_spread_kernels_build_without_warnings(stem: str, ranks: int, target: str,
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The spread kernels (small shapes, as scripts/v2_runtime_mps_run.py runs them, and
    alltoallv's chunked rows) build with nvcc -Werror; skipped without the toolchain."""
    from ccogen.rt.api import compile_for_run
    from ccogen.toolchains.cubin import build_cubin
    from tests.runtime.conftest import require_toolchain

    require_toolchain(target)
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = ROOT / "protocols" / f"{stem}.cco"
    out = tmp_path / "gen"
    compile_for_run(load_ir(path), path.name, target, ranks, SHAPES[stem], out, debug=False)
    assert "ccogen_spread_first(c)" in (out / "kernels.cu").read_text()
    cubin = build_cubin(out, target, "sm_90", False, extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0


# ----------------------------------------------------------------------- moe_combine's rows


def _serial_group_rows(target: str, ranks: int) -> tuple[int, int, int]:
    """From the model the backend prints (moe_combine, small shape): the rows every CTA
    runs one after another (group `loop` steps over copies or reduces: each row cut into
    1/ctas slices, a CTA meet between rows), the spread items, and the CTAs."""
    from ccogen.codegen import Options
    from ccogen.codegen.backends import get_backend

    path = ROOT / "protocols" / "moe_combine.cco"
    instance = compile_protocol(load_ir(path), target, source=path.name, ranks=ranks,
                                params=dict(SHAPES["moe_combine"])).instance
    backend = get_backend(target)
    backend.generate(instance, path.name, Options())  # the backend's per-instance choices
    model, _ = backend.printed_model(instance, path.name, Options())  # type: ignore[attr-defined]
    (kernel,) = model.kernels
    serial = items = 0
    for program in kernel.programs:
        for seg in program.segments:
            for s in seg.steps:
                if s.kind is StepKind.LOOP and any(
                        b.kind in (StepKind.COPY, StepKind.REDUCE) for b in s.body):
                    serial += s.value
                if s.kind is StepKind.SPREAD:
                    assert s.spread is not None
                    items += s.spread.items
    return serial, items, kernel.ctas_per_block


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ranks", [2, 8])
def test_combine_clear_and_reduce_rows_are_spread(target: str, ranks: int) -> None:
    """moe_combine's clear (a `warps` fork) and its reduce loop run one row a warp over
    the whole group: no CTA walks the token rows in turn (was ranks x tokens clear rows
    plus tokens reduce rows per CTA, each a 1/ctas slice and a `__syncthreads`)."""
    serial, items, ctas = _serial_group_rows(target, ranks)
    tokens, hidden = SHAPES["moe_combine"]["tokens"], SHAPES["moe_combine"]["hidden"]
    chunks = -(-hidden * 2 // CHUNK_BYTES)
    assert ctas > 1
    assert serial == 0
    # per program: the rows back and the clear (ranks x tokens x chunks each), the reduce
    per_program = 2 * ranks * tokens * chunks + tokens
    programs = 1 if get_backend_folds(target) else ranks
    assert items == programs * per_program


def get_backend_folds(target: str) -> bool:
    from ccogen.codegen.backends import get_backend

    return bool(getattr(get_backend(target), "folds_ranks", False))


def test_a_reduce_loop_that_reads_its_own_rows_stays_a_loop() -> None:
    """A reduce row whose source is the destination's buffer (row t may read row t-1)
    is not spread; nor a loop followed by more work than a `quiet`, nor one that no group
    sync precedes."""
    from ccogen.codegen.spread import spread_reduce_rows
    from ccogen.codegen.steps import Affine, Reduction

    def loop(src_peer: int) -> Step:
        red = Reduction(op="sum", dtype="f32", ctype="float", acc="float",
                        srcs=((src_peer, 0), (-1, 64)), weights=(), vector=16, elements=16)
        body = Step(StepKind.REDUCE, dst_peer=-3, dst_off=0, nbytes=64, reduction=red,
                    affine=(("dst_off", Affine(0, 64)),))  # row t at 64 * t (codegen.reroll)
        return Step(StepKind.LOOP, value=8, body=(body, Step(StepKind.CTASYNC)))

    sync = Step(StepKind.SYNC)  # the group's barrier: every source row written before
    spread = spread_reduce_rows([Segment(steps=(sync, loop(-1), Step(StepKind.QUIET)))])
    assert spread[0].steps[1].kind is StepKind.SPREAD
    own = spread_reduce_rows([Segment(steps=(sync, loop(-3),))])
    assert own[0].steps[1].kind is StepKind.LOOP
    followed = spread_reduce_rows([Segment(steps=(sync, loop(-1), Step(StepKind.COPY)))])
    assert followed[0].steps[1].kind is StepKind.LOOP
    # only a CTA meet before it: each CTA wrote its own slice of the sources, and a warp
    # reducing whole rows would read the other CTAs' slices unordered
    for before in ((), (Step(StepKind.CTASYNC),), (Step(StepKind.COPY),)):
        unsynced = spread_reduce_rows([Segment(steps=(*before, loop(-1)))])
        assert unsynced[0].steps[-1].kind is StepKind.LOOP
