"""Window contents and `ensure` checking on real data.

Before each epoch every window of every rank is filled with bytes from a generator keyed by
`(seed, epoch, rank, window name)` (`numpy.random.PCG64` seeded with
`SeedSequence([seed, epoch, rank, crc32(name)])`), so any rank can compute any other rank's
initial contents (`init(send@p)`) without communication.  After the epoch each rank checks
its `CheckSpec`s (the instance's `CheckInst`s, flattened to plain data that crosses process
boundaries) against its final windows; a final region on another rank comes from that
rank's exported copy (see ccogen.rt.launch).

Language v2: a window or buffer of a float element type is filled with finite values
(`ccogen.ir.values.random_values`, from the same generator), and a check against
`sum(...)`/`max(...)`/`min(...)` compares values as the simulator does: integers and
`max`/`min` bit-exact, float sums within the tolerance of `ccogen.ir.values`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ccogen.ir.instance import CheckInst, Instance

MAX_REPORTED_FAILURES = 8


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        from ccogen.errors import RunError

        raise RunError("`ccogen run` needs numpy: pip install numpy") from None
    return numpy


def initial_bytes(seed: int, epoch: int, rank: int, window: str, size: int,
                  dtype: str = "u8") -> np.ndarray:
    """The deterministic initial contents of `window` on `rank` in `epoch` (uint8 array);
    finite values for a float `dtype`."""
    np = _numpy()
    key = [seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF, epoch, rank,
           zlib.crc32(window.encode("utf-8"))]
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))
    from ccogen.ir.dtype import DType

    element = DType(dtype)
    if element.is_float:
        from ccogen.ir.values import random_values

        return random_values(rng, size // element.size, element)
    return np.frombuffer(rng.bytes(size), dtype=np.uint8)


@dataclass(frozen=True)
class RegionSpec:
    window: str
    start: int
    stop: int
    rank: int
    init: bool

    def __str__(self) -> str:
        text = f"{self.window}@{self.rank}[{self.start}:{self.stop}]"
        return f"init({text})" if self.init else text


@dataclass(frozen=True)
class ReductionSpec:
    """`sum`/`max`/`min` of `terms` (weighted), in element type `dtype`, as plain data."""

    op: str
    terms: tuple[RegionSpec, ...]
    weights: tuple[int | float, ...]
    dtype: str


@dataclass(frozen=True)
class CheckSpec:
    """One `ensure` comparison for one rank, as plain data: `left` against `right`, or
    (`right` None) against `reduction`."""

    rank: int
    op: str  # == or !=
    left: RegionSpec
    right: RegionSpec | None
    location: str  # file.cco:LINE
    text: str      # the source text of the comparison
    reduction: ReductionSpec | None = None

    def regions(self) -> tuple[RegionSpec, ...]:
        if self.reduction is not None:
            return (self.left, *self.reduction.terms)
        assert self.right is not None
        return (self.left, self.right)


def check_specs(checks: Iterable[CheckInst]) -> list[CheckSpec]:
    """Flatten an instance's CheckInsts (their spans become `file.cco:LINE`)."""
    out = []
    for c in checks:
        location = f"{c.span.path}:{c.span.line}" if c.span is not None else "<ensure>"
        text = c.span.text if c.span is not None else ""
        left = RegionSpec(c.left.window, c.left.start, c.left.stop, c.left.rank, c.left_init)
        if c.reduction is not None:
            r = c.reduction
            terms = tuple(RegionSpec(t.window, t.start, t.stop, t.rank, init)
                          for t, init in zip(r.terms, r.init, strict=True))
            spec = ReductionSpec(r.op.value, terms, r.weights, r.dtype.value)
            shown = f"{r.op.value}({', '.join(map(str, terms))})"
            out.append(CheckSpec(c.rank, c.op, left, None, location,
                                 text or f"{left} {c.op} {shown}", spec))
            continue
        assert c.right is not None
        right = RegionSpec(c.right.window, c.right.start, c.right.stop, c.right.rank,
                           c.right_init)
        out.append(CheckSpec(c.rank, c.op, left, right, location,
                             text or f"{left} {c.op} {right}"))
    return out


def instance_checks(instance: Instance | None) -> list[CheckSpec]:
    return [] if instance is None else check_specs(instance.checks)


def remote_finals(checks: Iterable[CheckSpec]) -> set[tuple[str, int]]:
    """(window, rank) pairs whose final contents some check reads on another rank."""
    return {(r.window, r.rank) for c in checks for r in c.regions()
            if not r.init and r.rank != c.rank}


@dataclass(frozen=True)
class CheckFailure:
    """An `ensure` comparison that did not hold on real data."""

    rank: int
    epoch: int
    location: str
    text: str
    detail: str

    def format(self) -> str:
        return f"rank {self.rank}, epoch {self.epoch}: ensure at {self.location} failed: " \
               f"{self.text}\n    {self.detail}"


def first_difference(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """(start, stop, count): the first maximal run of differing bytes, and how many differ."""
    np = _numpy()
    diff = np.flatnonzero(a != b)
    if diff.size == 0:
        return (0, 0, 0)
    start = int(diff[0])
    same_after = np.flatnonzero(a[start:] == b[start:])
    stop = start + int(same_after[0]) if same_after.size else int(a.size)
    return (start, stop, int(diff.size))


Reader = Callable[[RegionSpec], "np.ndarray"]


def make_reader(seed: int, epoch: int, sizes: Mapping[str, int],
                finals: Mapping[tuple[str, int], np.ndarray],
                dtypes: Mapping[str, str] | None = None,
                initial: Mapping[tuple[str, int], np.ndarray] | None = None) -> Reader:
    """Region contents: init regions from the generator (or `initial`, by (window, rank):
    the drawn contents of a run-time protocol, ccogen.rt.drawn), final ones from
    `finals`."""
    cache: dict[tuple[str, int], np.ndarray] = dict(initial or {})
    types = dtypes or {}

    def read(region: RegionSpec) -> np.ndarray:
        if region.init:
            key = (region.window, region.rank)
            if key not in cache:
                cache[key] = initial_bytes(seed, epoch, region.rank, region.window,
                                           sizes[region.window],
                                           types.get(region.window, "u8"))
            whole = cache[key]
        else:
            whole = finals[(region.window, region.rank)]
        return whole[region.start:region.stop]

    return read


def evaluate(checks: Iterable[CheckSpec], read: Reader, epoch: int) -> list[CheckFailure]:
    """Every check that does not hold, with the first differing byte range."""
    failures = []
    for c in checks:
        if c.reduction is not None:
            failure = _evaluate_reduction(c, read, epoch)
            if failure is not None:
                failures.append(failure)
            continue
        assert c.right is not None
        left, right = read(c.left), read(c.right)
        equal = left.size == right.size and bool((left == right).all())
        if c.op == "==" and not equal:
            start, stop, count = first_difference(left, right)
            detail = (f"{count} of {left.size} bytes differ; first at {c.left}"
                      f" bytes [{c.left.start + start}:{c.left.start + stop}): "
                      f"got {_hex(left[start:stop])}, expected {_hex(right[start:stop])}")
            failures.append(CheckFailure(c.rank, epoch, c.location, c.text, detail))
        elif c.op == "!=" and equal:
            failures.append(CheckFailure(c.rank, epoch, c.location, c.text,
                                         f"all {left.size} bytes are equal"))
    return failures


def _evaluate_reduction(c: CheckSpec, read: Reader, epoch: int) -> CheckFailure | None:
    from ccogen.ir import values
    from ccogen.ir.dtype import DType
    from ccogen.ir.nodes import ReduceOp

    np = _numpy()
    r = c.reduction
    assert r is not None
    dtype, op = DType(r.dtype), ReduceOp(r.op)
    left = read(c.left)
    terms = [read(t) for t in r.terms]
    ok = values.compare(left, op, terms, r.weights, dtype)
    if bool(ok.all()) == (c.op == "=="):
        return None
    if c.op == "!=":
        return CheckFailure(c.rank, epoch, c.location, c.text,
                            f"all {ok.size} elements equal the {r.op} of the terms")
    bad = np.flatnonzero(~ok)
    first, width = int(bad[0]), dtype.size
    expected = values.combine(op, terms, r.weights, dtype)
    got = values.show(left[first * width:(first + 1) * width], dtype)
    want = values.show(expected[first * width:(first + 1) * width], dtype)
    return CheckFailure(c.rank, epoch, c.location, c.text,
                        f"{bad.size} of {ok.size} {dtype} elements are not the {r.op} of "
                        f"the terms; first element {first} of {c.left}: got {got}, "
                        f"expected {want}")


def _hex(data: np.ndarray, limit: int = 8) -> str:
    shown = bytes(data[:limit]).hex(" ")
    return shown + (" ..." if data.size > limit else "")


__all__ = ["CheckFailure", "CheckSpec", "ReductionSpec", "RegionSpec", "check_specs", "evaluate",
           "first_difference", "initial_bytes", "instance_checks", "make_reader",
           "remote_finals"]
