"""A synthetic benchmark result (no GPU): the shapes the issue's targets are read from."""

from __future__ import annotations

from ccogen.bench.results import BenchResult, Point, stats_of

KIB, MIB = 1 << 10, 1 << 20


def point(sweep: str, impl: str, value: int, us: float, link: int, *, is_bytes: bool = True,
          verified: bool | None = True, kernel: float | None = None, note: str = "",
          target: str = "nccl-lsa") -> Point:
    protocol, _, param = sweep.partition(":")
    samples = [us * f for f in (0.98, 1.0, 1.0, 1.01, 1.05)]
    mode = {"generated": "graph", "reference": "graph", "nccl": "eager"}.get(impl, "copy")
    return Point(sweep, protocol, target, impl, param, value, is_bytes, link, mode, 10,
                 stats_of(samples), verified if impl in ("generated", "reference", "nccl")
                 else None, kernel, note)


def synthetic(target: str = "nccl-lsa") -> BenchResult:
    """alltoall:block, pingpong:rounds, pingpong:size and ring_allgather:chunk."""
    r = BenchResult(target, 2)
    r.info["ceiling"] = {"alltoall:block": "ce-bidir", "pingpong:rounds": "ce-bidir",
                         "pingpong:size": "ce-bidir", "ring_allgather:chunk": "ce-bidir"}
    add = r.points.append
    for value, gen, ref, nccl in ((8, 6.0, 5.9, 40.0), (MIB, 4.0 + MIB / 350e3,
                                  4.0 + MIB / 355e3, 41.0), (256 * MIB, 256 * MIB / 370e3,
                                  256 * MIB / 372e3, 256 * MIB / 300e3)):
        add(point("alltoall:block", "generated", value, gen, value, target=target))
        add(point("alltoall:block", "reference", value, ref, value, target=target))
        add(point("alltoall:block", "nccl", value, nccl, value, target=target))
        add(point("alltoall:block", "ce", value, value / 390e3 + 2, value, target=target))
        add(point("alltoall:block", "ce-bidir", value, value / 385e3 + 2, value, target=target))
    for rounds in (1, 2, 4, 8):
        add(point("pingpong:rounds", "generated", rounds, 5.0 + 1.6 * rounds, rounds * 8,
                  is_bytes=False, target=target))
        add(point("pingpong:rounds", "reference", rounds, 5.0 + 1.5 * rounds, rounds * 8,
                  is_bytes=False, kernel=0.7, target=target))
    for size in (8, MIB, 16 * MIB):
        add(point("pingpong:size", "generated", size, 2 * (size / 360e3 + 3), size,
                  target=target))
        add(point("pingpong:size", "ce", size, size / 390e3 + 2, size, target=target))
    add(point("ring_allgather:chunk", "generated", 16, 7.0, 16, target=target))
    add(point("ring_allgather:chunk", "reference", 16, 6.0, 16, verified=False,
              note="1 ensure comparison(s) failed before timing on rank 1", target=target))
    add(point("ring_allgather:chunk", "nccl", 16, 45.0, 16, target=target))
    add(Point("floors", "empty", target, "empty-kernel", "", 0, False, 0, "stream", 1,
              stats_of([4.1, 4.2, 4.3])))
    add(Point("floors", "empty", target, "empty-kernel", "", 0, False, 0, "graph", 1,
              stats_of([1.1, 1.2, 1.3])))
    return r
