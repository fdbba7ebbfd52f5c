"""`--sweep PARAM=SPEC`: the values of one protocol parameter that a benchmark visits.

SPEC is one of
- `LO..HI`       geometric steps of x4 from LO, then HI itself if the steps miss it
                 (`block=8B..256MiB`: 8 B, 32 B, ..., 128 MiB, 256 MiB);
- `LO..HI:xF`    geometric steps of xF (F >= 2): `block=1KiB..1MiB:x2`;
- `V1,V2,...`    exactly these values: `rounds=1,2,4,64`.

Values are written as `--param` values are (`ccogen.instantiate.parse_param_value`): plain
integers for `int` parameters, binary units for `bytes` (`4KiB`, `1 MiB`, `64 B`).  Every
problem raises `SweepError` (a ValueError) with a message naming the bad part; the command
line turns it into a usage error (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ccogen.ir import nodes as ir

DEFAULT_FACTOR = 4
MAX_POINTS = 64
_STEP = re.compile(r"^[xX](\d+)$")


class SweepError(ValueError):
    """A `--sweep` argument that cannot be used; the message says why."""


@dataclass(frozen=True)
class Sweep:
    """The visited values of one parameter, ascending and distinct."""

    param: str
    values: tuple[int, ...]
    bytes: bool  # the parameter is a `bytes` parameter (values print with units)
    text: str    # the argument as given

    def label(self, value: int) -> str:
        """`block=1MiB`-style name of one point (used in file names and tables)."""
        return f"{self.param}={format_value(value, self.bytes)}"


def format_bytes(value: int) -> str:
    """`8B`, `4KiB`, `1MiB`, `1536B`: the largest binary unit that divides the value."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size and value % size == 0:
            return f"{value // size}{unit}"
    return f"{value}B"


def format_value(value: int, is_bytes: bool) -> str:
    return format_bytes(value) if is_bytes else str(value)


def geometric(lo: int, hi: int, factor: int = DEFAULT_FACTOR) -> tuple[int, ...]:
    """lo, lo*f, lo*f^2, ... up to hi, and hi itself when the steps do not land on it."""
    if lo < 1:
        raise SweepError(f"a geometric sweep starts at 1 or more, not {lo}")
    if factor < 2:
        raise SweepError(f"the step factor must be at least 2, not x{factor}")
    if hi < lo:
        raise SweepError(f"the sweep runs from low to high: {lo} is above {hi}")
    values = [lo]
    while values[-1] * factor <= hi:
        values.append(values[-1] * factor)
    if values[-1] != hi:
        values.append(hi)
    return tuple(values)


def parse_sweep(text: str, protocol: ir.Protocol) -> Sweep:
    """Parse `PARAM=SPEC` against the protocol's declared parameters."""
    from ccogen.instantiate import parse_param_value

    name, sep, spec = text.partition("=")
    name, spec = name.strip(), spec.strip()
    if not sep or not name or not spec:
        raise SweepError(f"--sweep takes PARAM=LO..HI[:xF] or PARAM=V1,V2,..., not {text!r}")
    decl = protocol.param(name)
    if decl is None:
        known = ", ".join(p.name for p in protocol.params) or "none"
        raise SweepError(f"--sweep {text}: `{protocol.name}` has no parameter `{name}` "
                         f"(its parameters: {known})")

    def value(part: str) -> int:
        try:
            return parse_param_value(part.strip(), decl.type)
        except ValueError as exc:
            raise SweepError(f"--sweep {text}: {exc}") from None

    if ".." in spec:
        span, _, step = spec.partition(":")
        lo_text, _, hi_text = span.partition("..")
        factor = DEFAULT_FACTOR
        if step:
            m = _STEP.match(step.strip())
            if m is None:
                raise SweepError(f"--sweep {text}: the step is written `:x2` or `:x4`, "
                                 f"not `:{step}`")
            factor = int(m.group(1))
        try:
            values = geometric(value(lo_text), value(hi_text), factor)
        except SweepError as exc:
            raise SweepError(f"--sweep {text}: {exc}") from None
    else:
        values = tuple(sorted({value(part) for part in spec.split(",") if part.strip()}))
        if not values:
            raise SweepError(f"--sweep {text}: no values")
    if len(values) > MAX_POINTS:
        raise SweepError(f"--sweep {text}: {len(values)} points; at most {MAX_POINTS} "
                         "(use a larger step)")
    return Sweep(name, values, decl.type is ir.ParamType.BYTES, text)


__all__ = ["DEFAULT_FACTOR", "Sweep", "SweepError", "format_bytes", "format_value",
           "geometric", "parse_sweep"]
