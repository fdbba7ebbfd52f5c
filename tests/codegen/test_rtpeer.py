"""Run-time peers in code generation (ccogen/codegen/rtpeer.py): one put to the peer read
on the device, the checker's other candidates dropped; targets with a static peer refuse
it; no pass takes it for a transfer to one known peer."""

from __future__ import annotations

import re

import pytest

from ccogen.codegen import Unsupported, generate
from ccogen.codegen.rtpeer import collapse
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError
from ccogen.instantiate import instantiate
from ccogen.ir.opkind import OpKind
from ccogen.syntax import parse_ir
from tests.test_instantiate_rtpeer import PROTOCOL

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")


def _transfers(ops: tuple[object, ...]) -> list[object]:
    return [o for o in ops if o.kind in (OpKind.PUT, OpKind.COPY)]  # type: ignore[attr-defined]


def test_code_generation_keeps_one_put_to_the_peer_read_on_the_device() -> None:
    inst, _ = instantiate(PROTOCOL, 4, {})
    assert inst is not None
    one = collapse(inst)
    puts = _transfers(one.ranks[0])
    assert len(puts) == 1 and puts[0].rt_peer is not None  # type: ignore[attr-defined]
    assert (puts[0].dst.start, puts[0].dst.stop, puts[0].dst.runtime) == (0, 16, None)  # type: ignore[attr-defined]
    assert all(p < len(one.ranks[0]) for o in one.ranks[0] for p in o.preds)
    text = generate(inst, "nvshmem", source="route.cco").files["kernels.cu"]
    assert "ccogen_copy_group(c, static_cast<int>(rt_peer), 0ULL" in text
    assert text.count("const uint64_t rt_peer = ") == 4  # one put per rank


def test_targets_with_a_static_peer_refuse_it() -> None:
    with pytest.raises(DiagnosticError) as exc:  # the checker of `--target` says it first
        compile_protocol(PROTOCOL, "nccl-cft", source="route.cco", ranks=4, params={})
    [d] = exc.value.diagnostics
    assert d.code == "E042" and "run-time peer" in d.message
    assert d.span is not None and (d.span.line, d.span.column) == (13, 9)
    inst, _ = instantiate(PROTOCOL, 4, {})
    assert inst is not None
    with pytest.raises(Unsupported, match="run-time peer"):  # and code generation too
        generate(inst, "nccl-cft", source="route.cco")


LL = """\
protocol flagged(n: int = 16):
    team lsa(3)
    queues 1
    between_launches: host_sync
    window out: u8[n]
    window flag: u8[8]
    window msg: u8[8]
    buffer data: u8[n]
    buffer dest: i32[1]

    require:
        1 <= dest[0] <= 2

    kernel k(threads=32):
        if me == 0:
            put(load(dest[0]), dst=out[0:n], src=data[0:n], queue=0)
            put(2, dst=flag[0:8], src=msg[0:8], queue=0, signal="remote")
        elif me == 2:
            wait_signal(0, queue=0)
"""


def test_a_queue_with_a_run_time_peer_takes_no_ll_path() -> None:
    # the 8-byte signalled put alone is an LL stream (the control); the put to the
    # run-time peer before it (its first candidate is rank 1) may go to rank 2 on that
    # queue too, and the signal must then land after it: the stream keeps its counter
    inst, diags = instantiate(parse_ir(LL, "flagged.cco"), 3, {})
    assert inst is not None, diags
    control = LL.replace("            put(load(dest[0]), dst=out[0:n], src=data[0:n], queue=0)\n",
                         "")
    alone, _ = instantiate(parse_ir(control, "flagged.cco"), 3, {})
    assert alone is not None
    called = re.compile(r"ccogen_llput_\w+\(c, ")
    assert called.search(generate(alone, "nvshmem").files["kernels.cu"])
    assert not called.search(generate(inst, "nvshmem").files["kernels.cu"])
