"""W104: signal_per_copy=True."""

from __future__ import annotations

from ccogen.passes.warn_signal_per_copy import WarnSignalPerCopy
from tests.passes.run_pass import codes, kernel, run_pass


def lanes(n: int, signal: str = '"remote"') -> str:
    body = f"""
    if me == 0:
        lanes i in range({n}):
            put(1, dst=recv[i*64 : (i+1)*64], src=send[0:64], signal={signal},
                signal_per_copy=True)
    else:
        wait_signal(0, expected={n})
    """
    return kernel(body)


def test_per_lane_signals() -> None:
    [d] = run_pass(WarnSignalPerCopy, lanes(32))
    assert d.message == "`signal_per_copy=True` sends one signal packet per lane"
    assert d.span is not None and d.span.file.text[d.span.start:d.span.end] == \
        "signal_per_copy=True"
    assert d.labels[0].message == "32 signals per `put` call instead of 1"
    assert "~56 µs of extra engine time per call" in d.notes[0]


def test_cheap_cases_are_fine() -> None:
    assert run_pass(WarnSignalPerCopy, lanes(1)) == []
    body = """
    if me == 0:
        warps w in range(2):
            put(1, dst=recv[w*64 : (w+1)*64], src=send[0:64], signal="remote",
                signal_per_copy=True)
    else:
        wait_signal(0, expected=2)
    """
    assert run_pass(WarnSignalPerCopy, kernel(body, threads=64)) == []


def test_targets() -> None:
    assert codes(run_pass(WarnSignalPerCopy, lanes(8), target="mori-sdma")) == ["W104"]
    for target in ("nccl-cft", "nvshmem", "nccl-lsa"):
        assert run_pass(WarnSignalPerCopy, lanes(8), target=target) == [], target
