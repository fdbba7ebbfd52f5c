"""Loops to a run-time count (language reference §14, "Loops to a run-time count"):
`for t in range(n)` with `n` loaded and bounded by `require` runs to the bound, each op
guarded by `t < n`; synchronisation inside is E038."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ccogen.compiler import compile_protocol
from ccogen.driver import CheckOptions, check_text
from ccogen.instantiate import instantiate
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt
from ccogen.sim import simulate
from ccogen.sim.runtime import contents_with
from ccogen.syntax import parse_ir

ROOT = Path(__file__).resolve().parent.parent

GATHER = '''protocol gather_n(tokens: int = 8, hidden: int = 4, T: dtype = f32):
    """Every rank sends its first `ntok[0]` rows of `x` to every rank."""
    team lsa
    queues 2
    window recv: T[nranks * tokens * hidden]
    window got: i32[nranks]
    buffer x: T[tokens * hidden]
    buffer ntok: i32[1]

    require:
        0 <= ntok[0] <= tokens

    kernel gather(threads=256):
        barrier()
        lanes p in peers():
            put(p, dst=got[me : me + 1], src=ntok[0 : 1], queue=0, signal="remote")
        n = load(ntok[0])
        warps p in ranks():
            for t in range(n):
                row = (me * tokens + t) * hidden
                if p == me:
                    copy(dst=recv[row : row + hidden], src=x[t * hidden : (t + 1) * hidden])
                else:
                    put(p, dst=recv[row : row + hidden], src=x[t * hidden : (t + 1) * hidden],
                        queue=1)
            if p != me:
                signal(p, queue=1)
        copy(dst=got[me : me + 1], src=ntok[0 : 1])
        lanes p in peers():
            wait_signal(p, queue=0)
            wait_signal(p, queue=1)
        quiet()

    ensure:
        for p in ranks():
            got[p] == init(ntok@p)[0]
            base = p * tokens * hidden
            recv[base : base + got[p] * hidden] == init(x@p)[0 : got[p] * hidden]
'''


def _rows(inst: object, rank: int) -> list[object]:
    ops = inst.ranks[rank]  # type: ignore[attr-defined]
    return [op for op in ops
            if op.kind is OpKind.COPY and op.dst is not None and op.dst.window == "recv"]


def test_the_symbolic_instance_runs_to_the_bound_with_guarded_lengths() -> None:
    inst, diags = instantiate(parse_ir(GATHER, "g.cco"), 2, {"tokens": 8})
    assert inst is not None and not [d for d in diags if d.is_error]
    rows = _rows(inst, 0)
    assert len(rows) == 8  # the capacity, whatever the count
    for t, op in enumerate(rows):
        dst = op.dst  # type: ignore[attr-defined]
        assert (dst.start, dst.stop) == (16 * t, 16 * t + 16)
        start, stop = op.dst.runtime  # type: ignore[attr-defined]
        assert start == 16 * t and isinstance(stop, Rt) and "ntok@0[0]" in stop.text()


def test_a_concrete_instance_moves_the_rows_before_the_count_only() -> None:
    protocol = parse_ir(GATHER, "g.cco")
    contents = contents_with(protocol, 2, {"tokens": 8},
                             {"ntok": [np.array([3]), np.array([8])]})
    inst, diags = instantiate(protocol, 2, {"tokens": 8}, contents=contents)
    assert inst is not None and not [d for d in diags if d.is_error]
    sizes = [[op.dst.size for op in _rows(inst, r)] for r in (0, 1)]  # type: ignore[attr-defined]
    assert sizes == [[16] * 3 + [0] * 5, [16] * 8]
    # the same ops at every count: a launch of another draw has as many
    assert len(inst.ranks[0]) == len(inst.ranks[1])


def test_the_simulator_judges_every_count_and_catches_rows_past_it() -> None:
    report = simulate(GATHER, ranks=[2, 3], seeds=1)
    assert report.passed, [d.message for d in report.diagnostics]
    # claiming every row up to the capacity is wrong for the draws below it (`low`: 0)
    wrong = GATHER.replace(
        "base + got[p] * hidden] == init(x@p)[0 : got[p] * hidden]",
        "base + tokens * hidden] == init(x@p)[0 : tokens * hidden]")
    assert wrong != GATHER
    report = simulate(wrong, ranks=[2], seeds=1)
    assert not report.passed and {d.code for d in report.diagnostics} == {"E033"}


def test_synchronisation_inside_is_e038() -> None:
    text = GATHER.replace(
        "queue=1)\n            if p != me:",
        "queue=1)\n                    signal(p, queue=1)\n            if p != me:")
    assert text != GATHER
    result = check_text(text, "g.cco", CheckOptions(ranks=(2,)))
    codes = {d.code for d in result.diagnostics if d.is_error}
    assert codes == {"E038"}


def test_an_unbounded_count_says_which_require_line_to_add() -> None:
    text = GATHER.replace("0 <= ntok[0] <= tokens", "0 <= ntok[0]")
    result = check_text(text, "g.cco", CheckOptions(ranks=(2,)))
    loops = [d for d in result.diagnostics if "the bound of a `for` loop" in d.message]
    assert loops and all(d.code == "E004" for d in loops)
    assert loops[0].help is not None and "0 <= ntok[0] <= CAPACITY" in loops[0].help


def test_the_generated_lengths_read_nothing_past_the_count() -> None:
    """The dispatch's length reads the token's routing row: only behind the guard."""
    source = "protocols/moe_dispatch.cco"
    protocol = parse_ir((ROOT / source).read_text(encoding="utf-8"), source)
    compiled = compile_protocol(protocol, "nvshmem", source=source, ranks=2,
                                params={"tokens": 16, "hidden": 64, "k": 2})
    lengths = [line for line in compiled.files["kernels.cu"].splitlines() if "rt_n = " in line]
    assert lengths
    for line in lengths:  # `(ntok > t) ? LENGTH : 0`: one load (the count) before the `?`
        guard, _, rest = line.partition(" ? ")
        assert guard.count("ccogen_ld<") == 1 and guard.endswith("> (0LL + 1LL * t))")
        assert rest.count("ccogen_ld<") == 2  # the routing row's k = 2 entries


def test_the_library_dispatch_takes_a_count_and_stays_sampled() -> None:
    protocol = parse_ir((ROOT / "protocols" / "moe_dispatch.cco").read_text(encoding="utf-8"),
                        "protocols/moe_dispatch.cco")
    inst, diags = instantiate(protocol, 4, {"tokens": 64, "hidden": 64}, sample=True)
    assert inst is not None and not [d for d in diags if d.is_error]
    long = [note for note in inst.loops if note.trips == 64]  # the kernel's and `ensure`'s
    assert len(long) == 2 and all(note.sampled for note in long)


SUM_N = '''protocol sum_n(tokens: int = 8, hidden: int = 8, T: dtype = f32):
    """y[t] = w[t] * a[t] + b[t] for the first `ntok[0]` rows; rows past it untouched."""
    team lsa
    buffer a: T[tokens * hidden]
    buffer b: T[tokens * hidden]
    buffer w: f32[tokens]
    buffer y: T[tokens * hidden]
    buffer ntok: i32[1]

    require:
        0 <= ntok[0] <= tokens

    kernel add(threads=256):
        n = load(ntok[0])
        for t in range(n):
            reduce(dst=y[t * hidden : (t + 1) * hidden],
                   srcs=[a[t * hidden : (t + 1) * hidden], b[t * hidden : (t + 1) * hidden]],
                   op="sum", weights=[load(w[t]), 1.0])

    ensure:
        for t in range(tokens):
            h = (t < init(ntok)[0]) * hidden
            r = t * hidden
            y[r : r + h] == sum([init(a)[r : r + h], init(b)[r : r + h]],
                                weights=[init(w)[t], 1.0])
'''


def test_a_guarded_reduce_is_generated_with_its_run_time_length() -> None:
    """A `reduce` in a loop to a run-time count: its length is the row times `n > t` on
    the SM targets (the static offsets kept), passed to the device reduce."""
    protocol = parse_ir(SUM_N, "sum_n.cco")
    assert not [d for d in check_text(SUM_N, "sum_n.cco", CheckOptions(ranks=(2,))).diagnostics
                if d.is_error]
    for target in ("nvshmem", "nccl-lsa"):
        compiled = compile_protocol(protocol, target, source="sum_n.cco", ranks=2)
        text = compiled.files["kernels.cu"]
        lengths = [line for line in text.splitlines() if "rt_n = " in line]
        assert lengths, target
        for line in lengths:  # the row's 32 bytes times `n > t`: one load, the count's
            assert "32LL * " in line and line.count("ccogen_ld<") == 1 and \
                "> (0LL + 1LL * t)" in line, (target, line)
        calls = [line for line in text.splitlines() if "ccogen_reduce_" in line and "(c," in line]
        assert calls and all(", rt_n, " in line for line in calls), (target, calls)
