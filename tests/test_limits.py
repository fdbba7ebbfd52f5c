"""Bounded resources (`ccogen.limits`): every limit is a coded diagnostic naming the limit
and the flag, found before the work that would exhaust the machine; and the classes of
input that used to end in a traceback."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ccogen import cli
from ccogen.diag import Diagnostic, error
from ccogen.diag.merge import FindingSet, capped, ranks_note
from ccogen.driver import CheckOptions, check_protocol, check_text
from ccogen.errors import DiagnosticError
from ccogen.limits import MAX_DEPTH, Limits
from ccogen.syntax import parse_ir
from tests.helpers import run_child

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "protocols" / "alltoall.cco"
HEAD = """protocol r(block: bytes = 64 B):
    team lsa
    window send: nranks * block
    window recv: nranks * block

    kernel k(threads=64):
"""
SHIFT = """protocol shift(block: bytes = 64 B):
    team lsa
    queues 1
    between_launches: host_sync
    window send: block
    window recv: block

    kernel k(threads=64):
        put((me + 1) % nranks, dst=recv[0:block], src=send[0:block], queue=0, signal="remote")
        quiet()
        wait_signal((me + nranks - 1) % nranks, queue=0)
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def codes(text: str, **options: object) -> list[str]:
    return [d.code for d in check_text(text, "t.cco", CheckOptions(**options)).diagnostics]


# ----------------------------------------------------------------------------- recursion


@pytest.mark.parametrize("text", ids=["terms", "signs", "ifs"], argvalues=[
    HEAD + "        for i in range(" + "+".join(["1"] * 400) + "):\n            quiet()\n",
    HEAD + "        for i in range(" + "-" * 600 + "1):\n            quiet()\n",
    HEAD + "".join("    " * (2 + d) + "if me == 0:\n" for d in range(300))
    + "    " * 302 + "quiet()\n",
])
def test_deep_source_is_e006_not_a_recursion_error(text: str) -> None:
    from ccogen.syntax.format import format_text

    for stage in (lambda: parse_ir(text, "t.cco"), lambda: format_text(text, "t.cco")):
        with pytest.raises(DiagnosticError) as caught:
            stage()
        d = caught.value.diagnostics[0]
        assert d.code == "E006" and f"more than {MAX_DEPTH} levels" in d.message


def test_deep_ir_built_in_python_is_e006() -> None:
    import dataclasses

    import ccogen
    from ccogen.ir import nodes as ir
    from ccogen.syntax import to_source

    protocol = parse_ir(GOOD.read_text(), "a.cco")
    e: ir.Expr = ir.Const(value=1)
    for _ in range(3000):
        e = ir.BinOp(op="+", left=e, right=ir.Const(value=1))
    deep = dataclasses.replace(protocol, windows=(
        dataclasses.replace(protocol.windows[0], size=e), *protocol.windows[1:]))
    assert [d.code for d in check_protocol(deep).diagnostics] == ["E006"]
    assert [d.code for d in ccogen.simulate(deep, ranks=2, seeds=1).diagnostics] == ["E006"]
    with pytest.raises(DiagnosticError):
        to_source(deep)


def test_nesting_under_the_limit_still_works() -> None:
    text = HEAD + "        for i in range(" + "+".join(["1"] * 100) + "):\n            quiet()\n"
    text += "".join("    " * (2 + d) + "if me == 0:\n" for d in range(50))
    text += "    " * 52 + "quiet()\n"
    result = check_protocol(parse_ir(text, "t.cco"), CheckOptions(ranks=(2,)))
    assert not result.has_errors


# ----------------------------------------------------------------------------- limits


def test_team_of_tens_of_thousands_is_refused_up_front() -> None:
    start = time.process_time()
    result = check_text(SHIFT, "t.cco", CheckOptions(ranks=(50_000,)))
    assert [d.code for d in result.diagnostics] == ["E006"]
    assert "--limit ranks=50000" in (result.diagnostics[0].help or "")
    assert time.process_time() - start < 5


def test_compile_takes_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "shift.cco"
    source.write_text(SHIFT)
    code, out, _ = run(capsys, "compile", str(source), "--target", "mori-sdma", "--ranks",
                       "40", "--limit", "ranks=32", "-o", str(tmp_path / "out"))
    assert code == 1 and "error[E006]" in out and "--limit ranks=40" in out
    code, out, _ = run(capsys, "compile", str(source), "--target", "mori-sdma", "--ranks",
                       "40", "--limit", "ranks=64", "-o", str(tmp_path / "out"))
    assert code == 0


def test_window_of_2_62_bytes_does_not_compile() -> None:
    from ccogen.compiler import compile_protocol
    from ccogen.errors import DiagnosticError

    protocol = parse_ir(SHIFT.replace("window send: block", "window send: block * 2**56"), "t.cco")
    with pytest.raises(DiagnosticError) as caught:
        compile_protocol(protocol, "mori-sdma", source="t.cco", ranks=2, params={})
    assert [d.code for d in caught.value.diagnostics] == ["E006"]


def test_simulate_refuses_windows_past_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", str(GOOD), "--param", "block=1GiB", "--ranks", "8")
    # alltoall at 1 GiB x 8 ranks moves 7/8 of its 128 GiB of `send` and `recv` (each rank
    # reads 7 blocks of `send` and 7 of `recv` are written), and every rank's whole 16 x 8 B
    # `credit` window (its own slot is read, the 7 peers' slots written): too much even sparse
    ranks, block = 8, 1 << 30
    touched = ranks * (2 * (ranks - 1) * block + 16 * ranks)  # 120,259,085,312
    assert code == 1 and f"error[E006]: simulating would hold {touched:,} bytes that ops" in out
    assert f"--limit sim-bytes={touched}" in out
    code, out, _ = run(capsys, "simulate", str(GOOD), "--param", "block=64KiB", "--ranks", "2",
                       "--seeds", "1", "--limit", "sim-bytes=64KiB")
    assert code == 1 and "E006" in out


def test_large_windows_are_backed_sparsely_with_the_same_results(
        capsys: pytest.CaptureFixture[str]) -> None:
    """8 GiB windows of which 64 KiB move: simulated in full, the summary says how."""
    import ccogen

    text = (SHIFT.replace("block: bytes = 64 B", "block: bytes = 64 KiB, big: bytes = 8 GiB")
            .replace("window send: block", "window send: big")
            .replace("window recv: block", "window recv: big")
            .replace("dst=recv[0:block]", "dst=recv[big - block : big]"))
    good = text + ("\n    ensure:\n        recv[big - block : big] == "
                   "init(send@((me + nranks - 1) % nranks))[0:block]\n")
    report = ccogen.simulate(good, ranks=3, seeds=2)
    assert report.passed and "windows backed sparsely" in report.summary()
    assert "393,216 of 51,539,607,552 bytes" in report.summary()
    bad = text + "\n    ensure:\n        recv[big - block : big] == init(send@me)[0:block]\n"
    report = ccogen.simulate(bad, ranks=3, seeds=1)
    (d,) = report.diagnostics
    assert d.code == "E033" and any("came from `init(send@2)[0:64]`" in n for n in d.notes)
    small = ccogen.simulate(bad.replace("8 GiB", "1 MiB"), ranks=3, seeds=1)
    assert [x.code for x in small.diagnostics] == ["E033"]  # the dense run finds it too
    assert "sparsely" not in small.summary()


def test_sparse_windows_need_no_address_space_either() -> None:
    """256 GiB windows under a 3 GiB address-space cap: only the touched bytes exist."""
    import sys

    script = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "import ccogen\n"
        f"text = {SHIFT!r}.replace('block: bytes = 64 B', 'block: bytes = 64 KiB, "
        "big: bytes = 256 GiB').replace('window send: block', 'window send: big')"
        ".replace('window recv: block', 'window recv: big')\n"
        "r = ccogen.simulate(text, ranks=2, seeds=1)\n"
        "print(r.passed, r.summary())\n")
    out = run_child([sys.executable, "-c", script], cpu_s=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("True ") and "262,144 of 1,099,511,627,776 bytes" in out.stdout


def test_analysis_memory_is_bounded() -> None:
    result = check_protocol(parse_ir(GOOD.read_text(), "a.cco"),
                            CheckOptions(ranks=(8,), limits=Limits(analysis_bytes=1 << 10)))
    d = result.diagnostics[0]
    assert d.code == "E006" and "happens-before analysis would need" in d.message
    assert "--limit analysis-bytes=" in (d.help or "")


def test_findings_per_rule_are_capped_and_counted() -> None:
    text = (ROOT / "tests" / "lint" / "E005-bad-thread-count.cco").read_text()
    assert codes(text) == ["E005"] * 2  # (the lanes of nranks=4 and 8 are one finding)
    few = check_text(text, "t.cco", CheckOptions(limits=Limits(findings=1))).diagnostics
    assert [d.code for d in few] == ["E005"]
    # the other E005 (nranks=4 and 8) was never made: those instances stopped at the limit
    # while instantiating, and the kept finding says so
    assert any(n.startswith("stopped after 1 E005 finding in the instance nranks=4; nranks=8")
               for n in few[0].notes), few[0].notes
    # the limit also stops each instance's evaluation at its count (#29 item 8)
    from ccogen.instantiate import instantiate

    _, four = instantiate(parse_ir(text, "t.cco"), 4, {}, Limits(findings=1))
    assert [d.code for d in four] == ["E005"]
    assert any(n.startswith("stopped after 1 E005 finding in this instance")
               for n in four[0].notes)


@pytest.mark.parametrize("argv,message", [
    (["--limit", "nope=3"], "--limit takes NAME=N"),
    (["--limit", "ranks=0"], "at least 1"),
    (["--limit", "ranks=2k"], "--limit ranks=2k"),
    (["--max-schedules", "0", "--exhaustive"], "exploring nothing is not passing"),
    (["--time-limit", "0", "--exhaustive"], "--time-limit must be"),
    (["--time-limit", "nan", "--exhaustive"], "--time-limit must be"),
    (["--target", "nope"], "unknown target"),
    (["--epochs", "99999999999999999999"], "--epochs at most 1,000"),
    (["--seeds", "99999999999999999999"], "--seeds is at most 1,000,000"),
])
def test_simulate_misuse_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                argv: list[str], message: str) -> None:
    code, _, err = run(capsys, "simulate", str(GOOD), *argv)
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1


def test_a_time_limit_that_allows_no_schedule_does_not_pass(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not a pass and not a finding: exit 4, saying it ran out of budget and how far."""
    code, out, _ = run(capsys, "simulate", str(GOOD), "--exhaustive", "--ranks", "2",
                       "--time-limit", "1e-12")
    assert code == 4
    assert "not finished: the exploration ran out of its budget" in out
    assert "nranks=2 stopped after 1e-12 CPU s" in out
    code, out, err = run(capsys, "simulate", str(GOOD), "--exhaustive", "--ranks", "2",
                         "--time-limit", "1e-12", "--format", "json")
    assert code == 4 and out == "[]\n" and "not finished" in err


@pytest.mark.parametrize("command", ["lint", "simulate", "compile", "build"])
def test_unknown_target_is_a_usage_error_everywhere(capsys: pytest.CaptureFixture[str],
                                                    command: str) -> None:
    code, _, err = run(capsys, command, str(GOOD), "--target", "nope")
    assert code == 2 and err.startswith("error: --target: unknown target `nope`")


# ----------------------------------------------------------------------------- merging


def test_finding_set_merges_in_linear_time() -> None:
    found: FindingSet[int] = FindingSet()
    d = error("E031", "race", None)
    start = time.process_time()
    for rank in range(200_000):
        found.add(d, rank)
    assert time.process_time() - start < 2  # a list scan per add took minutes
    (entry,) = list(found)
    assert entry.where[:3] == [0, 1, 2] and len(entry.where) == 200_000


def test_ranks_note_is_short_for_large_teams() -> None:
    assert ranks_note(list(range(0, 2000, 2)), 2000).endswith("and 984 more")
    assert ranks_note([3], 8) == "on rank 3" and ranks_note([0, 1], 2) == "on every rank"


def test_capped_keeps_order_and_counts_the_rest() -> None:
    ds = [error("E031", f"m{i}", None) for i in range(5)] + [error("E021", "w", None)]
    out = capped(ds, 2)
    assert [d.message for d in out] == ["m0", "m1", "w"]
    assert "3 more E031 findings not shown" in out[1].notes[-1]


def test_analysis_cache_is_safe_under_threads() -> None:
    from ccogen.analysis import analyse
    from ccogen.instantiate import instantiate

    protocol = parse_ir(SHIFT, "t.cco")
    instances = [instantiate(protocol, n)[0] for n in range(2, 30)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(60):
                analyse(instances[(i * 7 + k) % len(instances)])  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("argv", [
    [], ["nope"], ["lint"], ["simulate", str(GOOD), "--seeds", "x"],
    ["simulate", str(GOOD), "--seed", "1", "--exhaustive"], ["compile", str(GOOD)], ["fmt"],
    ["lint", str(GOOD), "--format", "xml"]])
def test_argparse_misuse_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("error: ccogen") and len(err.strip().splitlines()) == 1


def test_api_check_takes_limits() -> None:
    import ccogen

    result = ccogen.check(ccogen.load(GOOD), ranks=(3,), limits=Limits(ranks=2))
    assert [d.code for d in result.diagnostics] == ["E006"]


# a 184-byte protocol whose `ensure` loop makes one E003 finding per iteration, 10**6 of them
FINDING_PER_ITERATION = """\
protocol p():
    team lsa(2)
    window w: 1 B
    kernel k(threads=32):
        if me == 0:
            quiet(1)
    ensure:
        for i in range(10**6):
            w[i:i+1] == w
"""


def test_the_findings_limit_stops_the_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #29 item 8: the limit applies while findings are made (60+ CPU s before)."""
    from ccogen.instantiate.evaluating import Evaluating

    made = 0
    real = Evaluating._error

    def counting(self: Evaluating, *args: object, **kwargs: object) -> None:
        nonlocal made
        made += 1
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Evaluating, "_error", counting)
    cpu = time.process_time()
    # every iteration evaluated (the loop fails the sampling conditions anyway: its
    # checks at iterations 1 and N-1 are out of bounds, so the sampled try is redone)
    exact = CheckOptions(sample_loops=False)
    diags = check_text(FINDING_PER_ITERATION, "loop.cco", exact).diagnostics
    cpu = time.process_time() - cpu
    assert made == 101  # the 101st E003 stops the instantiation, not the 1,000,000th
    assert cpu < 20, cpu  # counted above; a CPU-time bound only against a regression
    assert {d.code for d in diags} == {"E003"}
    notes = [n for d in diags for n in d.notes]
    assert any(n.startswith("stopped after 100 E003 findings in the instance") for n in notes)
    assert any("99 more findings here differ only in the numbers" in n for n in notes)
    few = check_text(FINDING_PER_ITERATION, "loop.cco",
                     CheckOptions(limits=Limits(findings=5), sample_loops=False)).diagnostics
    assert made == 101 + 6
    # the default tries three iterations first (2 of them fail on each of the 2 ranks),
    # then evaluates as above, with the same findings
    made = 0
    sampled = check_text(FINDING_PER_ITERATION, "loop.cco", CheckOptions()).diagnostics
    assert made == 2 * 2 + 101
    def shown(ds: list[Diagnostic]) -> list[tuple[object, ...]]:
        return [(d.code, d.message, d.notes, d.span.start if d.span else None) for d in ds]

    assert shown(sampled) == shown(diags)
    assert any("stopped after 5 E003 findings" in n for d in few for n in d.notes)


def test_warnings_and_repeats_do_not_stop_the_instantiation() -> None:
    """One finding repeated on every iteration is merged, not counted again; a protocol
    whose only findings are below the limit is checked in full."""
    text = FINDING_PER_ITERATION.replace("range(10**6)", "range(1000)").replace(
        "w[i:i+1] == w", "w[5:6] == w")
    diags = check_text(text, "loop.cco", CheckOptions(limits=Limits(findings=1))).diagnostics
    assert [d.code for d in diags] == ["E003"]
    assert not any("stopped after" in n for n in diags[0].notes)


def test_a_64_rank_alltoall_stops_before_its_clocks_are_allocated() -> None:
    """Issue #29 item 8: 64-rank alltoall lint peaked at 4.2 GB against the 2 GiB limit
    (two clock matrices of 2.0 GB each); the estimate now counts both, before either.
    (The credit alltoall, no barrier, derived below: 113,024 events by 12,224 chain keys,
    11,052,843,008 bytes for the two matrices.)"""
    import subprocess
    import sys

    child = ("import resource, sys\nfrom ccogen.cli.main import main\n"
             f"code = main(['lint', {str(GOOD)!r}, '--ranks', '64'])\n"
             "print('peak-kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
             "sys.exit(code)\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 1, out.stderr[-2000:]
    # Events (`analysis._hb_build`), per rank and launch, P = 63 peers: P credit puts and
    # the P lanes' puts (issue, read, land, rsig: 4 each), P credit waits and the lanes' P
    # waits and P quiets (issue, done: 2 each); 2 launches, plus 1 boundary and 1 end event.
    # Chain keys per rank: the programs of block 0 and the P lanes (1 + P), a queue per
    # (issuer, peer, queue) (P for block 0's credits on queue 1, P for the lanes on queue 0),
    # and the rank's end.  Each matrix is int32 events x keys.
    ranks, peers, launches = 64, 63, 2
    events = ranks * (launches * (4 * 2 * peers + 2 * 3 * peers) + (launches - 1) + 1)
    keys = ranks * ((1 + peers) + 2 * peers + 1)
    need = 2 * 4 * events * keys
    assert (events, keys, need) == (113_024, 12_224, 11_052_843_008)
    assert (f"error[E006]: the happens-before analysis would need at least {need:,} bytes "
            f"({events:,} events by {keys:,} issuers, 2 clock matrices)") in out.stdout
    assert f"--limit analysis-bytes={need}" in out.stdout
    peak_kib = int(out.stdout.rsplit("peak-kib ", 1)[1])
    assert peak_kib < (1 << 30) // 1024, peak_kib  # 4.2 GB before; ~120 MB now


def test_growing_clocks_stay_within_the_limit() -> None:
    """Chains that are not chains after all grow the rows while they are made: the limit
    holds for the growth too (old and new matrix while copying)."""
    from ccogen.analysis._clock import sweep
    from ccogen.limits import LimitExceeded

    n = 64  # events of one key that are not ordered: each opens a new chain
    preds: list[list[int]] = [[] for _ in range(n)]
    clock = sweep(preds, preds, [0] * n, 1)
    assert len(set(clock.chain)) == n
    with pytest.raises(LimitExceeded) as info:
        sweep(preds, preds, [0] * n, 1, max_bytes=4 * n * 8)
    assert info.value.name == "analysis-bytes" and "to grow its clocks" in info.value.message


BIG = """\
protocol big(n: int = 25000):
    team lsa(4)
    window w: 64 B
    kernel k(threads=32):
        for i in range(n):
            put((me + 1) % nranks, dst=w[0:8], src=w[8:16], queue=0)
        quiet((me + 1) % nranks)
"""


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The simulator's steps, counted."""
    from ccogen.sim import engine

    taken = [0]
    real = engine.Machine.step

    def step(self: engine.Machine, p: int) -> object:
        taken[0] += 1
        return real(self, p)

    monkeypatch.setattr(engine.Machine, "step", step)
    return taken


def test_a_seeded_simulation_of_100k_op_instances_is_bounded(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, steps: list[int]) -> None:
    """Issue #29 item 8: no bound before; the least number of steps (op instances x epochs
    x schedules) is known before any schedule runs."""
    src = tmp_path / "big.cco"
    src.write_text(BIG)
    code, out, _ = run(capsys, "simulate", str(src), "--limit", "sim-steps=1000000")
    assert code == 1
    assert ("error[E006]: simulating would take at least 4,000,160 steps (100,004 op "
            "instances x 2 epochs x the schedules), over the limit of 1,000,000 steps") in out
    assert "--limit sim-steps=4000160" in out
    assert steps[0] == 0  # refused before the first schedule


def test_the_step_limit_is_counted_while_the_schedules_run(steps: list[int]) -> None:
    from ccogen.sim import simulate

    def sim(limit: int | None) -> object:
        limits = Limits() if limit is None else Limits(sim_steps=limit)
        return simulate(GOOD, ranks=8, seeds=5, params={"block": 4096}, limits=limits)

    free = sim(None)
    needed = steps[0]
    assert free.passed and needed > 168 * 2 * 5  # more than the up-front least
    steps[0] = 0
    same = sim(needed)  # exactly enough: the same result
    assert same.passed and steps[0] == needed and same.summary() == free.summary()
    steps[0] = 0
    stopped = sim(needed // 2)
    assert steps[0] == needed // 2 + 1  # the step past the limit raised
    assert not stopped.passed
    [d] = stopped.diagnostics
    assert d.code == "E006" and "stopped after 2 schedules" in d.message
    assert "--limit sim-steps=N" in (d.help or "")
    assert stopped.summary().endswith("1 instance stopped at the sim-steps limit")
