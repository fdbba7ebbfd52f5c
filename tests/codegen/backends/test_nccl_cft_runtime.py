"""nccl-cft and run-time values (language v2 §3, §4, §7): what is generated, what is
refused and why, and that the generated code builds with nvcc >= 13.3 for sm_100
against the real NCCL >= 2.31 headers (toolchain tests: skipped, naming what is missing).

The protocols in data/ are the spec's `counted_rows` and the library's `alltoallv` with
every fabric transfer a multiple of 16 bytes, which CFT needs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccogen.codegen.backends.counted import fuse_counted
from ccogen.codegen.files import GeneratedFiles
from ccogen.codegen.model import Step
from ccogen.codegen.steps import StepKind
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError, ToolchainError
from ccogen.syntax import load_ir, parse_ir
from tests.test_spec_examples import NAMES, PROTOCOLS

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[3]
COUNTED_ROWS = DATA / "cft_counted_rows.cco"
ALLTOALLV = DATA / "cft_alltoallv.cco"
# a peer's element read with a plain load: `ccogen_ld<T>(c, <rank>, ...)`
PEER_LOAD = re.compile(r"ccogen_ld<\w+>\(c, \d+,")


def kernels(path: Path, ranks: int = 2, debug: bool = False) -> str:
    files = compile_protocol(load_ir(path), "nccl-cft", source=path.name, ranks=ranks,
                             debug=debug).files
    return files["kernels.cu"]  # type: ignore[return-value]


def refusal(text: str, ranks: int = 2, name: str = "t.cco") -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        compile_protocol(parse_ir(text, name), "nccl-cft", source=name, ranks=ranks)
    return info.value


# ----------------------------------------------------------------------------- generated


def counted_rows_from_a_window(tmp: Path) -> Path:
    """cft_counted_rows with `data` a window: the counted put's source is in the heap."""
    path = tmp / "cft_counted_rows_w.cco"
    path.write_text(COUNTED_ROWS.read_text().replace("buffer data:", "window data:"))
    return path


def test_counted_rows_waits_natively_for_the_device_total(tmp_path: Path) -> None:
    text = kernels(counted_rows_from_a_window(tmp_path))
    # each warp's run-time put is one counted fabric put of `n[w] * 16` bytes
    puts = re.findall(r"const uint64_t rt_n = static_cast<uint64_t>\(16LL \* static_cast<int64_t>"
                      r"\(ccogen_ld<int32_t>\(c, -2, (\d)ULL\)\)\);\n\s+"
                      r"ccogen_putcounted_warp\(c, 1, rt_dst, rt_src, rt_n, (\d+)ULL\);", text)
    assert [w for w, _ in puts] == ["0", "4"] and len({c for _, c in puts}) == 1
    # rank 1 computes the total from its header and waits with cft.waitCounted
    assert re.search(r"const uint64_t rt_expected = .*ccogen_ld<int32_t>\(c, -1, 0ULL\).*"
                     r"ccogen_ld<int32_t>\(c, -1, 4ULL\).*\n\s+ccogen_rtwaitcounted_group\(c, "
                     rf"{puts[0][1]}ULL, rt_expected, 28, 0\);", text)
    assert "ccogen_rtwait_group(c" not in text.split("end of the nccl-cft primitives")[1]
    assert "cft.waitCounted(ncclCoopCta(), cuda::memory_order_acquire" in text
    assert not PEER_LOAD.search(text)


def test_a_counted_put_from_a_buffer_adds_its_run_time_count_after_the_data() -> None:
    """The spec's form (`data` a local buffer): the `putcounted` step names a heap source,
    so the put is staged from the buffer and its byte count added on the counter by the
    fenced flag update; the wait is still cft.waitCounted."""
    text = kernels(COUNTED_ROWS)
    pairs = re.findall(r"const uint64_t rt_n = (.*);\n\s+ccogen_copy_warp\(c, 1, rt_dst, -3, "
                       r"rt_src, rt_n, .*\n\s+\}\n\s+ccogen_sync_warp\(c, \d+ULL, kSyncs\);\n"
                       r"\s+\{\n\s+const uint64_t rt_n = (.*);\n"
                       r"\s+ccogen_signal_warp\(c, 1, (\d+)ULL, rt_n\);", text)
    assert len(pairs) == 2 and all(a == b for a, b, _ in pairs)
    assert "ccogen_putcounted_warp(c" not in text.split("end of the nccl-cft primitives")[1]
    assert "ccogen_rtwaitcounted_group(c, " + pairs[0][2] + "ULL, rt_expected" in text


def test_alltoallv_puts_run_time_lengths_and_still_signals() -> None:
    text = kernels(ALLTOALLV, ranks=3)
    body = text.split("end of the nccl-cft primitives")[1]
    # every peer's run-time put is followed by its signal, a step of its own: a length of
    # 0 moves nothing but still rings
    pairs = re.findall(r"ccogen_copy_warp\(c, (\d), rt_dst, -2, rt_src, rt_n, .*\n\s+\}\n"
                       r"\s+ccogen_sync_warp\(c, \d+ULL, kSyncs\);\n"
                       r"\s+ccogen_signal_warp\(c, (\d), \d+ULL, 1ULL\);", body)
    assert len(pairs) == 3 * 2 and all(a == b for a, b in pairs)
    # 8 bf16 elements a granule: 16 bytes per count, read from my `counts` (buffer 1)
    assert "16LL * static_cast<int64_t>(ccogen_ld<int32_t>(c, -3," in body
    assert not PEER_LOAD.search(text)


def test_zero_bytes_issue_no_fabric_operation() -> None:
    """NCCL documents no zero-byte CFT operation: the staged write and read return before
    they construct one (their signal is a separate step, tested above)."""
    text = kernels(ALLTOALLV)
    for name in ("ccogen_cft_write", "ccogen_cft_read"):
        body = text.split(f"void {name}(")[1].split("\n}\n")[0]
        assert body.index("if (n == 0) return;") < body.index("ncclCft<Coop> cft")


def test_debug_builds_check_require_on_own_elements() -> None:
    text = kernels(ALLTOALLV, ranks=3, debug=True)
    checks = re.findall(r"ccogen_require\(c, \((.*)\), (\d+), (-?\d+), ", text)
    assert len(checks) == 3 * 3 * 2  # ranks x own counts x both bounds
    assert all("(c, -3," in cond for cond, _, _ in checks)  # my `counts` buffer only
    assert {line for _, line, _ in checks} == {"14"}


REQUIRE_PEER = """\
protocol req_peer(cap: int = 64):
    team lsa
    window hdr: i32[4]
    window recv: u8[nranks * cap * 16]
    buffer send: u8[cap * 16]

    require:
        for p in ranks():
            0 <= hdr@p[0] <= cap

    kernel k(threads=64):
        barrier()
        lanes p in peers():
            n = load(hdr[0]) * 16
            put(p, dst=recv[me * cap * 16 : me * cap * 16 + n], src=send[0 : n], queue=0,
                signal="remote")
        lanes p in peers():
            wait_signal(p, queue=0)
        barrier()
"""


@pytest.mark.parametrize(("target", "peer_checks"), [("nccl-cft", 0), ("nccl-lsa", 2)])
def test_require_over_a_peer_window_is_left_to_the_peer(target: str, peer_checks: int) -> None:
    """A `require` on another rank's window element: nccl-lsa loads it, a CFT kernel
    cannot, and leaves it to that rank's own check of its own element."""
    files = compile_protocol(parse_ir(REQUIRE_PEER, "r.cco"), target, source="r.cco", ranks=2,
                             debug=True).files
    checks = re.findall(r"ccogen_require\(c, \((.*)\), 9, 0, ", files["kernels.cu"])  # type: ignore[arg-type]
    own = [c for c in checks if "(c, -1, 0ULL)" in c]
    assert len(own) == 2 * 2  # both bounds of my own hdr[0], on each rank
    assert len(checks) - len(own) == 2 * peer_checks


def test_fused_counted_puts_pair_by_expression_not_name() -> None:
    """Two run-time copies to one peer, each counted on its own counter: each add absorbs
    the copy of its own length, although both name it `rt_n`."""
    def copy(expr: str, src_peer: int = -1) -> Step:
        return Step(StepKind.COPY, dst_peer=1, src_peer=src_peer, nbytes=64,
                    rt=(("nbytes", "rt_n"),), let=(("rt_n", expr),))

    def add(expr: str, counter: int) -> Step:
        return Step(StepKind.SIGNAL, peer=1, off=counter, value=64, rt=(("value", "rt_n"),),
                    let=(("rt_n", expr),))

    steps = (copy("A"), copy("B"), Step(StepKind.SYNC), add("A", 256), add("B", 512))
    fused = fuse_counted(steps, frozenset({256, 512}))
    assert [(s.kind, s.off, s.let) for s in fused] == [
        (StepKind.PUTCOUNTED, 256, (("rt_n", "A"),)),
        (StepKind.PUTCOUNTED, 512, (("rt_n", "B"),)), (StepKind.SYNC, 0, ())]
    # a buffer source keeps the emulation (`putcounted` names a heap source)
    buffered = (copy("A", -2), Step(StepKind.SYNC), add("A", 256))
    assert fuse_counted(buffered, frozenset({256})) == buffered


# ----------------------------------------------------------------------------- refused

LIBRARY = {"alltoallv": "E040", "moe_dispatch": "E040", "moe_combine": "E040"}


@pytest.mark.parametrize("stem", sorted(LIBRARY))
def test_library_run_time_protocols_are_refused_precisely(stem: str) -> None:
    path = ROOT / "protocols" / f"{stem}.cco"
    with pytest.raises(DiagnosticError) as info:
        compile_protocol(load_ir(path), "nccl-cft", source=path.name, ranks=2,
                         params={"tokens": 4, "hidden": 64} if stem.startswith("moe") else None)
    (d, *_) = [d for d in info.value.diagnostics if d.is_error]
    assert d.code == LIBRARY[stem]
    # the 4-byte count exchange (moe_combine: its count credit, refused before its remote
    # loads of the routing table, E042): the fabric engine moves multiples of 16 bytes
    assert "16-byte alignment rules of `nccl-cft`" in d.message


# the spec's examples with run-time values: each is generated or refused with its rule
SPEC_RUNTIME = {"alltoallv": "E040", "counted_rows": "E040", "moe_dispatch_small": "E040"}


@pytest.mark.parametrize("name", sorted(SPEC_RUNTIME))
def test_spec_run_time_examples_on_cft(name: str) -> None:
    text = PROTOCOLS[NAMES.index(name)]
    ranks = 2 if "team lsa(2)" in text else 4
    error = refusal(text, ranks, "spec.cco")
    codes = sorted({d.code for d in error.diagnostics if d.is_error})
    assert codes == [SPEC_RUNTIME[name]]
    assert all("16" in d.message for d in error.diagnostics if d.is_error)


def test_spec_moe_dispatch_with_a_16_byte_header_is_generated() -> None:
    """`moe_dispatch_small` once its count cells are 16 bytes: its rows (`hit * hidden`
    bf16 elements, hidden 8) are whole granules, so the run-time puts are generated."""
    text = PROTOCOLS[NAMES.index("moe_dispatch_small")]
    text = (text.replace("window got: i32[nranks]", "window got: i32[4 * nranks]")
            .replace("buffer rank_counts: i32[nranks]", "buffer rank_counts: i32[4 * nranks]")
            .replace("got[me : me + 1]", "got[4 * me : 4 * me + 4]")
            .replace("rank_counts[p : p + 1]", "rank_counts[4 * p : 4 * p + 4]")
            .replace("rank_counts[me : me + 1]", "rank_counts[4 * me : 4 * me + 4]")
            .replace("rank_counts[p] ==", "rank_counts[4 * p] ==")
            .replace("got[p] == init(rank_counts@p)[me]",
                     "got[4 * p] == init(rank_counts@p)[4 * me]"))
    files = compile_protocol(parse_ir(text, "spec.cco"), "nccl-cft", source="spec.cco", ranks=2)
    cu = files.files["kernels.cu"]
    assert re.search(r"ccogen_copy_warp\(c, 1, rt_dst, -2, rt_src, rt_n, ", cu)


def test_a_length_that_may_not_be_whole_granules_is_refused() -> None:
    """alltoallv counting bf16 elements: `2 * counts[p]` bytes is not a multiple of 16 for
    every count."""
    text = ALLTOALLV.read_text().replace("n = load(counts[4 * p]) * 8",
                                         "n = load(counts[4 * p])")
    text = text.replace("recv[p * cap : p * cap + 8 * got[4 * p]] == init(send@p)[me * cap : "
                        "me * cap + 8 * got[4 * p]]", "got[4 * p] == got[4 * p]")
    text = text.replace("own = load(counts[4 * me]) * 8", "own = load(counts[4 * me])")
    error = refusal(text, 2, "cft_alltoallv.cco")
    (d,) = [d for d in error.diagnostics if d.is_error]
    assert d.code == "E042"
    assert "its length is `2 * counts@0[4]`" in d.message
    assert "not a multiple of 16 for every value" in d.message and "`nccl-lsa`" in d.message
    assert d.span is not None and d.span.line == 23  # the `dst` of the put


# ----------------------------------------------------------------------------- builds

# NCCL 2.31's own `cft.flush` emits `fabric.wait.sync_restrict::reads`, which ptxas of
# CUDA 13.5 (PTX 9.5) warns is deprecated, whatever the generated code does.  Every other
# warning fails the build test.  One build, reading the compilers' log of warnings
# (`BuildResult.log`), checks what a second `-Werror all-warnings` build did before: that
# flag makes the same warnings errors (it enables none), so its errors were exactly these
# warnings; one nvcc run instead of two (~half the test's CPU time).
NCCL_OWN_WARNING = ".sync_restrict::reads modifier deprecated in PTX version 9.5"


def build(path: Path, tmp: Path, ranks: int, debug: bool) -> list[str]:
    from ccogen.toolchains.cuda import build_cft

    files = compile_protocol(load_ir(path), "nccl-cft", source=path.name, ranks=ranks,
                             debug=debug).files
    GeneratedFiles(files).write(tmp)  # type: ignore[arg-type]
    manifest = json.loads((tmp / "manifest.json").read_text())
    try:
        result = build_cft(tmp, manifest, debug)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    warnings = [line for line in result.log.splitlines() if "warning" in line.lower()]
    others = [w for w in warnings if NCCL_OWN_WARNING not in w]
    assert not others, result.log
    return result.notes


@pytest.mark.toolchain
@pytest.mark.parametrize("debug", [False, True], ids=["release", "debug"])
@pytest.mark.parametrize(("which", "ranks", "counted"), [("counted_rows", 2, True),
                                                        ("counted_rows_window", 2, True),
                                                        ("alltoallv", 3, False)])
def test_run_time_protocols_build_for_sm_100(which: str, ranks: int, counted: bool,
                                             debug: bool, tmp_path: Path) -> None:
    path = {"counted_rows": COUNTED_ROWS, "alltoallv": ALLTOALLV}.get(which) \
        or counted_rows_from_a_window(tmp_path)
    out = tmp_path / "gen"
    out.mkdir()
    notes = build(path, out, ranks, debug)
    tmp_path = out
    ptx = (tmp_path / "kernels.ptx").read_text()
    assert "fabric.try_put" in ptx
    assert ("counted::bytes" in ptx) is counted
    assert any("fabric." in n for n in notes)
