"""The warm-up and capture sequence benchmarks/b2b/graph_check.py and b2b_graph.py share:
one call outside the graph on a side stream (lazy loads, the launch-epoch counters), then
`calls` calls captured in one CUDA graph between two barriers of the process group, and
a replay that can watch for a stall (`replay`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist


def capture(warmup: Callable[[], object], step: Callable[[int], object],
            calls: int) -> torch.cuda.CUDAGraph:
    """`warmup()` once outside the capture, then `step(0)` .. `step(calls - 1)` captured in
    one graph; every rank has captured before any rank goes on."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (lazy loads) outside the capture
        warmup()
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
           on_stall: Callable[[float], None] | None = None) -> bool:
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
    t0 = time.monotonic()
    pause = 1e-3
    while not done.query():
        elapsed = time.monotonic() - t0
        if elapsed > watch_s:
            if on_stall is not None:
                on_stall(elapsed)
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return True


__all__ = ["capture", "replay"]
