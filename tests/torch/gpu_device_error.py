"""Errors from the device seen from PyTorch: run under torchrun (2 ranks), with `hang`
(the default) or `require` as argument.  Each rank prints one line and leaves with
os._exit (a trapped context cannot be torn down cleanly).

- `hang`: tests/runtime/data/hang_generated.cco (rank 1 waits for two signals, rank 0
  sends one), loaded with debug=True, force=True: rank 1's wait gives up after ~2 s and
  `Communicator.synchronize` raises DeviceError naming the protocol line, the rank and
  the values.
- `require`: protocols/alltoallv.cco (`require: 0 <= counts[p] <= cap`) loaded with
  debug=True, cap 64, f32; rank 0 passes `counts[1] = cap + 5`.  Its debug build checks
  `require` before anything moves, reports the line, the element and the value (debug
  record kind 4) and traps: DeviceError naming them.  Rank 1's waits for rank 0 give up
  after ~2 s (a DeviceError too).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import ccogen.torch as cct

HANG = Path(__file__).resolve().parent.parent / "runtime" / "data" / "hang_generated.cco"
CAP = 64


def hang(comm: cct.Communicator) -> tuple[cct.Op, dict[str, Any]]:
    return comm.load(HANG, debug=True, force=True), {}


def require(comm: cct.Communicator) -> tuple[cct.Op, dict[str, Any]]:
    op = comm.load("alltoallv.cco", debug=True, cap=CAP, T="f32")
    send = torch.ones(comm.nranks * CAP, dtype=torch.float32, device=comm.device)
    counts = torch.full((comm.nranks,), 3, dtype=torch.int32, device=comm.device)
    if comm.rank == 0:
        counts[1] = CAP + 5  # breaks `0 <= counts[p] <= cap`
    return op, {"send": send, "counts": counts}


def main() -> None:
    shared = "--shared-gpu" in sys.argv
    case = {"hang": hang, "require": require}["require" if "require" in sys.argv else "hang"]
    dist.init_process_group("gloo" if shared else "nccl")
    rank = dist.get_rank()
    comm = cct.Communicator(target="nvshmem" if shared else "nccl-lsa")
    op, arguments = case(comm)
    dist.barrier()
    try:
        op(**arguments)
        comm.synchronize(timeout_s=30)
        print(f"rank {rank}: finished", flush=True)
    except cct.DeviceError as exc:
        print(f"rank {rank}: DeviceError: {exc}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
