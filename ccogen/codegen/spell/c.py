"""C spellings shared by CUDA C++ and HIP: literals.

The passes decide numbers and truths; these functions are the only place their C text
is written (`spell.hip` builds mori-sdma's calls from them).
"""

from __future__ import annotations


def u64(value: int) -> str:
    """An unsigned 64-bit literal (heap offsets, byte counts, signal values)."""
    return f"{value}ULL"


def i64(value: int) -> str:
    """A signed 64-bit literal (the start and length of a run-time region)."""
    return f"{value}LL"


def cbool(value: object) -> str:
    return "true" if value else "false"


__all__ = ["cbool", "i64", "u64"]
