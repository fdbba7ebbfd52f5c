"""The warm-up and capture sequence benchmarks/b2b/graph_check.py and b2b_graph.py share:
one call outside the graph on a side stream (lazy loads, the launch-epoch counters), then
`calls` calls captured in one CUDA graph between two barriers of the process group, and
a replay; both can watch for a stall (`watch_s`, `on_stall`: module `replay`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist

Stall = Callable[[float], None]


def capture(warmup: Callable[[], object], step: Callable[[int], object], calls: int,
            watch_s: float = 0.0, on_stall: Stall | None = None) -> torch.cuda.CUDAGraph | None:
    """`warmup()` once outside the capture, then `step(0)` .. `step(calls - 1)` captured in
    one graph; every rank has captured before any rank goes on.  None when the warm-up
    stalled (`replay`'s `watch_s`)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    done = torch.cuda.Event()
    with torch.cuda.stream(stream):  # warm-up (lazy loads) outside the capture
        warmup()
        done.record(stream)
    if not _finished(done, watch_s, on_stall):
        return None
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            step(i)
    dist.barrier()
    return graph


def replay(graph: torch.cuda.CUDAGraph, watch_s: float = 0.0,
           on_stall: Stall | None = None) -> bool:
    """Replay `graph` and wait for it.  With `watch_s` > 0 the replay runs on a side stream
    and the host polls it: after `watch_s` seconds unfinished, `on_stall(elapsed)` is called
    (it may read device memory on another stream) and False returned, the graph still
    running.  True when the replay finished."""
    if watch_s <= 0:
        graph.replay()
        torch.cuda.synchronize()
        return True
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    done = torch.cuda.Event()
    with torch.cuda.stream(side):
        graph.replay()
        done.record(side)
    if not _finished(done, watch_s, on_stall):
        return False
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return True


def _finished(done: torch.cuda.Event, watch_s: float, on_stall: Stall | None) -> bool:
    """Poll `done` (no limit when `watch_s` <= 0); False after `on_stall(elapsed)` when it
    has not fired within `watch_s` seconds."""
    t0 = time.monotonic()
    pause = 1e-3
    while not done.query():
        elapsed = time.monotonic() - t0
        if 0 < watch_s < elapsed:
            if on_stall is not None:
                on_stall(elapsed)
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True


__all__ = ["capture", "replay"]
