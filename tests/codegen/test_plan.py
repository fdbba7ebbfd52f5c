"""Which lanes segments run in phases, and which fork into per-thread code."""

from __future__ import annotations

from ccogen.codegen.plan import phased, segments_of
from ccogen.instantiate import instantiate
from ccogen.ir.instance import OpInst
from ccogen.syntax import parse_ir

HEAD = """protocol p(size: bytes = 64 B):
    team lsa(3)
    window a: nranks * size
    window b: nranks * size

    kernel k(threads=32):
        lanes q in peers():
"""
PUT_B = """            put(q, dst=b[me*size : (me+1)*size], src=a[q*size : (q+1)*size],
                queue=0, signal="remote")
"""
PUT_A = """            put(q, dst=a[me*size : (me+1)*size], src=b[q*size : (q+1)*size],
                queue=0, signal="remote")
"""
WAIT = "            wait_signal(q, queue=0)\n"


def _lanes_segment(body: str) -> list[OpInst]:
    instance, diags = instantiate(parse_ir(HEAD + body), 3, {})
    assert instance is not None, diags
    segments = segments_of([o for o in instance.ranks[0] if o.kernel == 0])
    assert len(segments) == 1
    return segments[0]


def test_transfers_then_waits_run_in_phases() -> None:
    phases = phased(_lanes_segment(PUT_B + "            quiet(q)\n" + WAIT))
    assert phases is not None
    assert [p[0].kind for p in phases] == ["put", "quiet", "wait_signal"]
    assert all(len(p) == 2 for p in phases)  # both lanes of rank 0 in every phase


def test_a_transfer_after_a_wait_forks() -> None:
    # a put after a wait: in phases, one lane's wait could need another lane's later put
    # of the same rank (through a peer), so these lanes run as independent threads
    assert phased(_lanes_segment(PUT_B + WAIT + PUT_A + WAIT)) is None


def test_forked_lanes_generate_per_thread_code() -> None:
    from ccogen.codegen import generate

    instance, _ = instantiate(parse_ir(HEAD + PUT_B + WAIT + PUT_A + WAIT), 3, {})
    assert instance is not None
    text = generate(instance, "nccl-lsa", source="p.cco").files["kernels.cu"]
    # each lane is its own thread: thread-scope copies, signals and waits
    assert "if (ccogen_is_thread(c, 0))" in text and "if (ccogen_is_thread(c, 1))" in text
    assert "ccogen_copy_thread(c," in text and "ccogen_wait_thread(c," in text
    assert "ccogen_copy_group(c," not in text
