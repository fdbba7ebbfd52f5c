"""`--sweep PARAM=SPEC`: geometric and listed values, units, and the errors."""

from __future__ import annotations

import pytest

from ccogen.bench.sweep import (
    MAX_POINTS,
    SweepError,
    format_bytes,
    format_value,
    geometric,
    parse_sweep,
)
from ccogen.syntax import parse_ir

KIB, MIB = 1 << 10, 1 << 20

PROTOCOL = parse_ir('''protocol p(block: bytes = 1 KiB, rounds: int = 4):
    team lsa(2)
    window w: block

    kernel k(threads=32):
        for r in range(rounds):
            if me == 0:
                put(1, dst=w, src=w, signal="remote")
            else:
                wait_signal(0)
''', "p.cco")


def test_geometric_steps_of_four_include_the_end() -> None:
    sweep = parse_sweep("block=8B..256MiB", PROTOCOL)
    assert sweep.values[:4] == (8, 32, 128, 512)
    assert sweep.values[-2:] == (128 * MIB, 256 * MIB)  # 512 MiB would overshoot: 256 MiB added
    assert sweep.param == "block" and sweep.bytes and len(sweep.values) == 14


def test_geometric_step_factor_and_exact_end() -> None:
    assert parse_sweep("block=1KiB..1MiB:x2", PROTOCOL).values == tuple(
        KIB << i for i in range(11))
    assert parse_sweep("block=1KiB..1MiB:x4", PROTOCOL).values == (
        KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB)
    assert parse_sweep("block = 4 KiB .. 4 KiB", PROTOCOL).values == (4 * KIB,)


def test_listed_values_are_sorted_and_distinct() -> None:
    sweep = parse_sweep("rounds=64,1,4,4", PROTOCOL)
    assert sweep.values == (1, 4, 64) and not sweep.bytes
    assert parse_sweep("block=8B,1MiB,64 B", PROTOCOL).values == (8, 64, MIB)


def test_labels_and_byte_formatting() -> None:
    sweep = parse_sweep("block=8B,1536B,4KiB,1MiB", PROTOCOL)
    assert [sweep.label(v) for v in sweep.values] == [
        "block=8B", "block=1536B", "block=4KiB", "block=1MiB"]
    assert format_bytes(3 << 30) == "3GiB" and format_bytes(1536) == "1536B"
    assert format_value(12, False) == "12"


@pytest.mark.parametrize(("text", "message"), [
    ("block", "--sweep takes PARAM=LO..HI"),
    ("=8B..1MiB", "--sweep takes PARAM=LO..HI"),
    ("block=", "--sweep takes PARAM=LO..HI"),
    ("size=8B..1MiB", "has no parameter `size` (its parameters: block, rounds)"),
    ("block=1MiB..8B", "1048576 is above 8"),
    ("block=0B..1MiB", "starts at 1 or more"),
    ("block=8B..1MiB:x1", "at least 2"),
    ("block=8B..1MiB:y2", "written `:x2`"),
    ("block=8XB..1MiB", "8XB"),
    ("block=8KB..1MiB", "KB"),
    ("rounds=1KiB..1MiB", "units are only for `bytes` parameters"),
    ("block=,", "no values"),
    ("rounds=" + ",".join(str(i) for i in range(1, MAX_POINTS + 2)), f"at most {MAX_POINTS}"),
])
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(SweepError) as info:
        parse_sweep(text, PROTOCOL)
    assert message in str(info.value)


def test_geometric_direct() -> None:
    assert geometric(1, 10, 3) == (1, 3, 9, 10)
    with pytest.raises(SweepError):
        geometric(4, 2)
