"""mori-sdma: run-time values (language v2 §3) and counted writes (§4) lowered to
per-(sender, queue) signal waits; what stays refused, with its coded diagnostic.

Toolchain tests build with clang and the real MORI headers; they are skipped, naming
what is missing, where those are absent (as tests/codegen/test_v2_build.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccogen.codegen.files import GeneratedFiles
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError, ToolchainError
from ccogen.syntax import parse_ir
from ccogen.toolchains import build_dir
from tests.test_spec_examples import NAMES, PROTOCOLS

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parent / "data"
ROWS = DATA / "counted_rows_windows.cco"
A2AV = DATA / "alltoallv_windows.cco"
LANES = DATA / "lanes_runtime.cco"


def generate(text: str, ranks: int, source: str = "t.cco",
             params: dict[str, object] | None = None) -> dict[str, str]:
    return compile_protocol(parse_ir(text, source), "mori-sdma", source=source, ranks=ranks,
                            params=params).files  # type: ignore[return-value]


def refusal(text: str, ranks: int, params: dict[str, object] | None = None) -> str:
    with pytest.raises(DiagnosticError) as info:
        generate(text, ranks, params=params)
    errors = [d for d in info.value.diagnostics if d.is_error]
    assert errors and {d.code for d in errors} == {"E042"}, errors
    return errors[0].message


def function(kernels: str, rank: int) -> str:
    """The device function of `rank`, block 0 (of the first kernel)."""
    found = re.search(rf"// rank {rank}, block 0 of kernel .*?\n}}\n", kernels, re.S)
    assert found is not None
    return found.group(0)


# ----------------------------------------------------------------------------- counted


def test_run_time_wait_count_waits_per_sender_and_queue() -> None:
    files = generate(ROWS.read_text(), 2, "rows.cco")
    text = files["kernels.hip"]
    sender, receiver = function(text, 0), function(text, 1)
    # each warp's counted put signals its own queue (remoteSignal), with a run-time length
    puts = re.findall(r"sdma\.put<ccoCoopWarp, false, (true|false), [^>]*>\(1, c\.win, "
                      r"ccogen_rt_at\(rt\d+_n, \d+LL, \d+ULL\), c\.win, .*?, (\d)\);", sender)
    assert puts == [("true", "1"), ("true", "2")]
    assert sender.count("ccogen_ld<int32_t>(c, ") == 2
    # the receiver waits for one signal per epoch on each of them, not for bytes
    waits = re.findall(r"sdma\.waitSignal\((\d), (\d), (\d+)ULL \+ c\.epoch \* (\d+)ULL\)",
                       receiver)
    assert waits == [("0", "0", "1", "1"), ("0", "1", "1", "1"), ("0", "2", "1", "1")]
    assert "rows.cco:30: wait_count" in receiver
    assert "// `landed`: 1 counted put from rank 0 on queue 2" in receiver
    # no byte counting on the device: the checker proved `expected` equals these puts
    assert "header" not in receiver and "ccogen_ld" not in receiver


def test_counts_add_up_over_puts_of_one_sender_and_queue() -> None:
    text = generate(COUNTED_LOOP, 3)["kernels.hip"]
    receiver = function(text, 0)
    waits = re.findall(r"sdma\.waitSignal\((\d), (\d), (\d+)ULL \+ c\.epoch \* (\d+)ULL\)",
                       receiver)
    assert waits == [("1", "0", "4", "4"), ("2", "0", "4", "4")]


COUNTED_LOOP = """
protocol rows(row: bytes = 256):
    team lsa
    between_launches: host_sync
    counter landed
    window inbox: nranks * 4 * row
    window data: 4 * row

    kernel send(threads=64):
        if me != 0:
            for i in range(4):
                put(0, dst=inbox[(me * 4 + i) * row : (me * 4 + i + 1) * row],
                    src=data[i * row : (i + 1) * row], queue=0, count=landed)
            quiet(0)
        else:
            wait_count(landed)
"""

SHARED_SLOT = """
protocol mixed(row: bytes = 256):
    team lsa(2)
    between_launches: host_sync
    counter landed
    window inbox: 2 * row
    window data: 2 * row

    kernel send(threads=64):
        if me == 0:
            put(1, dst=inbox[0 : row], src=data[0 : row], queue=0, signal="remote")
            put(1, dst=inbox[row : 2 * row], src=data[row : 2 * row], queue=0, count=landed)
            quiet(1)
        else:
            wait_signal(0, queue=0)
            wait_count(landed)
"""

PART = """
protocol part(row: bytes = 256):
    team lsa(2)
    between_launches: host_sync
    queues 2
    counter landed
    window inbox: 2 * row
    window data: 2 * row

    kernel send(threads=64):
        if me == 0:
            put(1, dst=inbox[0 : row], src=data[0 : row], queue=0, count=landed)
            put(1, dst=inbox[row : 2 * row], src=data[row : 2 * row], queue=1, count=landed)
            quiet(1)
        else:
            wait_count(landed, expected=row)
            wait_count(landed)
"""

RESET = """
protocol again(row: bytes = 256):
    team lsa(2)
    between_launches: host_sync
    counter landed
    window inbox: row
    window data: row

    kernel send(threads=64):
        if me == 0:
            put(1, dst=inbox, src=data, queue=0, count=landed)
            quiet(1)
        else:
            wait_count(landed)
            reset_count(landed)
"""

PEER_LOAD = """
protocol peek(cap: int = 64):
    team lsa(2)
    queues 1
    window n: i32[1]
    window data: u8[cap]
    window inbox: u8[cap]

    require:
        0 <= n[0] <= cap

    kernel send(threads=64):
        barrier()
        m = load(n@(1 - me)[0])
        put(1 - me, dst=inbox[0 : m], src=data[0 : m], queue=0, signal="remote")
        wait_signal(1 - me, queue=0)
        quiet()
"""


GROUPED = """
protocol grouped(row: bytes = 256):
    team lsa
    between_launches: host_sync
    counter landed
    window inbox: nranks * 4 * row
    window data: 4 * row

    kernel send(threads=64):
        if me != 0:
            lanes i in range(4):
                put(0, dst=inbox[(me * 4 + i) * row : (me * 4 + i + 1) * row],
                    src=data[i * row : (i + 1) * row], queue=0, count=landed)
            quiet(0)
        else:
            wait_count(landed)
"""


def test_lanes_of_one_group_signal_once() -> None:
    # MORI groups lanes that share a queue: one signal per group, so one per sender here
    text = generate(GROUPED, 3)["kernels.hip"]
    assert "ccoSdmaThreadSameQueue" in function(text, 1)
    waits = re.findall(r"sdma\.waitSignal\((\d), (\d), (\d+)ULL \+ c\.epoch \* (\d+)ULL\)",
                       function(text, 0))
    assert waits == [("1", "0", "1", "1"), ("2", "0", "1", "1")]


def test_lane_tables_compute_the_length_first() -> None:
    text = function(generate(LANES.read_text(), 4, "lanes.cco")["kernels.hip"], 1)
    rows = re.findall(r"case (\d+): a\.on = true; a\.n = (.*?); a\.peer = (\d); a\.queue = (\d); "
                      r"a\.dst = ccogen_rt_at\(a\.n, \d+LL, (\d+)ULL\); a\.src = "
                      r"ccogen_rt_at\(a\.n, \d+LL, \5ULL\); a\.bytes = ccogen_rt_bytes\(a\.n\); "
                      r"break;", text)
    assert [(t, p, q) for t, _, p, q, _ in rows] == [
        ("0", "0", "0"), ("1", "2", "0"), ("2", "3", "0"),
        ("0", "0", "1"), ("1", "2", "1"), ("2", "3", "1")]
    assert all(n.startswith("static_cast<int64_t>(ccogen_ld<int32_t>(c, ") for _, n, *_ in rows)
    # the counted lanes signal (remoteSignal) like the signalled ones; rank 1 waits on
    # queue 1 of every peer for `landed`
    assert text.count("sdma.put<ccoCoopThread, false, true,") == 2
    assert re.findall(r"sdma\.waitSignal\((\d), 1, 1ULL", text) == ["0", "2", "3"]


def test_a_slot_shared_with_signalled_puts_is_refused() -> None:
    message = refusal(SHARED_SLOT, 2)
    assert "counted puts from rank 0 to rank 1 on queue 0 share their signal slot" in message
    assert "give the counted puts a queue of their own" in message


def test_a_partial_hand_written_total_is_refused() -> None:
    message = refusal(PART, 2)
    assert message.startswith("`wait_count(landed, expected=256)` waits for part of the 512 "
                              "bytes counted to `landed` on rank 1")
    assert "omit `expected=`" in message


def test_reset_count_is_refused() -> None:
    assert refusal(RESET, 2).startswith("`mori-sdma` cannot lower `reset_count`")


# ----------------------------------------------------------------------------- run-time


def test_zero_length_transfers_copy_between_scratch_words() -> None:
    files = generate(A2AV.read_text(), 4, "a2av.cco")
    text = files["kernels.hip"]
    manifest = json.loads(files["manifest.json"])
    end = max(w["offset"] + w["size"] for w in manifest["windows"])
    scratch = {int(s) for s in re.findall(r"ccogen_rt_at\(rt\d+_n, \d+LL, (\d+)ULL\)", text)}
    assert len(scratch) == 1 and end <= min(scratch) < manifest["heap_size"]
    assert "ccogen_rt_bytes(rt" in text
    # the helpers post 8 scratch bytes for a length of 0, never a zero-length copy
    assert "return n > 0 ? static_cast<uint64_t>(n) : 8ULL;" in text
    # a local copy of run-time length vectorises only when it turns out aligned
    assert re.search(r"ccogen_copy_block\(c, (rt\d+)_d, \1_s, \1_n, "
                     r"\(\(\1_d \| \1_s \| \1_n\) & 15ULL\) == 0\);", text)


def test_static_protocols_print_no_run_time_helpers() -> None:
    path = ROOT / "protocols" / "counted_gather.cco"
    text = generate(path.read_text(), 4, path.name)["kernels.hip"]
    assert "ccogen_rt_at" not in text and "ccogen_ld<" not in text
    assert "sdma.waitSignal(3, 0, 1ULL + c.epoch * 1ULL);" in text


def test_a_load_of_a_peer_is_refused() -> None:
    message = refusal(PEER_LOAD, 2)
    assert message.startswith("a run-time `load` of a peer's window (`n@1`) is not generated "
                              "on `mori-sdma`")


# ----------------------------------------------------------------------------- the library


REFUSED = {
    # the capability table's first refusal (checked before the generator's own)
    "alltoallv": "`mori-sdma` cannot lower local buffers (`buffer send`)",
    "moe_dispatch": "`mori-sdma` cannot lower local buffers (`buffer x`)",
    "moe_combine": "`mori-sdma` cannot lower local buffers (`buffer topk_weight`)",
}


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_library_protocols_refused_with_a_reason(stem: str) -> None:
    path = ROOT / "protocols" / f"{stem}.cco"
    params = {"tokens": 8, "hidden": 4} if stem.startswith("moe") else None
    assert REFUSED[stem] in refusal(path.read_text(), 2, params)


SPEC_REFUSED = {
    "send_tensor": "local buffers",
    "mean_of_two": "local buffers",
    "alltoallv": "local buffers",
    "counted_rows": "local buffers",
    "allreduce_oneshot": "cannot lower local buffers (`buffer out`)",
    "allreduce_credits": "cannot lower",
    "reduce_scatter_ring": "cannot lower `signal`",
    "moe_dispatch_small": "cannot lower local buffers (`buffer x`)",
    "gather_rows": "cannot lower local buffers (`buffer x`)",  # loops to a run-time count
    "alltoall_rotating": "cannot lower local buffers (`buffer send`)",
    # f32 running sums in a local buffer, converting reduces and credits (#32)
    "reduce_scatter_f32_sums": "cannot lower",
}


@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_spec_examples_compile_or_say_why(text: str) -> None:
    name = NAMES[PROTOCOLS.index(text)]
    ranks = 2 if "team lsa(2)" in text else 4
    if name in SPEC_REFUSED:
        assert SPEC_REFUSED[name] in refusal(text, ranks)
        return
    kernels = generate(text, ranks, "spec.cco")["kernels.hip"]
    lines = {int(n) for n in re.findall(r"// spec\.cco:(\d+)", kernels)}
    op = re.compile(r"\s+(put|get|copy|reduce|wait_signal|wait_count|quiet|barrier|commit)\(")
    ops = {i for i, line in enumerate(text.splitlines(), start=1) if op.match(line)}
    assert ops <= lines, f"ops of lines {sorted(ops - lines)} are not generated"


# ----------------------------------------------------------------------------- toolchain


@pytest.mark.toolchain
@pytest.mark.parametrize(("path", "ranks"), [(ROWS, 2), (A2AV, 4), (LANES, 4),
                                             (ROOT / "protocols" / "counted_gather.cco", 4)],
                         ids=["counted_rows_windows", "alltoallv_windows", "lanes_runtime",
                              "counted_gather"])
def test_builds_with_the_real_headers(path: Path, ranks: int, tmp_path: Path) -> None:
    GeneratedFiles(generate(path.read_text(), ranks, path.name)).write(tmp_path)
    try:
        result = build_dir(tmp_path)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    assert result.outputs and all(p.stat().st_size > 0 for p in result.outputs)
