"""Link ceilings of GPUs 0 and 1, measured in the same run as the protocols.

In a spawned process of its own (it needs both GPUs at once and must not hold them while
the benchmark ranks run), for every per-direction byte count of the run:

- `ce`: `cudaMemcpyPeerAsync` from GPU 0 to GPU 1 (the copy engine over NVLink);
- `ce-bidir`: the same both ways at once (GPU 0 -> 1 on a GPU-0 stream, 1 -> 0 on a
  GPU-1 stream); time = the slower direction's;
- `sm-copy` / `sm-copy-bidir`: a plain kernel storing 16-byte words into the peer's
  memory (the "naive SM-store copy" of the issue; sizes that are multiples of 16).

A sample is `copies` back-to-back copies between two CUDA events (time per copy =
interval / copies), after `warmup` samples.  CuPy does the work (`cupy.cuda.runtime.
memcpyPeerAsync`, a `RawKernel`); without CuPy, `ce` alone is measured with torch
(`Tensor.copy_` across devices, which torch issues as a peer copy on the source's stream).
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SM_COPY_SOURCE = r"""
extern "C" __global__ void ccogen_sm_copy(unsigned long long dst, unsigned long long src,
                                          unsigned long long n16) {
  int4* d = reinterpret_cast<int4*>(dst);
  const int4* s = reinterpret_cast<const int4*>(src);
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
       i += stride)
    d[i] = s[i];
}
"""
SM_COPY_THREADS = 512
SM_COPY_MAX_CTAS = 4 * 132


@dataclass(frozen=True)
class CeilingSpec:
    sizes: tuple[int, ...]
    warmup: int = 3
    samples: int = 20
    src: int = 0
    dst: int = 1
    sm_copy: bool = True


@dataclass
class Ceilings:
    """Per-copy times (us) per impl and size, what measured them, and any problem."""

    times: dict[str, dict[int, list[float]]]
    backend: str = ""
    error: str | None = None


def copies_per_sample(nbytes: int) -> int:
    """Enough back-to-back copies that a sample lasts about 50 us (1 to 64)."""
    estimate_us = 3.0 + nbytes / 300e3  # ~300 GB/s
    return max(1, min(64, round(50.0 / estimate_us)))


def sm_copy_grid(nbytes: int) -> int:
    return max(1, min(SM_COPY_MAX_CTAS, -(-(nbytes // 16) // SM_COPY_THREADS)))


def measure_ceilings(spec: CeilingSpec, timeout_s: float = 300.0) -> Ceilings:
    """Measure in a spawned process; a failure or a timeout is reported, never raised."""
    mp = multiprocessing.get_context("spawn")
    results: Any = mp.Queue()
    proc = mp.Process(target=_main, args=(spec, results), name="ccogen-ceilings")
    proc.start()
    try:
        kind, payload = results.get(timeout=timeout_s)
    except queue_module.Empty:
        kind, payload = "error", f"no result within {timeout_s:g} s"
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
    if kind == "ok":
        return payload  # type: ignore[no-any-return]
    return Ceilings({}, error=f"ceilings not measured: {payload}")


def _main(spec: CeilingSpec, results: Any) -> None:
    try:
        results.put(("ok", measure_here(spec)))
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def measure_here(spec: CeilingSpec) -> Ceilings:
    """Measure in this process (needs both GPUs)."""
    try:
        import cupy  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return _measure_torch(spec)
    return _measure_cupy(spec)


def _measure_cupy(spec: CeilingSpec) -> Ceilings:
    import cupy as cp  # type: ignore[import-not-found]
    import numpy as np

    rt = cp.cuda.runtime
    devices = (spec.src, spec.dst)
    for d, peer in (devices, devices[::-1]):
        with cp.cuda.Device(d):
            if not rt.deviceCanAccessPeer(d, peer):
                raise RuntimeError(f"GPU {d} cannot access GPU {peer} (no peer-to-peer)")
            try:
                rt.deviceEnablePeerAccess(peer)
            except rt.CUDARuntimeError as exc:
                if "AlreadyEnabled" not in str(exc) and "already" not in str(exc).lower():
                    raise
    largest = max(spec.sizes)
    side: dict[int, dict[str, Any]] = {}
    for d in devices:
        with cp.cuda.Device(d):
            src = cp.random.randint(0, 256, size=largest, dtype=cp.int32).astype(cp.uint8)
            side[d] = {"src": src, "dst": cp.empty(largest, dtype=cp.uint8),
                       "stream": cp.cuda.Stream(non_blocking=True),
                       "kernel": cp.RawKernel(SM_COPY_SOURCE, "ccogen_sm_copy"),
                       "events": [cp.cuda.Event() for _ in range(spec.samples + 1)]}
    other = {spec.src: spec.dst, spec.dst: spec.src}

    def issue(d: int, how: str, n: int) -> None:
        """One copy of n bytes from GPU d's source into the other GPU's destination."""
        s, peer = side[d], other[d]
        if how == "ce":
            rt.memcpyPeerAsync(side[peer]["dst"].data.ptr, peer, s["src"].data.ptr, d, n,
                               s["stream"].ptr)
        else:
            with s["stream"]:  # RawKernel launches on the current stream
                s["kernel"]((sm_copy_grid(n),), (SM_COPY_THREADS,),
                            (np.uint64(side[peer]["dst"].data.ptr),
                             np.uint64(s["src"].data.ptr), np.uint64(n // 16)))

    def run(how: str, n: int, both: bool) -> list[float]:
        who = list(devices) if both else [spec.src]
        k = copies_per_sample(n)
        for d in devices:
            cp.cuda.Device(d).synchronize()
        for _ in range(spec.warmup):
            for d in who:
                with cp.cuda.Device(d):
                    for _ in range(k):
                        issue(d, how, n)
        for d in devices:
            cp.cuda.Device(d).synchronize()
        for i in range(spec.samples):
            for d in who:
                with cp.cuda.Device(d):
                    if i == 0:
                        side[d]["events"][0].record(side[d]["stream"])
                    for _ in range(k):
                        issue(d, how, n)
                    side[d]["events"][i + 1].record(side[d]["stream"])
        for d in devices:
            cp.cuda.Device(d).synchronize()
        out = []
        for i in range(spec.samples):
            out.append(max(cp.cuda.get_elapsed_time(side[d]["events"][i],
                                                    side[d]["events"][i + 1]) for d in who)
                       * 1e3 / k)
        return out

    times: dict[str, dict[int, list[float]]] = {}
    for n in spec.sizes:
        if n <= 0:
            continue
        times.setdefault("ce", {})[n] = run("ce", n, False)
        times.setdefault("ce-bidir", {})[n] = run("ce", n, True)
        if spec.sm_copy and n % 16 == 0:
            times.setdefault("sm-copy", {})[n] = run("sm", n, False)
            times.setdefault("sm-copy-bidir", {})[n] = run("sm", n, True)
    return Ceilings(times, backend=f"cupy {cp.__version__} (cudaMemcpyPeerAsync, RawKernel)")


def _measure_torch(spec: CeilingSpec) -> Ceilings:
    import torch  # type: ignore[import-not-found]

    src_dev, dst_dev = torch.device("cuda", spec.src), torch.device("cuda", spec.dst)
    largest = max(spec.sizes)
    a = torch.randint(0, 256, (largest,), dtype=torch.uint8, device=src_dev)
    b = torch.empty(largest, dtype=torch.uint8, device=dst_dev)
    times: dict[str, dict[int, list[float]]] = {"ce": {}}
    with torch.cuda.device(src_dev):
        stream = torch.cuda.Stream(src_dev)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(spec.samples + 1)]
        for n in spec.sizes:
            if n <= 0:
                continue
            k = copies_per_sample(n)
            with torch.cuda.stream(stream):
                for _ in range(spec.warmup * k):
                    b[:n].copy_(a[:n], non_blocking=True)
                torch.cuda.synchronize(src_dev)
                events[0].record(stream)
                for i in range(spec.samples):
                    for _ in range(k):
                        b[:n].copy_(a[:n], non_blocking=True)
                    events[i + 1].record(stream)
            torch.cuda.synchronize(src_dev)
            torch.cuda.synchronize(dst_dev)
            times["ce"][n] = [events[i].elapsed_time(events[i + 1]) * 1e3 / k
                              for i in range(spec.samples)]
    return Ceilings(times, backend=f"torch {torch.__version__} (Tensor.copy_ across GPUs; "
                    "no CuPy: one-way copy-engine ceiling only)")


def sizes_for(per_direction: Sequence[int]) -> tuple[int, ...]:
    """The distinct positive byte counts to measure, ascending."""
    return tuple(sorted({n for n in per_direction if n > 0}))


__all__ = ["CeilingSpec", "Ceilings", "copies_per_sample", "measure_ceilings", "measure_here",
           "sizes_for", "sm_copy_grid"]
