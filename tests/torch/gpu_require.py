"""A `require` violated on the device, seen from PyTorch: run under torchrun (2 ranks).

protocols/alltoallv.cco (`require: 0 <= counts[p] <= cap`) loaded with debug=True, cap
64, f32: rank 0 passes `counts[1] = cap + 5`.  Its debug build checks `require` before
anything moves, reports the line, the element and the value (debug record kind 4) and
traps; `Communicator.synchronize` raises DeviceError naming them.  Rank 1's waits for
rank 0 give up after ~2 s (a DeviceError too).  Each rank prints one line and leaves with
os._exit (a trapped context cannot be torn down cleanly).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

import ccogen.torch as cct

CAP = 64


def main() -> None:
    shared = "--shared-gpu" in sys.argv
    dist.init_process_group("gloo" if shared else "nccl")
    rank, nranks = dist.get_rank(), dist.get_world_size()
    comm = cct.Communicator(target="nvshmem" if shared else "nccl-lsa")
    op = comm.load("alltoallv.cco", debug=True, cap=CAP, T="f32")
    send = torch.ones(nranks * CAP, dtype=torch.float32, device=comm.device)
    counts = torch.full((nranks,), 3, dtype=torch.int32, device=comm.device)
    if rank == 0:
        counts[1] = CAP + 5  # breaks `0 <= counts[p] <= cap`
    dist.barrier()
    try:
        op(send=send, counts=counts)
        comm.synchronize(timeout_s=30)
        print(f"rank {rank}: finished", flush=True)
    except cct.DeviceError as exc:
        print(f"rank {rank}: DeviceError: {exc}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
