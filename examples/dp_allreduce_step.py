"""Data-parallel training steps whose gradient allreduce is ccogen's, through ccogen.torch.

Every rank holds the same small MLP (two linear layers, f32 parameters) and computes the
gradient of its shard of each step's batch.  The gradients, flattened into one bucket, are
summed over the ranks by `protocols/allreduce_oneshot.cco` (or `allreduce_twoshot.cco`):
the rank writes its bucket into the protocol's window `x`, calls the op, and reads the sum
from the buffer `out` (twoshot: the window `out`); the sum divided by the rank count is
the gradient an SGD-with-momentum step applies.  Checked at every step and at the end:

- the sum against the exact sum of every rank's bucket (float64, gathered with
  `torch.distributed.all_reduce`: gloo on CPU copies, or nccl), within the rounding error
  a sum of `nranks` terms in the bucket's dtype may make;
- the trained parameters against a replica trained on the whole batch in this process,
  without any communication (the same model, batches and optimizer), within the dtype's
  tolerance.

    torchrun --nproc-per-node 4 examples/dp_allreduce_step.py               # 4 GPUs: nccl-lsa
    torchrun --nproc-per-node 4 examples/dp_allreduce_step.py --shared-gpu  # 4 ranks, 1 GPU (MPS)

`--graph` captures the step's communication (bucket into the window, the allreduce,
the average) in a CUDA graph once and replays it at every step; `--compile` runs it under
torch.compile (fullgraph, through the custom op `ccogen::call`).  Exits non-zero on a
mismatch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

import ccogen.torch as cct

IN, HIDDEN, OUT = 64, 128, 16   # the MLP: IN -> HIDDEN (tanh) -> OUT
BATCH = 32                      # samples per rank and step
LR, MOMENTUM = 0.05, 0.9
ALIGN = 256                     # bucket elements are padded to a multiple of this
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
PROTOCOLS = {"oneshot": "allreduce_oneshot.cco", "twoshot": "allreduce_twoshot.cco"}
# |trained - replica| <= TRAINED_RTOL * max|replica parameter| after the steps (see
# tests/torch/test_dp_example.py: the bound holds with margin on the CPU
# simulation, and a wrong allreduce breaks it)
TRAINED_RTOL = {"f32": 1e-4, "bf16": 2e-2}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared-gpu", action="store_true",
                    help="ranks share GPUs (CUDA MPS): gloo process group, nvshmem engine")
    ap.add_argument("--target", default=None, help="nccl-lsa (default) or nvshmem")
    ap.add_argument("--protocol", choices=sorted(PROTOCOLS), default="oneshot")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32",
                    help="the bucket's element type (the parameters are f32)")
    ap.add_argument("--steps", type=int, default=10, help="training steps")
    ap.add_argument("--seed", type=int, default=0)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--graph", action="store_true",
                      help="capture the communication in a CUDA graph, replay it every step")
    mode.add_argument("--compile", action="store_true",
                      help="the communication under torch.compile (fullgraph)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error(f"--steps must be at least 1, not {args.steps}")
    return args


# -- the model and its data -------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def make_model(seed: int, device: torch.device | str = "cpu") -> MLP:
    """The same initial parameters on every rank (and for the replica), from a generator
    of its own (ranks run as threads in the CPU tests: torch's global one is shared)."""
    g = torch.Generator().manual_seed(seed)
    model = MLP()
    with torch.no_grad():
        for layer in (model.fc1, model.fc2):  # nn.Linear's default bound, 1/sqrt(fan_in)
            bound = layer.in_features ** -0.5
            layer.weight.uniform_(-bound, bound, generator=g)
            layer.bias.uniform_(-bound, bound, generator=g)
    return model.to(device)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def global_batch(step: int, nranks: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s whole batch (every rank makes the same): inputs and targets."""
    g = torch.Generator().manual_seed(1_000_003 * seed + step)
    inputs = torch.randn(nranks * BATCH, IN, generator=g)
    targets = torch.randn(nranks * BATCH, OUT, generator=g)
    return inputs, targets


def shard(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t[rank * BATCH:(rank + 1) * BATCH]


def gradient(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor
             ) -> torch.Tensor:
    """The gradient of the mean squared error over `inputs`, flattened into one bucket."""
    model.zero_grad(set_to_none=False)
    F.mse_loss(model(inputs), targets).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])  # type: ignore[union-attr]


def apply(model: torch.nn.Module, optimizer: torch.optim.Optimizer, bucket: torch.Tensor
          ) -> None:
    """The bucket back into the parameters' gradients, then the optimizer's step."""
    offset = 0
    for p in model.parameters():
        p.grad.copy_(bucket[offset:offset + p.numel()].view_as(p))  # type: ignore[union-attr]
        offset += p.numel()
    optimizer.step()


def padded(count: int, align: int = ALIGN) -> int:
    return -(-count // align) * align


# -- the communication --------------------------------------------------------------------------
class GradAllreduce:
    """The bucket's allreduce: this rank's gradient -> the window `x` -> the sum.

    `eager(grad)`: the gradient is written into the window (this rank's symmetric heap, which
    the peers read), the op launched on the current stream; returns the sum (a view of the
    buffer or window that the next call overwrites).  `functional(grad)`: the form for
    torch.compile: the window contents passed as an argument, the sum returned.
    """

    def __init__(self, comm: cct.Communicator, numel: int, protocol: str = "oneshot",
                 dtype: str = "f32") -> None:
        nranks = comm.nranks
        self.numel, self.device, self.dtype = numel, comm.device, DTYPES[dtype]
        if protocol == "oneshot":
            self.size = padded(numel)
            self.op = comm.load(PROTOCOLS[protocol], n=self.size, T=dtype)
        else:
            chunk = padded(-(-numel // nranks))
            self.size = nranks * chunk
            self.op = comm.load(PROTOCOLS[protocol], chunk=chunk, T=dtype)
        self.x = self.op.windows["x"]  # the padding stays 0 (the heap is zeroed at load)
        self.out = (torch.zeros(self.size, dtype=self.dtype, device=self.device)
                    if "out" in self.op.buffers else None)

    def eager(self, grad: torch.Tensor) -> torch.Tensor:
        self.x[:self.numel].copy_(grad)               # converts to the bucket's dtype
        if self.out is None:
            total = self.op()                          # twoshot: returns its window `out`
        else:
            self.op(out=self.out)                      # oneshot: writes the buffer `out`
            total = self.out
        return total[:self.numel]

    def functional(self, grad: torch.Tensor) -> torch.Tensor:
        x = F.pad(grad.to(self.dtype), (0, self.size - self.numel))
        if self.out is None:
            total = self.op(x=x)
        else:
            total = torch.empty(self.size, dtype=self.dtype, device=self.device)
            self.op(x=x, out=total)
        return total[:self.numel]


class GraphedMean:
    """The communication of a step captured once in a CUDA graph and replayed: the gradient
    into a static tensor, the allreduce, the mean into a static tensor."""

    def __init__(self, allreduce: GradAllreduce, nranks: int, rank: int) -> None:
        self.allreduce, self.nranks, self.rank = allreduce, nranks, rank
        self.grad = torch.zeros(allreduce.numel, device=allreduce.device)
        self.mean = torch.zeros_like(self.grad)
        self.total = torch.zeros(allreduce.numel, dtype=allreduce.dtype, device=allreduce.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.mode = ""

    def _body(self) -> None:
        total = self.allreduce.eager(self.grad)
        self.total.copy_(total)
        self.mean.copy_(total.float() / self.nranks)

    def _capture(self) -> None:
        device = self.allreduce.device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._body()                           # warm-up, as torch asks
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        self.mode = "global"
        try:
            with torch.cuda.graph(graph, capture_error_mode="global"):
                self._body()
        except RuntimeError as exc:
            self.mode = "thread_local"
            print(f"rank {self.rank}: capture in global mode failed ({str(exc)[:200]}); "
                  "thread_local", flush=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._body()
        self.graph = graph

    def __call__(self, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.grad.copy_(grad)
        if self.graph is None:
            self._capture()
        assert self.graph is not None
        self.graph.replay()                            # no host synchronisation
        return self.total, self.mean


def make_mean(allreduce: GradAllreduce, nranks: int, rank: int, mode: str
              ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """grad -> (the sum over ranks in the bucket's dtype, the mean in f32), per `mode`."""
    if mode == "graph":
        return GraphedMean(allreduce, nranks, rank)
    if mode == "compile":
        def mean(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            total = allreduce.functional(grad)
            return total, total.float() / nranks

        return torch.compile(mean, fullgraph=True)

    def eager(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = allreduce.eager(grad)
        return total, total.float() / nranks

    return eager


# -- the checks -----------------------------------------------------------------------------------
UNIT_ROUNDOFF = {"f32": 2.0**-24, "bf16": 2.0**-8}


def sum_error(got: torch.Tensor, exact: torch.Tensor, magnitude: torch.Tensor, nranks: int,
              dtype: str) -> tuple[float, int]:
    """(the largest |got - exact| relative to what rounding allows, elements beyond it).

    `exact`: the sum of the ranks' buckets in float64; `magnitude`: the sum of their
    absolute values.  A sum of `nranks` terms in a dtype of unit roundoff u, in any order
    and with any accumulator at least as wide, is within (nranks - 1) u sum|x_p| of the
    exact sum, and the final rounding to the dtype adds u |exact|; the bound is doubled."""
    u = UNIT_ROUNDOFF[dtype]
    allowed = 2 * ((nranks - 1) * u * magnitude + u * exact.abs()) + 1e-30
    error = (got.double().cpu() - exact.cpu()).abs()
    return float((error / allowed.cpu()).max()), int((error > allowed.cpu()).sum())


def exact_sum(bucket: torch.Tensor, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum, sum of absolute values) of every rank's `bucket`, in float64, without ccogen."""
    both = torch.stack([bucket.double(), bucket.double().abs()])
    if backend != "nccl":
        both = both.cpu()
    dist.all_reduce(both)
    return both[0], both[1]


def trained_error(model: torch.nn.Module, replica: torch.nn.Module) -> float:
    """max |model - replica| over the parameters, relative to the replica's largest."""
    with torch.no_grad():
        diff = max(float((p - r).abs().max()) for p, r in zip(
            model.parameters(), replica.parameters(), strict=True))
        scale = max(float(r.abs().max()) for r in replica.parameters())
    return diff / scale


# -- the program ----------------------------------------------------------------------------------
def train(comm: cct.Communicator, args: argparse.Namespace, backend: str) -> bool:
    rank, nranks, device = comm.rank, comm.nranks, comm.device
    mode = "graph" if args.graph else "compile" if args.compile else "eager"
    model, replica = make_model(args.seed, device), make_model(args.seed, device)
    optimizer, reference = make_optimizer(model), make_optimizer(replica)
    numel = sum(p.numel() for p in model.parameters())
    allreduce = GradAllreduce(comm, numel, args.protocol, args.dtype)
    mean = make_mean(allreduce, nranks, rank, mode)
    ok = True
    worst = 0.0
    for step in range(args.steps):
        inputs, targets = (t.to(device) for t in global_batch(step, nranks, args.seed))
        grad = gradient(model, shard(inputs, rank), shard(targets, rank))
        total, averaged = mean(grad)                  # the communication
        # a hang is a DeviceError, not a hang (the first step waits for every rank's
        # start-up: torch.compile's own work, a graph's capture)
        comm.synchronize(timeout_s=300.0 if step == 0 else 60.0)
        exact, magnitude = exact_sum(grad.to(allreduce.dtype), backend)
        ratio, bad = sum_error(total, exact, magnitude, nranks, args.dtype)
        worst = max(worst, ratio)
        if bad:
            print(f"rank {rank}: step {step}: MISMATCH: {bad} of {numel} summed elements "
                  f"beyond the rounding bound (worst {ratio:.3g}x the bound)", flush=True)
            ok = False
        apply(model, optimizer, averaged)
        # the replica: the whole batch in this process, no communication
        apply(replica, reference, gradient(replica, inputs, targets))
    error = trained_error(model, replica)
    if error > TRAINED_RTOL[args.dtype]:
        print(f"rank {rank}: MISMATCH: after {args.steps} steps the parameters differ from "
              f"the replica's by {error:.3g} (relative; tolerance {TRAINED_RTOL[args.dtype]:g})",
              flush=True)
        ok = False
    if rank == 0:
        how = (f", {mean.mode} capture, {args.steps} replays"
               if isinstance(mean, GraphedMean) else "")
        print(f"{mode}{how}: {args.steps} steps on {nranks} ranks ({args.protocol}, "
              f"{args.dtype} bucket of {numel} elements, {comm.target}, {backend}): sums within "
              f"{worst:.2g}x the rounding bound, parameters {error:.2g} from the replica: "
              f"{'ok' if ok else 'FAILED'}", flush=True)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    backend = "gloo" if args.shared_gpu else "nccl"
    target = args.target or ("nvshmem" if args.shared_gpu else "nccl-lsa")
    dist.init_process_group(backend)
    comm = cct.Communicator(target=target)          # device: LOCAL_RANK % visible GPUs
    ok = train(comm, args, backend)
    comm.synchronize()
    dist.barrier()
    flags: list[object] = [None] * comm.nranks
    dist.all_gather_object(flags, ok)
    mode = "graph" if args.graph else "compile" if args.compile else "eager"
    if comm.rank == 0:
        print(f"RESULT: {'PASS' if all(flags) else 'FAIL'} ({comm.nranks} ranks, {target}, "
              f"{args.protocol}, {args.dtype}, {mode})", flush=True)
    comm.close()
    dist.destroy_process_group()
    return 0 if all(flags) else 1


if __name__ == "__main__":
    sys.exit(main())
