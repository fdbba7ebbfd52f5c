"""The engine's own collective of the same shape, through torch.distributed (NCCL).

Run by every benchmark rank after its protocol cases, in the same process: a NCCL
process group (file store in the run's shared directory, this rank's GPU), then per
`CompareSpec`:

- `alltoall`: `all_to_all_single(out, inp)` of nranks * per_peer bytes (uint8);
- `allgather`: `all_gather_into_tensor(out, inp)` of per_peer bytes per rank;

one call checked against a pattern that every rank can compute for every other rank,
`warmup` calls, a barrier, then `samples` calls each between two CUDA events on the
current stream: eager calls, as an application would make them, so the time includes
torch's and NCCL's host-side cost (what the issue's reference figures measure).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ccogen.bench.cases import CaseTimes, CompareSpec

INFO_KEY = "collective-info"  # a CaseTimes whose note names torch's and NCCL's versions


def pattern(torch: Any, rank: int, start: int, stop: int, device: Any) -> Any:
    """Bytes [start, stop) of rank `rank`'s input: (7 * index + 131 * rank + 3) mod 251."""
    index = torch.arange(start, stop, device=device, dtype=torch.int64)
    return ((index * 7 + rank * 131 + 3) % 251).to(torch.uint8)


def run_collectives(compares: Sequence[CompareSpec], rank: int, world: int, device: int,
                    shared_dir: Path, timeout_s: float) -> list[CaseTimes]:
    """Time every collective; never raises (a missing torch or a failure is a note)."""
    try:
        import torch  # type: ignore[import-not-found]
        import torch.distributed as dist  # type: ignore[import-not-found]
    except ImportError:
        return [CaseTimes(c.key, note="not measured: torch is not installed") for c in compares]
    try:
        torch.cuda.set_device(device)
        store = shared_dir / "torch-store"
        dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout_s),
                                device_id=torch.device("cuda", device))
    except Exception as exc:
        return [CaseTimes(c.key, note=f"not measured: torch.distributed init failed: {exc}")
                for c in compares]
    out = [CaseTimes(INFO_KEY, note=_versions(torch))]
    try:
        for c in compares:
            try:
                out.append(_one(torch, dist, c, rank, world, device))
            except Exception as exc:
                out.append(CaseTimes(c.key, note=f"failed: {exc}"))
    finally:
        dist.destroy_process_group()
    return out


def _one(torch: Any, dist: Any, c: CompareSpec, rank: int, world: int, device: int) -> CaseTimes:
    dev = torch.device("cuda", device)
    n = c.per_peer
    if c.kind == "alltoall":
        inp = pattern(torch, rank, 0, world * n, dev)
        out = torch.empty(world * n, dtype=torch.uint8, device=dev)

        def op() -> None:
            dist.all_to_all_single(out, inp)

        def expected(p: int) -> Any:
            return pattern(torch, p, rank * n, (rank + 1) * n, dev)
    elif c.kind == "allgather":
        inp = pattern(torch, rank, 0, n, dev)
        out = torch.empty(world * n, dtype=torch.uint8, device=dev)

        def op() -> None:
            dist.all_gather_into_tensor(out, inp)

        def expected(p: int) -> Any:
            return pattern(torch, p, 0, n, dev)
    else:
        raise ValueError(f"unknown collective {c.kind!r}")
    out.zero_()
    op()
    torch.cuda.synchronize(dev)
    verified = all(bool(torch.equal(out[p * n:(p + 1) * n], expected(p))) for p in range(world))
    for _ in range(c.warmup):
        op()
    torch.cuda.synchronize(dev)
    dist.barrier()
    torch.cuda.synchronize(dev)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(c.samples + 1)]
    events[0].record()
    for i in range(c.samples):
        op()
        events[i + 1].record()
    torch.cuda.synchronize(dev)
    times = [events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(c.samples)]
    return CaseTimes(c.key, times, mode="eager", verified=verified,
                     note="" if verified else "the collective's output differs from the input "
                     "pattern")


def _versions(torch: Any) -> str:
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        nccl = "?"
    return f"torch {torch.__version__}, NCCL {nccl}"


__all__ = ["INFO_KEY", "pattern", "run_collectives"]
