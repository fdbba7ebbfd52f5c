"""`--param` values: `4096`, `0x10`, `1_024`, and for `bytes` parameters `4KiB`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DTYPE_NAMES, DType

_UNITS: dict[str, int] = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_DECIMAL_UNITS = {"k", "kb", "m", "mb", "g", "gb", "t", "tb", "tib", "kib/s"}
_UNIT_HINT = "use `B`, `KiB`, `MiB` or `GiB` (1 KiB = 1024 bytes), e.g. `4KiB`"


def parse_param_value(text: str, type: ir.ParamType) -> Any:
    """A `--param` value: `4096`, `1_024`, `0x10`, and for bytes `4KiB`, `4 KiB`, `64 B`;
    for a `dtype` parameter an element type (`bf16`), returned as a `DType`.

    Units are binary (`KiB` = 1024); decimal ones (`KB`, `MB`) are refused.  A
    `bytes` value cannot be negative.  Raises `ValueError` with a readable message.
    """
    s = text.strip()
    if type is ir.ParamType.DTYPE:
        if s not in DTYPE_NAMES:
            raise ValueError(f"`{s}` is not an element type: write one of "
                             f"{', '.join(DTYPE_NAMES)}")
        return DType(s)
    number, unit = _split_unit(s)
    value = _parse_int(number, s)
    if unit is not None and type is not ir.ParamType.BYTES:
        raise ValueError(f"`{s}`: units are only for `bytes` parameters; write a plain integer")
    value *= _UNITS[unit.lower()] if unit else 1
    if type is ir.ParamType.BYTES and value < 0:
        raise ValueError(f"`{s}`: a byte count cannot be negative")
    return value


def parse_params(values: Sequence[str], protocol: ir.Protocol) -> dict[str, Any]:
    """`["block=4KiB", "n=3"]` -> `{"block": 4096, "n": 3}`, typed by the declarations.

    Raises ValueError with a message naming the bad item; unknown names are kept (the
    instance reports them as E002, with the known names).
    """
    out: dict[str, Any] = {}
    for item in values:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--param takes NAME=VALUE, not {item!r}")
        decl = protocol.param(name.strip())
        kind = decl.type if decl is not None else ir.ParamType.INT
        try:
            out[name.strip()] = parse_param_value(text.strip(), kind)
        except ValueError as exc:
            raise ValueError(f"--param {item}: {exc}") from None
    return out


def _split_unit(s: str) -> tuple[str, str | None]:
    if _int_or_none(s) is not None:
        return s, None
    lowered = s.lower()
    for unit in ("gib", "mib", "kib", "b"):
        number = s[: -len(unit)].strip()
        if lowered.endswith(unit) and _int_or_none(number) is not None:
            return number, s[-len(unit):]
    trailing = re.search(r"[A-Za-z/]+$", s)
    if trailing and trailing.group().lower() in _DECIMAL_UNITS:
        raise ValueError(f"`{s}`: unknown unit `{trailing.group()}`; {_UNIT_HINT}")
    return s, None


def _int_or_none(s: str) -> int | None:
    for base in (0, 10):
        try:
            return int(s, base)
        except ValueError:
            continue
    return None


def _parse_int(number: str, whole: str) -> int:
    value = _int_or_none(number)
    if value is None:
        raise ValueError(f"`{whole}` is not an integer: write `4096`, `0x1000`, `1_024` or, "
                         f"for bytes, {_UNIT_HINT[4:]}")
    return value
