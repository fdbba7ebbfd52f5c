"""Run-time values in the simulator (ccogen/sim/runtime.py): drawn contents satisfy
`require`, every draw runs, and the library's run-time protocols leave what the numpy
references (ccogen/reference) compute, on random and skewed routings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ccogen.ir.dtype import DType
from ccogen.ir.values import decode, encode
from ccogen.reference import moe
from ccogen.reference.alltoallv import alltoallv
from ccogen.sim import simulate
from ccogen.sim.runtime import contents_with, draw, run_contents
from ccogen.syntax import load_ir, parse_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
A2AV = load_ir(ROOT / "protocols" / "alltoallv.cco")
DISPATCH = load_ir(ROOT / "protocols" / "moe_dispatch.cco")
COMBINE = load_ir(ROOT / "protocols" / "moe_combine.cco")
SMALL = library_params("moe_dispatch")
BF16, I32 = DType.BF16, DType.I32
A2AV_T = BF16  # alltoallv's default element type


def _elements(memory: dict[tuple[int, str], bytes], rank: int, name: str, dtype: object
              ) -> np.ndarray:
    return decode(np.frombuffer(memory[(rank, name)], dtype=np.uint8), dtype)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- draws


def test_draws_cover_both_ends_and_the_inside() -> None:
    low, _ = draw(A2AV, 3, {"cap": 8}, "low", 0)
    high, _ = draw(A2AV, 3, {"cap": 8}, "high", 0)
    inside, _ = draw(A2AV, 3, {"cap": 8}, "interior-0", 0)
    assert low is not None and high is not None and inside is not None
    values = {kind: [c.element("counts", r, p) for r in range(3) for p in range(3)]
              for kind, c in (("low", low), ("high", high), ("inside", inside))}
    assert values["low"] == [0] * 9
    assert values["high"] == [8] * 9
    assert all(0 <= v <= 8 for v in values["inside"]) and len(set(values["inside"])) > 1


def test_draws_derive_the_inputs_require_defines() -> None:
    contents, _ = draw(DISPATCH, 3, SMALL, "mixed-0", 0)
    assert contents is not None
    tokens, k = SMALL["tokens"], SMALL["k"]
    for r in range(3):
        table = np.array([contents.element("topk_rank", r, i) for i in range(tokens * k)])
        counts = [contents.element("rank_counts", r, p) for p in range(3)]
        live = int(contents.element("ntok", r, 0))  # the tokens of this call count
        assert counts == list(moe.rank_counts(table.reshape(tokens, k)[:live], 3))


def test_extreme_draws_send_everything_to_one_rank() -> None:
    low, _ = draw(DISPATCH, 3, SMALL, "low", 0)
    high, _ = draw(DISPATCH, 3, SMALL, "high", 0)
    assert low is not None and high is not None
    # `low`: the count 0 (no token goes anywhere); `high`: every token, all to rank 2
    assert [low.element("ntok", r, 0) for r in range(3)] == [0] * 3
    counts = [[low.element("rank_counts", r, p) for p in range(3)] for r in range(3)]
    assert counts == [[0, 0, 0]] * 3
    assert [high.element("ntok", r, 0) for r in range(3)] == [SMALL["tokens"]] * 3
    counts = [[high.element("rank_counts", r, p) for p in range(3)] for r in range(3)]
    assert counts == [[0, 0, SMALL["tokens"]]] * 3  # all tokens to rank 2, none to the others


def test_contents_that_violate_require_are_refused() -> None:
    with pytest.raises(ValueError, match="require"):
        contents_with(A2AV, 2, {"cap": 8}, {"counts": [np.array([0, 9]), np.array([1, 1])]})


# ----------------------------------------------------------------------------- simulate


@pytest.mark.parametrize("protocol", [A2AV, DISPATCH, COMBINE], ids=lambda p: p.name)
def test_library_runtime_protocols_simulate_clean(protocol: object) -> None:
    params = {"cap": 8} if protocol is A2AV else SMALL
    report = simulate(protocol, ranks=[2, 3], params=params, seeds=2)  # type: ignore[arg-type]
    assert report.instances and all(i.passed for i in report.instances), report.diagnostics
    labels = [i.label for i in report.instances]
    assert any("contents low" in x for x in labels) and any("contents high" in x for x in labels)


def test_a_wrong_ensure_is_caught_on_drawn_contents() -> None:
    text = (ROOT / "protocols" / "alltoallv.cco").read_text(encoding="utf-8").replace(
        "init(send@p)[me * cap : me * cap + got[p]]", "init(send@p)[p * cap : p * cap + got[p]]")
    report = simulate(parse_ir(text, "bad.cco"), ranks=[3], params={"cap": 8}, seeds=1)
    assert {d.code for d in report.diagnostics} == {"E033"}
    assert not any(i.passed for i in report.instances)
    # every launch has its own draw: the run that starts with `low` (every count 0, nothing
    # moves) fails only in its second launch, `high`
    [low] = [i for i in report.instances if i.label.endswith("contents low, then high")]
    notes = [n for r in low.results for d in r.failures for n in d.notes
             if n.startswith("checked after")]
    assert notes and set(notes) == {"checked after launch 2 of 2"}


def test_a_data_bug_in_dispatch_is_caught() -> None:
    text = (ROOT / "protocols" / "moe_dispatch.cco").read_text(encoding="utf-8").replace(
        "row = (me * tokens + t) * hidden\n                if p == me",
        "row = (me * tokens + (t + 1) % tokens) * hidden\n                if p == me")
    assert "(t + 1) % tokens" in text
    report = simulate(parse_ir(text, "bad.cco"), ranks=[2], params=SMALL, seeds=1)
    assert "E033" in {d.code for d in report.diagnostics}


# ----------------------------------------------------------------------------- references


def test_alltoallv_matches_the_reference() -> None:
    rng = np.random.default_rng(7)
    n, cap = 3, 8
    counts = [rng.integers(0, cap + 1, size=n).astype(np.int32) for _ in range(n)]
    counts[1][:] = 0  # a rank that sends nothing
    send = [decode(encode(rng.uniform(-2, 2, n * cap).astype(np.float32), A2AV_T), A2AV_T)
            for _ in range(n)]
    contents = contents_with(A2AV, n, {"cap": cap}, {"counts": counts, "send": send})
    report = run_contents(A2AV, n, {"cap": cap}, contents, seeds=2)
    assert report.passed, report.results[0].failures if report.results else report.setup
    recv, got = alltoallv(send, counts, cap)
    for result in report.results:
        assert result.memory is not None
        for r in range(n):
            final = _elements(result.memory, r, "recv", A2AV_T)
            assert list(_elements(result.memory, r, "got", I32)) == list(got[r])
            for s in range(n):
                k = int(got[r][s])
                assert np.array_equal(final[s * cap:s * cap + k], recv[r][s * cap:s * cap + k])


def _routing(kind: str, rng: np.random.Generator, n: int, tokens: int, k: int) -> np.ndarray:
    if kind == "uniform":
        return rng.integers(0, n, size=(tokens, k)).astype(np.int32)
    if kind == "one-rank":
        return np.zeros((tokens, k), dtype=np.int32)
    return moe.skewed_routing(rng, tokens, k, n)


@pytest.mark.parametrize("routing", ["uniform", "skewed", "one-rank"])
def test_dispatch_and_combine_match_the_reference(routing: str) -> None:
    n, tokens, hidden, k = 3, SMALL["tokens"], SMALL["hidden"], SMALL["k"]
    rng = np.random.default_rng(11)
    tables = [_routing(routing, rng, n, tokens, k) for _ in range(n)]
    x = [decode(encode(rng.uniform(-2, 2, tokens * hidden).astype(np.float32), BF16), BF16)
         .reshape(tokens, hidden) for _ in range(n)]
    full = [np.array([tokens]) for _ in range(n)]  # every token (the reference's)
    contents = contents_with(DISPATCH, n, SMALL, {"x": x, "topk_rank": tables, "ntok": full})
    report = run_contents(DISPATCH, n, SMALL, contents, seeds=2)
    assert report.passed, report.results[0].failures if report.results else report.setup
    rows, masks, got = moe.dispatch(x, tables)
    for result in report.results:
        assert result.memory is not None
        for r in range(n):
            recv = _elements(result.memory, r, "recv", BF16).reshape(n, tokens, hidden)
            assert np.array_equal(recv[masks[r]], rows[r][masks[r]])
            assert list(_elements(result.memory, r, "got", I32)) == list(got[r])

    weights = [rng.random((tokens, k)).astype(np.float32) for _ in range(n)]
    expert = [decode(encode(rng.uniform(-2, 2, n * tokens * hidden).astype(np.float32), BF16),
                     BF16).reshape(n, tokens, hidden) for _ in range(n)]
    zeros = [np.zeros(hidden, dtype=np.float32) for _ in range(n)]
    contents = contents_with(COMBINE, n, SMALL, {"expert_out": expert, "topk_rank": tables,
                                                 "topk_weight": weights, "zeros": zeros,
                                                 "ntok": full})  # every token: the reference's
    report = run_contents(COMBINE, n, SMALL, contents, seeds=2)
    assert report.passed, report.results[0].failures if report.results else report.setup
    ys = moe.combine(expert, tables, weights)
    for result in report.results:
        assert result.memory is not None
        for r in range(n):
            y = _elements(result.memory, r, "y", BF16).reshape(tokens, hidden)
            want = decode(encode(ys[r], BF16), BF16).reshape(tokens, hidden)
            assert np.allclose(y, want, rtol=2 ** -7, atol=1e-6), routing



# ----------------------------------------------------------------------------- loads


LINT = ROOT / "tests" / "lint"


def test_a_load_reads_simulated_memory_when_it_runs() -> None:
    """A remote `load` of a peer's count before the peer published it reads the bytes that
    were there: another value than the inputs define (a stale load), and a race."""
    report = simulate(LINT / "E032-remote-load-before-publish.cco", ranks=2, seeds=6)
    messages = [d.message for d in report.diagnostics if d.code == "E032"]
    assert any(m.startswith("stale load: a `load` of `pub`") for m in messages), messages
    assert any("a `load` of `pub` reads bytes that `copy` may still be writing" in m
               for m in messages), messages


def test_the_fixed_twin_loads_what_its_inputs_define() -> None:
    report = simulate(LINT / "E032-remote-load-before-publish-ok.cco", ranks=[2, 3], seeds=6)
    assert report.passed, [d.message for d in report.diagnostics]


def test_loads_before_their_signal_are_races_in_the_simulator() -> None:
    report = simulate(LINT / "E032-load-before-its-signal.cco", ranks=2, seeds=4)
    assert {d.code for d in report.diagnostics if d.is_error} == {"E032"}
    assert any("a `load` of `got`" in d.message for d in report.diagnostics)


def test_data_is_fresh_at_every_launch_but_the_runtime_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan of one instance (as `run_contents` builds, without contents per launch): the
    caller draws new data for every launch; the counts the instance is built for come
    again (their buffers are the instance's run-time inputs)."""
    from ccogen.instantiate import instantiate
    from ccogen.sim.plan import build_plan
    from ccogen.sim.runtime import image_of
    from ccogen.sim.schedule import Setup, run_seeded
    from ccogen.sim.state import Memory

    contents, _ = draw(A2AV, 2, {"cap": 8}, "high", 0)
    assert contents is not None
    inst, _ = instantiate(A2AV, 2, {"cap": 8}, contents=contents)
    assert inst is not None
    plan = build_plan(inst)
    assert plan.runtime_inputs == {"counts"}
    seen: list[dict[str, bytes]] = []
    original = Memory.snapshot

    def spy(self: Memory, keys: object) -> object:
        out = original(self, keys)  # type: ignore[arg-type]
        seen.append({name: bytes(a) for (rank, name), a in out.items() if rank == 0})
        return out

    monkeypatch.setattr(Memory, "snapshot", spy)
    setup = Setup(plan, image_of(contents, plan.windows, 2), 2, 2, True)
    run_seeded(setup, 0, True)
    launches = [s for s in seen if "send" in s]
    assert len(launches) >= 2
    assert launches[0]["send"] != launches[1]["send"]  # fresh data
    assert launches[0]["counts"] == launches[1]["counts"]  # the same run-time values


def test_drawn_contents_over_sim_bytes_are_E006_before_any_draw(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ccogen.sim.runtime as runtime

    def no_draw(*args: object, **kwargs: object) -> object:
        raise AssertionError("drew contents past the limit")

    monkeypatch.setattr(runtime, "draw", no_draw)
    report = simulate(A2AV, ranks=8, params={"cap": 4_194_304}, seeds=1)
    [d] = report.diagnostics
    assert d.code == "E006" and "--limit sim-bytes=" in (d.help or "")
    assert "1,073,742,336 bytes" in d.message


# ----------------------------------------------------------------------------- launches


STALE_FIXTURES = ["E032-alltoallv-next-launch-rewrites-counts", "E032-load-before-its-signal",
                  "E032-remote-load-before-publish", "E032-moe-combine-routing-of-the-next-launch"]


def _snapshots(monkeypatch: pytest.MonkeyPatch) -> list[dict[tuple[int, str], bytes]]:
    from ccogen.sim.state import Memory

    seen: list[dict[tuple[int, str], bytes]] = []
    original = Memory.snapshot

    def spy(self: Memory, keys: object) -> object:
        out = original(self, keys)  # type: ignore[arg-type]
        seen.append({k: bytes(a) for k, a in out.items()})
        return out

    monkeypatch.setattr(Memory, "snapshot", spy)
    return seen


def test_every_launch_has_its_own_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run k starts with draw k and its second launch has draw k + 1: the caller writes the
    second launch's counts, and that launch's instance follows them (its puts' lengths, the
    values its loads should read)."""
    from ccogen.limits import DEFAULT
    from ccogen.sim.report import InstanceReport
    from ccogen.sim.runtime import run_drawn
    from ccogen.sim.schedule import run_seeded

    reports, setups = run_drawn(A2AV, 2, {"cap": 8}, DEFAULT, 0, 2, 2, True,
                                lambda s: InstanceReport("", 2))
    labels = [r.label.split("contents ")[1] for r in reports]
    assert labels == ["low, then high", "high, then mixed-0", "mixed-0, then mixed-1",
                      "mixed-1, then interior-0", "interior-0, then low"]
    plan = setups[0].plan
    assert len(plan.launches) == 2 and plan.at(0) is not plan.at(1)
    sizes = [[op.src.size for op in plan.at(e).ranks[0] if op.kind.name == "PUT"
              and op.dst is not None and op.dst.window == "recv"] for e in (0, 1)]
    assert sizes == [[0], [8 * 2]]  # low: every count 0; high: `cap` bf16 elements
    loaded = [[x.value for op in plan.at(e).ranks[0] for x in op.loads] for e in (0, 1)]
    assert set(loaded[0]) == {0} and set(loaded[1]) == {8}
    seen = _snapshots(monkeypatch)
    result = run_seeded(setups[0], 0, True)
    assert not result.findings, [f.diagnostic.message for f in result.findings]
    counts = [s[(0, "counts")] for s in seen if (0, "counts") in s]
    assert len(counts) == 2
    assert decode(np.frombuffer(counts[0], np.uint8), I32).tolist() == [0, 0]
    assert decode(np.frombuffer(counts[1], np.uint8), I32).tolist() == [8, 8]


def test_the_caller_writes_each_launchs_routing_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """`moe_combine`'s routing table is a window the caller writes (`init(topk_rank)`): each
    launch's own, in memory when the launch starts."""
    from ccogen.limits import DEFAULT
    from ccogen.sim.report import InstanceReport
    from ccogen.sim.runtime import run_drawn
    from ccogen.sim.schedule import run_seeded

    _, setups = run_drawn(COMBINE, 2, SMALL, DEFAULT, 0, 2, 2, True,
                          lambda s: InstanceReport("", 2))
    plan = setups[1].plan  # high, then mixed-0
    assert plan.runtime_windows == {(0, "topk_rank"), (1, "topk_rank")}
    assert plan.runtime_inputs == {"topk_weight", "zeros", "ntok"}
    given = [plan.launch_inputs[e][(0, "topk_rank")] for e in (0, 1)]
    assert not np.array_equal(*given)
    seen = _snapshots(monkeypatch)
    result = run_seeded(setups[1], 0, True)
    assert not result.findings, [f.diagnostic.message for f in result.findings]
    held = [s[(0, "topk_rank")] for s in seen if (0, "topk_rank") in s]
    assert held == [a.tobytes() for a in given]


def test_a_runtime_expected_takes_its_bytes_off_the_counter() -> None:
    """A run-time `expected=` waits for that many bytes and takes them off the counter (the
    generated code): launch 2 needs what launch 1 took, then its own; a wait without it
    needs every byte of the earlier launches."""
    from dataclasses import replace

    from ccogen.instantiate import instantiate
    from ccogen.sim.plan import build_plan, runtime_expected_waits

    text = (LINT / "E034-runtime-total-mismatch-ok.cco").read_text(encoding="utf-8")
    proto = parse_ir(text, "ok.cco")
    symbolic, _ = instantiate(proto, 2)
    assert symbolic is not None
    takes_off = runtime_expected_waits(symbolic)
    [key] = takes_off
    built = []
    for which in ("mixed-0", "high"):
        contents, _ = draw(proto, 2, None, which, 0)
        assert contents is not None
        inst, _ = instantiate(proto, 2, contents=contents)
        assert inst is not None
        built.append(inst)
    w = build_plan(built[0], None, built[1:], takes_off).waits[key]
    first, second = w.bases
    assert second == 64 * 16 and w.totals[1] == second  # `high`: both warps' rows
    assert w.expected(0) == first and w.expected(1) == first + second
    assert not w.never(0) and not w.never(1)
    assert w.at(1).base == second
    assert replace(w, levels=(first, first + second + 1)).never(1)  # one byte too many
    plain = build_plan(built[0], None, built[1:]).waits[key]  # not taken off: every byte
    assert plain.expected(1) == w.totals[0] + second
    report = simulate(proto, seeds=4, epochs=3, path="ok.cco")
    assert report.passed, [d.message for d in report.diagnostics]


@pytest.mark.parametrize("name", STALE_FIXTURES)
def test_a_stale_runtime_value_is_reported_at_its_line(name: str) -> None:
    """The four load bugs of issue 27: with every launch's own counts and routings, the
    stale read sees another value than its launch's (a stale load), reported at the
    line the checker reports (an `# ~ ERROR E032` line); the fixed twin is clean."""
    path = LINT / f"{name}.cco"
    text = path.read_text(encoding="utf-8")
    marked = {i for i, line in enumerate(text.splitlines(), start=1) if "~ ERROR E032" in line}
    options = text.splitlines()[0].removeprefix("# lint:").split()
    params = {k: int(v) for k, v in (options[i + 1].split("=") for i, o in
                                     enumerate(options) if o == "--param")}
    report = simulate(path, ranks=2, params=params, seeds=6)
    stale = [d for d in report.diagnostics if d.message.startswith("stale load")]
    assert stale and {d.code for d in stale} == {"E032"}
    assert {d.span.line for d in stale if d.span is not None} <= marked, marked
    twin = simulate(LINT / f"{name}-ok.cco", ranks=2, params=params, seeds=6)
    assert twin.passed, [d.message for d in twin.diagnostics]


PERSISTENT = """\
protocol persistent_count(cap: int = 4):
    team lsa(2)
    window n: i32[1]
    window recv: i32[cap]
    buffer send: i32[cap]

    require:
        0 <= n[0] <= cap

    kernel k(threads=32):
        m = load(n[0])
        copy(dst=recv[0 : m], src=send[0 : m])

    ensure:
        recv[0 : n[0]] == init(send)[0 : n[0]]
"""


def test_a_window_the_caller_does_not_write_keeps_its_count() -> None:
    """No `init(...)` names `n`: the caller fills it once, and every launch reads the first
    launch's count (a later launch's contents take it from the first's and instantiate
    again), not a stale one."""
    report = simulate(PERSISTENT, seeds=3, path="persistent.cco")
    assert report.passed, [d.message for d in report.diagnostics]
    assert any(i.label.endswith("contents low, then high") for i in report.instances)
