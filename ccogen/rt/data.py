"""Window contents and `ensure` checking on real data.

Before each epoch every window of every rank is filled with bytes from a generator keyed by
`(seed, epoch, rank, window name)` (`numpy.random.PCG64` seeded with
`SeedSequence([seed, epoch, rank, crc32(name)])`), so any rank can compute any other rank's
initial contents (`init(send@p)`) without communication.  After the epoch each rank checks
its `CheckSpec`s (the instance's `CheckInst`s, flattened to plain data that crosses process
boundaries) against its final windows; a final region on another rank comes from that
rank's exported copy (see ccogen.rt.launch).
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
        from ccogen.rt.errors import RunError

        raise RunError("`ccogen run` needs numpy: pip install numpy") from None
    return numpy


def initial_bytes(seed: int, epoch: int, rank: int, window: str, size: int) -> np.ndarray:
    """The deterministic initial contents of `window` on `rank` in `epoch` (uint8 array)."""
    np = _numpy()
    key = [seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF, epoch, rank,
           zlib.crc32(window.encode("utf-8"))]
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))
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
class CheckSpec:
    """One `ensure` comparison for one rank, as plain data."""

    rank: int
    op: str  # == or !=
    left: RegionSpec
    right: RegionSpec
    location: str  # file.cco:LINE
    text: str      # the source text of the comparison

    def regions(self) -> tuple[RegionSpec, RegionSpec]:
        return (self.left, self.right)


def check_specs(checks: Iterable[CheckInst]) -> list[CheckSpec]:
    """Flatten an instance's CheckInsts (their spans become `file.cco:LINE`)."""
    out = []
    for c in checks:
        location = f"{c.span.path}:{c.span.line}" if c.span is not None else "<ensure>"
        text = c.span.text if c.span is not None else ""
        left = RegionSpec(c.left.window, c.left.start, c.left.stop, c.left.rank, c.left_init)
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
                finals: Mapping[tuple[str, int], np.ndarray]) -> Reader:
    """Region contents: init regions from the generator, final ones from `finals`."""
    cache: dict[tuple[str, int], np.ndarray] = {}

    def read(region: RegionSpec) -> np.ndarray:
        if region.init:
            key = (region.window, region.rank)
            if key not in cache:
                cache[key] = initial_bytes(seed, epoch, region.rank, region.window,
                                           sizes[region.window])
            whole = cache[key]
        else:
            whole = finals[(region.window, region.rank)]
        return whole[region.start:region.stop]

    return read


def evaluate(checks: Iterable[CheckSpec], read: Reader, epoch: int) -> list[CheckFailure]:
    """Every check that does not hold, with the first differing byte range."""
    failures = []
    for c in checks:
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


def _hex(data: np.ndarray, limit: int = 8) -> str:
    shown = bytes(data[:limit]).hex(" ")
    return shown + (" ..." if data.size > limit else "")


__all__ = ["CheckFailure", "CheckSpec", "RegionSpec", "check_specs", "evaluate",
           "first_difference", "initial_bytes", "instance_checks", "make_reader",
           "remote_finals"]
