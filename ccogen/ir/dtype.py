"""Element types of windows and buffers (language v2, docs/reference/language.md §14).

`DType` is a `StrEnum`: a dtype prints and serialises as its name (`bf16`).  A
`window NAME: SIZE` without a type is `u8[SIZE]`; slices of a typed window count
elements, and the instance holds every region in bytes (`RegionInst`), so the
happens-before analysis, the race checks and the simulator's memory stay byte-wise.
"""

from __future__ import annotations

from enum import StrEnum


class DType(StrEnum):
    U8 = "u8"
    I32 = "i32"
    U32 = "u32"
    I64 = "i64"
    U64 = "u64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"

    @property
    def size(self) -> int:
        """Bytes per element."""
        return _SIZES[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.BF16, DType.F32)

    @property
    def is_signed(self) -> bool:
        """Signed integers and floats."""
        return self in (DType.I32, DType.I64) or self.is_float

    @property
    def mantissa_bits(self) -> int:
        """Stored fraction bits (0 for integers): sets the float comparison tolerance."""
        return {DType.F16: 10, DType.BF16: 7, DType.F32: 23}.get(self, 0)

    @property
    def accumulator(self) -> DType:
        """The type a `reduce` accumulates in: f32 for f16/bf16, else the type itself (the
        one definition: `ir.values` and `codegen.reduce` read it)."""
        return DType.F32 if self in (DType.F16, DType.BF16) else self


_SIZES: dict[DType, int] = {
    DType.U8: 1, DType.I32: 4, DType.U32: 4, DType.I64: 8, DType.U64: 8,
    DType.F16: 2, DType.BF16: 2, DType.F32: 4,
}

DTYPE_NAMES: tuple[str, ...] = tuple(d.value for d in DType)

# Bytes per element of every element type a manifest or the PyTorch binding may name: the
# language's (`DType`) and `fp8e4m3`, which the runtime ABI admits ahead of the language
# (docs/runtime-abi.md).  The one table: ccogen.manifest reads it.
ELEMENT_SIZES: dict[str, int] = {**{d.value: d.size for d in DType}, "fp8e4m3": 1}


def dtype_or_none(name: str) -> DType | None:
    try:
        return DType(name)
    except ValueError:
        return None


__all__ = ["DTYPE_NAMES", "ELEMENT_SIZES", "DType", "dtype_or_none"]
