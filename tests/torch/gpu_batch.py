"""Run-time batch sizes on the GPU: run under torchrun (2 ranks or more).

The fixture tests/torch/protocols/gather_rows.cco (every rank sends its first `ntok[0]`
rows of `x`, at most `tokens`, to every rank; `got[src]` says how many came), loaded with
tokens=64, hidden=256, f32.  Two phases, each checked on every rank after every launch:

- `eager`: 20 calls with `x[:n]`, n drawn per rank and call (0, the capacity, values
  between), checked row by row: the rows that came, and the rows beyond them left as
  they were;
- `graph`: one CUDA graph captured with the whole `x` and a count tensor
  (`op(x=x, ntok=count)`), replayed 20 times after writing a new count into the tensor
  (and new rows into `x`): each replay moves that many rows.

Prints `rank R: eager ok` / `rank R: graph ok` (or what differed) and, on rank 0,
`RESULT: PASS` or `RESULT: FAIL`; exits 1 on a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

import ccogen.torch as cct

FIXTURE = Path(__file__).resolve().parent / "protocols" / "gather_rows.cco"
TOKENS, HIDDEN, CALLS = 64, 256, 20


def count_of(rank: int, call: int) -> int:
    """The count of `rank` at `call`: the capacity, 0, a mix, then drawn."""
    fixed = {0: TOKENS, 1: 0, 2: 0 if rank == 0 else TOKENS}
    if call in fixed:
        return fixed[call]
    g = torch.Generator().manual_seed(1_000_003 * call + rank)
    return int(torch.randint(0, TOKENS + 1, (1,), generator=g))


def rows_of(rank: int, call: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(7_000_001 * call + rank + 1)
    return torch.randn(TOKENS, HIDDEN, generator=g).to(device)


def check(comm: cct.Communicator, recv: torch.Tensor, got: torch.Tensor,
          before: torch.Tensor, call: int, phase: str) -> list[str]:
    problems = []
    rows, old = recv.view(comm.nranks, TOKENS, HIDDEN).cpu(), before.view(
        comm.nranks, TOKENS, HIDDEN)
    for src in range(comm.nranks):
        n = count_of(src, call)
        if int(got[src]) != n:
            problems.append(f"{phase} call {call}: got[{src}] = {int(got[src])}, sent {n}")
        want = rows_of(src, call, torch.device("cpu"))[:n]
        if not torch.equal(rows[src, :n], want):
            problems.append(f"{phase} call {call}: the {n} rows from {src} differ")
        if not torch.equal(rows[src, n:], old[src, n:]):
            problems.append(f"{phase} call {call}: rows beyond {n} from {src} changed")
    return problems


def main() -> int:
    shared = "--shared-gpu" in sys.argv
    dist.init_process_group("gloo" if shared else "nccl")
    comm = cct.Communicator(target="nvshmem" if shared else "nccl-lsa")
    rank, device = comm.rank, comm.device
    op = comm.load(FIXTURE, tokens=TOKENS, hidden=HIDDEN, T="f32")
    problems: list[str] = []

    for call in range(CALLS):                                       # eager: x[:n]
        before = op.windows["recv"].cpu().clone()
        x = rows_of(rank, call, device)
        recv, got = op(x=x[:count_of(rank, call)])
        comm.synchronize(timeout_s=120 if call == 0 else 30)
        dist.barrier()  # every rank has read its recv before the next call refills it
        problems += check(comm, recv, got.cpu(), before, call, "eager")
    print(f"rank {rank}: eager {'ok' if not problems else problems[:3]}", flush=True)

    x = torch.zeros(TOKENS, HIDDEN, device=device)                  # graph: ntok=
    count = torch.zeros(1, dtype=torch.int32, device=device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):                                   # warm-up, as torch asks
        op(x=x, ntok=count)
    torch.cuda.current_stream(device).wait_stream(side)
    comm.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(x=x, ntok=count)
    graph_problems: list[str] = []
    for call in range(CALLS):
        before = op.windows["recv"].cpu().clone()
        x.copy_(rows_of(rank, call, device))
        count.fill_(count_of(rank, call))
        graph.replay()
        comm.synchronize(timeout_s=30)
        dist.barrier()
        graph_problems += check(comm, out[0], out[1].cpu(), before, call, "graph")
    print(f"rank {rank}: graph {'ok' if not graph_problems else graph_problems[:3]}",
          flush=True)

    ok = not problems and not graph_problems
    flags: list[object] = [None] * comm.nranks
    dist.all_gather_object(flags, ok)
    if rank == 0:
        print(f"RESULT: {'PASS' if all(flags) else 'FAIL'} ({comm.nranks} ranks, {CALLS} "
              f"eager calls and {CALLS} graph replays with counts 0..{TOKENS})", flush=True)
    comm.close()
    dist.destroy_process_group()
    return 0 if all(flags) else 1


if __name__ == "__main__":
    sys.exit(main())
