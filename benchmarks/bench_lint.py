"""How long `ccogen lint` takes: a ~20k-op instance, and the library's alltoall warm.

1. *Big*: the protocol below at 8 ranks (`team lsa(8)`), 120 rounds of an alltoall
   with one lane per peer: 8 * 120 * 7 * 3 = 20,160 op instances.  Timed from text to
   findings (parse, instantiate, every check of the pipeline), then per stage.
2. *Warm*: parse + check + render of `protocols/alltoall.cco` (4 instances, 2-8 ranks),
   repeated after one warm-up run (grammar built, imports done).

Targets: big <= 3 s, warm alltoall <= 50 ms.

Run: `python benchmarks/bench_lint.py [--repeat N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ccogen.diag.render import render
from ccogen.driver import check_text
from ccogen.instantiate import instantiate
from ccogen.passes import PIPELINE, PassContext
from ccogen.passes.base import analysis_of
from ccogen.syntax import parse_ir

ROOT = Path(__file__).resolve().parent.parent

BIG = '''\
protocol bench_alltoall(chunk: bytes = 4 KiB, rounds: int = {rounds}):
    """Every round, every rank sends one chunk to every other rank: one lane per peer."""
    team lsa(8)
    window send: rounds * nranks * chunk
    window recv: rounds * nranks * chunk

    kernel exchange(threads=64):
        for r in range(rounds):
            lanes p in peers():
                put(p, dst=recv[(r*nranks + me)*chunk : (r*nranks + me + 1)*chunk],
                    src=send[(r*nranks + p)*chunk : (r*nranks + p + 1)*chunk],
                    queue=0, signal="remote")
                quiet(p)
                wait_signal(p, queue=0)

    ensure:
        for r in range(rounds):
            for p in peers():
                recv[(r*nranks + p)*chunk : (r*nranks + p + 1)*chunk] == \\
                    init(send@p)[(r*nranks + me)*chunk : (r*nranks + me + 1)*chunk]
'''


def _time(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _fmt(times: list[float]) -> str:
    return (f"best {min(times) * 1e3:.0f} ms, median {statistics.median(times) * 1e3:.0f} ms "
            f"over {len(times)}")


def big_text(rounds: int) -> str:
    return BIG.replace("{rounds}", str(rounds))


def stages(text: str) -> list[tuple[str, float]]:
    """Seconds per stage of one lint of `text` (one instance)."""
    out: list[tuple[str, float]] = []

    def step(name: str, fn: Callable[[], object]) -> object:
        t = time.perf_counter()
        result = fn()
        out.append((name, time.perf_counter() - t))
        return result

    protocol = step("parse", lambda: parse_ir(text, "bench.cco"))
    instance, _ = step("instantiate", lambda: instantiate(protocol, 8))  # type: ignore[misc]
    ctx = PassContext(instance=instance)
    step("happens-before graph", lambda: analysis_of(ctx).graph)
    step("memory conflicts", lambda: analysis_of(ctx).conflicts)
    for check in PIPELINE:
        step(check.name or check.__name__, lambda c=check: c().run(ctx))  # type: ignore[misc]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=120)
    args = parser.parse_args()

    text = big_text(args.rounds)
    instance, _ = instantiate(parse_ir(text, "bench.cco"), 8)
    assert instance is not None
    big = _time(lambda: check_text(text, "bench.cco"), args.repeat)
    print(f"lint, {instance.op_count:,} op instances on 8 ranks: {_fmt(big)} (target <= 3 s)")
    for name, seconds in stages(text):
        print(f"    {name:<22} {seconds * 1e3:7.0f} ms")

    path = ROOT / "protocols" / "alltoall.cco"
    source = path.read_text(encoding="utf-8")

    def warm() -> str:
        return render(check_text(source, "protocols/alltoall.cco").diagnostics, "full")

    warm()
    small = _time(warm, max(10, args.repeat * 10))
    print(f"warm parse+check+render of protocols/alltoall.cco (nranks 2, 3, 4, 8): "
          f"{_fmt(small)} (target <= 50 ms)")


if __name__ == "__main__":
    main()
