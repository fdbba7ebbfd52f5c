"""A debug build's hung wait, seen from PyTorch: run under torchrun (2 ranks).

tests/runtime/data/hang_generated.cco (rank 1 waits for two signals, rank 0 sends one),
loaded with debug=True, force=True: rank 1's wait gives up after ~2 s and
`Communicator.synchronize` raises DeviceError naming the protocol line, the rank and the
values.  Each rank prints one line and leaves with os._exit (a trapped context cannot be
torn down cleanly).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch.distributed as dist

import ccogen.torch as cct

HANG = Path(__file__).resolve().parent.parent / "runtime" / "data" / "hang_generated.cco"


def main() -> None:
    shared = "--shared-gpu" in sys.argv
    dist.init_process_group("gloo" if shared else "nccl")
    rank = dist.get_rank()
    comm = cct.Communicator(target="nvshmem" if shared else "nccl-lsa")
    op = comm.load(HANG, debug=True, force=True)
    dist.barrier()
    op()
    try:
        comm.synchronize(timeout_s=30)
        print(f"rank {rank}: finished", flush=True)
    except cct.DeviceError as exc:
        print(f"rank {rank}: DeviceError: {exc}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
