"""`ccogen.driver`: findings merged across instances (one per mistake, ranks per instance)."""

from __future__ import annotations

import textwrap

from ccogen.driver import check_text

OUT_OF_BOUNDS = textwrap.dedent("""\
    protocol ring(chunk: bytes = 1 KiB):
        team lsa
        between_launches: host_sync
        window data: nranks * chunk

        kernel ring(threads=32):
            for s in range(nranks - 1):
                put((me + 1) % nranks,
                    dst=data[(me - s) % nranks * chunk : ((me - s) % nranks + 2) * chunk],
                    src=data[(me - s) % nranks * chunk : ((me - s) % nranks + 2) * chunk],
                    signal="remote")
                wait_signal((me - 1) % nranks)
            quiet((me + 1) % nranks)
    """)


def test_one_bad_region_is_one_finding_over_every_instance_and_rank() -> None:
    result = check_text(OUT_OF_BOUNDS, "ring.cco")
    assert [(d.code, d.span.line if d.span else 0) for d in result.diagnostics] == [
        ("E003", 9), ("E003", 10)]
    d = result.diagnostics[0]
    assert d.message == "region `data[1024:3072]` is outside window `data` of 2048 bytes"
    assert ("on rank 1 (nranks=2); on ranks 0, 2 (nranks=3); on ranks 0, 1, 3 (nranks=4); "
            "on ranks 0, 1, 2, 3, 4, 5, 7 (nranks=8)") in d.notes
    assert any(n.startswith("the numbers shown are from the instance nranks=2, chunk=1024; "
                            "3 other messages") for n in d.notes)
    assert any(n.startswith("in every instance checked (") for n in d.notes)


def test_the_same_ranks_in_every_instance_keep_one_note() -> None:
    text = OUT_OF_BOUNDS.replace("team lsa", "team lsa(2)")
    d = check_text(text, "ring.cco").diagnostics[0]
    assert "on rank 1" in d.notes
    assert not any("(nranks=" in n or n.startswith("the numbers shown") for n in d.notes)


def test_compile_takes_a_check_of_the_same_options_and_refuses_another() -> None:
    import pytest

    from ccogen.compiler import compile_protocol
    from ccogen.driver import CheckOptions, check_protocol
    from ccogen.syntax import parse_ir

    protocol = parse_ir(OUT_OF_BOUNDS.replace("+ 2) * chunk", "+ 1) * chunk"), "ring.cco")
    checked = check_protocol(protocol, CheckOptions(ranks=(2,), target="nvshmem"))
    assert not checked.has_errors
    again = compile_protocol(protocol, "nvshmem", source="ring.cco", ranks=2)
    reused = compile_protocol(protocol, "nvshmem", source="ring.cco", ranks=2, check_result=checked)
    assert reused.checked is checked.instances[0]
    assert reused.files == again.files
    with pytest.raises(ValueError):  # checked at 2 ranks, compiled at 3
        compile_protocol(protocol, "nvshmem", source="ring.cco", ranks=3, check_result=checked)
    with pytest.raises(ValueError):  # checked for another target
        compile_protocol(protocol, "nccl-lsa", source="ring.cco", ranks=2, check_result=checked)
