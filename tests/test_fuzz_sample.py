"""A fast sample of the fuzzer of `scripts/fuzz.py` (`tests/fuzzlib.py`): 40 inputs of
every kind and 15 random IR protocols, each a diagnostic or a clean result, never a
traceback, a timeout or a lost comment.  The long run (>= 100,000 inputs) is in
docs/reliability.md."""

from __future__ import annotations

import time

import pytest

from tests.fuzzlib import KINDS, Failure, case, check_text, comments, ir_cases, run_case

SAMPLE = 40  # per kind: a few seconds in all


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_sample(kind: str) -> None:
    failures = [f for i in range(SAMPLE) if (f := run_case(case(2026, i, (kind,)))) is not None]
    assert not failures, "\n\n".join(f"{f.what} {f.kind} {f.index} {f.argv}\n{f.detail}"
                                     for f in failures[:3])


def test_fuzz_sample_of_random_ir() -> None:
    failures: list[Failure] = []
    ran = ir_cases(15, failures.append, seed=2026)
    assert ran == 15 and not failures, failures[:1]


def test_the_fuzzer_catches_what_it_should() -> None:
    """The harness itself: a crash, a broken property and a timeout are all reported."""
    import tests.fuzzlib as fuzzlib

    c = case(2026, 1, ("tokens",))
    original = fuzzlib.check_text
    try:
        fuzzlib.check_text = lambda *a, **k: 1 // 0  # type: ignore[assignment]
        assert (f := run_case(c)) is not None and f.what == "traceback"
        assert "ZeroDivisionError" in f.detail
        fuzzlib.check_text = lambda *a, **k: (_ for _ in ()).throw(AssertionError("x"))  # type: ignore[assignment]
        assert (f := run_case(c)) is not None and f.what == "property"

        def spin(*a: object, **k: object) -> None:
            while True:
                pass

        fuzzlib.check_text = spin  # type: ignore[assignment]
        assert (f := run_case(c, timeout=0.2)) is not None and f.what == "timeout"

        def blocked(*a: object, **k: object) -> None:
            time.sleep(5)  # a read that never returns: no CPU used

        fuzzlib.check_text = blocked  # type: ignore[assignment]
        assert (f := run_case(c, timeout=0.2)) is not None and f.what == "timeout"
        assert "blocked" in f.detail

        def starved(*a: object, **k: object) -> None:
            # a loaded machine: ~10 % of a CPU for three windows (0.06 s of CPU in all,
            # under the 0.2 s limit), longer than a wall limit of the CPU limit's length
            for _ in range(20):
                start = time.process_time()
                while time.process_time() - start < 0.003:
                    pass
                time.sleep(0.027)

        fuzzlib.check_text = starved  # type: ignore[assignment]
        assert run_case(c, timeout=0.2) is None
    finally:
        fuzzlib.check_text = original


COMMENTED = '''# header
protocol p(block: bytes = 64 B,  # on a parameter
           n: int = 2):  # on the protocol line
    """Doc."""  # on the docstring
    team lsa
    window send: block
    window recv: block

    kernel k(threads=64):
        if me == 0:  # on the if
            put(1, dst=recv[0:block],  # on a continued line
                src=send[0:block], signal="remote")
        else:  # after else
            wait_signal(0)

    ensure:  # after ensure
        pass
# trailing
'''


def test_fmt_keeps_every_comment() -> None:
    from ccogen.syntax.format import format_text

    once = format_text(COMMENTED, "c.cco")
    assert comments(once) == comments(COMMENTED)
    assert len(comments(COMMENTED)) == 9
    assert format_text(once, "c.cco") == once
    check_text(COMMENTED.encode())  # and the fuzzer's properties hold
