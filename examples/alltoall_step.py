"""An all-to-all exchange inside a training-style loop, through ccogen.torch.

Each rank turns its tokens into features (a small linear layer), sends feature block p to
rank p with ccogen's `protocols/alltoall.cco` (which moves what crosses ranks: the block a
rank keeps is copied locally, as all_to_all implementations do), and combines what it
received.  Every step
is checked bit for bit against the definition of `torch.distributed.all_to_all_single`
applied to every rank's features (gathered through the process group; with the NCCL
backend also against torch's own all_to_all_single).

    torchrun --nproc-per-node 4 examples/alltoall_step.py               # 4 GPUs: nccl-lsa
    torchrun --nproc-per-node 4 examples/alltoall_step.py --shared-gpu  # 4 ranks, 1 GPU (MPS)

Modes (`--modes`, default all): `eager` (plain calls), `graph` (one step captured in a CUDA
graph and replayed `--graph-steps` times back to back without host synchronisation, each
replay's data kept on the device and checked at the end), `compile` (the step under
torch.compile), `overhead` (host time per call of the op against a bare launch of the same
kernels, and the kernels captured in a graph either way).  Exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ccogen.torch as cct

HIDDEN = 256          # bf16 features per token
TOKENS = 8            # tokens per destination rank


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared-gpu", action="store_true",
                    help="ranks share GPUs (CUDA MPS): gloo process group, nvshmem engine")
    ap.add_argument("--target", default=None, help="nccl-lsa (default) or nvshmem")
    ap.add_argument("--modes", default="eager,graph,compile,overhead")
    ap.add_argument("--steps", type=int, default=10, help="eager and compiled steps")
    ap.add_argument("--graph-steps", type=int, default=100, help="CUDA-graph replays")
    ap.add_argument("--out", default=None, help="append the overhead figures to this file")
    return ap.parse_args()


class Features(torch.nn.Module):
    """The 'model': tokens -> features for every destination rank."""

    def __init__(self, nranks: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.proj = torch.nn.Parameter(torch.randn(HIDDEN, HIDDEN, generator=g) / HIDDEN**0.5)
        self.nranks = nranks

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # [nranks, TOKENS, HIDDEN]
        return torch.tanh(tokens @ self.proj.to(tokens.dtype))


class Exchange:
    """The step's communication: features -> the alltoall protocol's windows -> received."""

    def __init__(self, comm: cct.Communicator) -> None:
        n = comm.nranks
        self.rank = comm.rank
        block = TOKENS * HIDDEN * 2  # bytes per destination (bf16)
        self.op = comm.load("alltoall.cco", block=block)
        self.recv_shape = (n, TOKENS, HIDDEN)

    def __call__(self, features: torch.Tensor) -> torch.Tensor:
        # `send` takes the features' bytes (a v1 window is bytes: any dtype of its size);
        # the call launches on the current stream and returns the `recv` window.
        recv = self.op(send=features).view(torch.bfloat16).view(self.recv_shape)
        recv[self.rank].copy_(features[self.rank])  # my own block stays here
        return recv


def step(model: Features, exchange: Exchange, tokens: torch.Tensor
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(features sent, features received, what the next layer consumes)."""
    features = model(tokens).to(torch.bfloat16)
    received = exchange(features)
    return features, received, received.float().sum(dim=1)


def reference(features: torch.Tensor, rank: int, backend: str) -> torch.Tensor:
    """all_to_all_single's result for this rank, from every rank's features."""
    n = dist.get_world_size()
    mine = features.detach()
    if backend == "nccl":
        out = torch.empty_like(mine)
        dist.all_to_all_single(out, mine.contiguous())
        return out
    as_bytes = mine.cpu().view(torch.uint8)  # gloo need not know bf16
    gathered = [torch.empty_like(as_bytes) for _ in range(n)]
    dist.all_gather(gathered, as_bytes)
    return torch.stack([gathered[p][rank] for p in range(n)]).view(mine.dtype).to(mine.device)


def check(name: str, got: torch.Tensor, want: torch.Tensor, rank: int) -> bool:
    if torch.equal(got.cpu(), want.cpu()):
        return True
    differs = got.cpu() != want.cpu()
    blocks = [p for p in range(differs.shape[0]) if bool(differs[p].any())]
    print(f"rank {rank}: {name}: MISMATCH, {int(differs.sum())} elements differ, in the "
          f"blocks from ranks {blocks}", flush=True)
    return False


def run_eager(model: Features, exchange: Exchange, args: argparse.Namespace, rank: int,
              device: torch.device, backend: str, fn: object = None, name: str = "eager"
              ) -> bool:
    fn = fn or (lambda t: step(model, exchange, t))
    ok = True
    for s in range(args.steps):
        tokens = torch.randn(dist.get_world_size(), TOKENS, HIDDEN, device=device,
                             generator=torch.Generator(device).manual_seed(1000 * s + rank))
        features, received, _ = fn(tokens)  # type: ignore[operator]
        ok &= check(f"{name} step {s}", received, reference(features, rank, backend), rank)
    return ok


def run_graph(model: Features, exchange: Exchange, comm: cct.Communicator,
              args: argparse.Namespace, rank: int, device: torch.device, backend: str) -> bool:
    n, steps = dist.get_world_size(), args.graph_steps
    counter = torch.zeros(1, dtype=torch.int64, device=device)
    base = torch.randn(n, TOKENS, HIDDEN, device=device,
                       generator=torch.Generator(device).manual_seed(7 + rank))
    sent = torch.empty(steps, n, TOKENS, HIDDEN, dtype=torch.bfloat16, device=device)
    got = torch.empty_like(sent)

    def body() -> None:
        tokens = base * (counter.to(base.dtype) + 1)          # new data every replay
        features, received, _ = step(model, exchange, tokens)
        index = counter % steps
        sent.index_copy_(0, index, features.unsqueeze(0))
        got.index_copy_(0, index, received.unsqueeze(0))
        counter.add_(1)

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            body()                                            # warm-up, as torch asks
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    mode = "global"
    try:
        with torch.cuda.graph(graph, capture_error_mode="global"):
            body()
    except RuntimeError as exc:
        mode = "thread_local"
        print(f"rank {rank}: capture in global mode failed ({str(exc)[:200]}); "
              "thread_local", flush=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            body()
    counter.zero_()
    torch.cuda.synchronize(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        graph.replay()                                        # no host synchronisation
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    comm.synchronize()
    ok = True
    for s in range(steps):  # every rank gathers every step (collective), reports the first
        want = reference(sent[s], rank, backend)
        good = torch.equal(got[s].cpu(), want.cpu())
        if not good and ok:
            check(f"graph replay {s}", got[s], want, rank)
        ok &= good
    if rank == 0:
        print(f"graph: {steps} replays back to back ({mode} capture), "
              f"{seconds / steps * 1e6:.1f} us per step, every replay checked: "
              f"{'ok' if ok else 'FAILED'}", flush=True)
    return ok


def host_us(fn: object, calls: int = 200, reps: int = 7) -> float:
    """Median host time per call (µs), bursts short enough never to fill the launch queue."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def graph_of(fn: object, calls: int) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()  # type: ignore[operator]
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, calls: int, reps: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        dist.barrier()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def run_overhead(exchange: Exchange, comm: cct.Communicator, rank: int, out: str | None
                 ) -> bool:
    op = exchange.op
    launches = [*op._before, *(launch for launch, _ in op._launches)]
    stream = comm._stream

    def bare() -> None:
        s = stream()
        for launch in launches:
            launch.launch(s)

    op_us = host_us(op)
    bare_us = host_us(bare)
    op_us2 = host_us(op)
    calls = 20
    g_op, g_bare = graph_of(op, calls), graph_of(bare, calls)
    torch.cuda.synchronize()
    r_op, r_bare = replay_us(g_op, calls), replay_us(g_bare, calls)
    r_op2 = replay_us(g_op, calls)
    comm.synchronize()
    if rank == 0:
        lines = [
            f"overhead, {dist.get_world_size()} ranks, {op.spec.label}, {op.spec.target}, "
            f"{len(launches)} launches per call ({', '.join(launch.name for launch in launches)}):",
            f"  eager host time per call: op() {op_us:.2f} us (again {op_us2:.2f}), bare "
            f"launches {bare_us:.2f} us -> Python layer {min(op_us, op_us2) - bare_us:+.2f} us",
            f"  graph of {calls} calls (the same kernels either way): replay per call op "
            f"{r_op:.2f} us (again {r_op2:.2f}), bare {r_bare:.2f} us",
        ]
        print("\n".join(lines), flush=True)
        if out:
            with open(out, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    return True


def main() -> int:
    args = parse_args()
    backend = "gloo" if args.shared_gpu else "nccl"
    target = args.target or ("nvshmem" if args.shared_gpu else "nccl-lsa")
    dist.init_process_group(backend)
    rank = dist.get_rank()
    comm = cct.Communicator(target=target)          # device: LOCAL_RANK % visible GPUs
    device = comm.device
    model = Features(comm.nranks, seed=rank).to(device)
    exchange = Exchange(comm)
    modes = args.modes.split(",")
    ok = True
    if "eager" in modes:
        ok &= run_eager(model, exchange, args, rank, device, backend)
        if rank == 0:
            print(f"eager: {args.steps} steps on {comm.nranks} ranks ({target}, {backend}): "
                  f"{'ok' if ok else 'FAILED'}", flush=True)
    if "graph" in modes:
        ok &= run_graph(model, exchange, comm, args, rank, device, backend)
    if "overhead" in modes:
        run_overhead(exchange, comm, rank, args.out)
    if "compile" in modes:  # last: the slowest to start (the compiler's own work)
        compiled = torch.compile(lambda t: step(model, exchange, t), fullgraph=True)
        good = run_eager(model, exchange, args, rank, device, backend, fn=compiled,
                         name="compiled")
        ok &= good
        if rank == 0:
            print(f"compile: {args.steps} compiled steps (inductor, fullgraph): "
                  f"{'ok' if good else 'FAILED'}", flush=True)
    comm.synchronize()
    dist.barrier()
    flags = [None] * comm.nranks
    dist.all_gather_object(flags, ok)
    if rank == 0:
        print(f"RESULT: {'PASS' if all(flags) else 'FAIL'} ({comm.nranks} ranks, {target}, "
              f"modes {args.modes})", flush=True)
    comm.close()
    dist.destroy_process_group()
    return 0 if all(flags) else 1


if __name__ == "__main__":
    sys.exit(main())
