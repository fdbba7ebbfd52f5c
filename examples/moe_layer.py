"""A mixture-of-experts layer whose token exchange is ccogen's, through ccogen.torch.

Every rank holds one expert (a two-layer MLP: hidden -> ffn (tanh) -> hidden) and
`tokens` tokens of width `hidden`.  A step of the layer, on every rank:

1. the gate (a linear map to one logit per expert, softmax, top-k, weights renormalised
   to sum to 1) routes each token to k distinct experts, hence to k distinct ranks;
2. `protocols/moe_dispatch.cco` sends each token to the ranks of its experts: token t of
   rank `src` lands in row `src * tokens + t` of the receiver's window `recv`;
3. the rank's expert runs on every row of `recv` (rows no token was sent to hold stale
   data: `moe_combine` clears them before they meet their zero weight);
4. `protocols/moe_combine.cco` brings each output row back to its token's rank, which
   sums them with the gate's weights: `y[t] = sum_j w_j * expert_{e_j}(x_t)`.

Checked at every step against the same layer computed in this process without any
communication: every rank's tokens (regenerated from the seed), every expert evaluated
on them in float32, combined with the same gate's weights; this rank's `y` must be
within the dtype's tolerance of it.  Exits non-zero on a mismatch.

    torchrun --nproc-per-node 4 examples/moe_layer.py               # 4 GPUs: nccl-lsa
    torchrun --nproc-per-node 4 examples/moe_layer.py --shared-gpu  # 4 ranks, 1 GPU (MPS)

The number of tokens changes every step, as in inference: each rank draws its count
for the step (the capacity `--tokens`, 0, a mix of both, then values between, from the
seed) and passes its first n tokens (`x[:n]`), when the protocols take a run-time count
(`buffer ntok: i32[1]`, `require: 0 <= ntok[0] <= tokens`: ccogen.torch counts the rows);
with protocols of a fixed count every step moves `--tokens` tokens.

`--graph` captures the whole layer (gate, dispatch, experts, combine) in a CUDA graph
once, on full-capacity tensors with the count in a device tensor (`ntok=`), and replays
it at every step after writing the step's count and tokens; `--compile` runs it under
torch.compile (fullgraph, through the custom op `ccogen::call`).  One expert per rank,
so `--k` is at most the rank count (the combine's weight for a rank is then the weight of
that rank's one expert).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

import ccogen.torch as cct

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# the dispatch and the combine (ccogen's library; the CPU tests load fixtures of their own)
PROTOCOLS = ("moe_dispatch.cco", "moe_combine.cco")
# |y - reference| <= RTOL * max|reference| (see tests/torch/test_moe_example.py: holds with
# margin on the CPU with an exchange that rounds as the device's does; a wrong exchange
# breaks it)
RTOL = {"f32": 1e-4, "bf16": 3e-2}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared-gpu", action="store_true",
                    help="ranks share GPUs (CUDA MPS): gloo process group, nvshmem engine")
    ap.add_argument("--target", default=None, help="nccl-lsa (default) or nvshmem")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32",
                    help="the tokens' and experts' element type (the gate is f32)")
    ap.add_argument("--tokens", type=int, default=64,
                    help="tokens per rank: the capacity (a step's count is 0 .. this)")
    ap.add_argument("--hidden", type=int, default=128, help="a token's width")
    ap.add_argument("--ffn", type=int, default=256, help="an expert's inner width")
    ap.add_argument("--k", type=int, default=2, help="experts per token (<= ranks)")
    ap.add_argument("--steps", type=int, default=10, help="layer steps (new tokens each)")
    ap.add_argument("--seed", type=int, default=0)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--graph", action="store_true",
                      help="capture the layer in a CUDA graph, replay it every step")
    mode.add_argument("--compile", action="store_true",
                      help="the layer under torch.compile (fullgraph)")
    args = ap.parse_args(argv)
    for name in ("tokens", "hidden", "ffn", "k", "steps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    return args


def rank_problem(args: argparse.Namespace, nranks: int) -> str | None:
    """Why the layer cannot run on `nranks` ranks (None: it can)."""
    if args.k > nranks:
        return (f"--k {args.k}: one expert per rank, so at most {nranks} (the rank count) "
                f"distinct experts per token")
    return None


def mode_of(args: argparse.Namespace) -> str:
    return "graph" if args.graph else "compile" if args.compile else "eager"


# -- the model and its data -------------------------------------------------------------------
class Expert(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, ffn)
        self.fc2 = torch.nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def make_gate(hidden: int, experts: int, seed: int, device: torch.device | str = "cpu"
              ) -> torch.Tensor:
    """The gate's f32 weights `[hidden, experts]` (the same on every rank)."""
    g = torch.Generator().manual_seed(7_000_003 * seed + 1)
    return (torch.randn(hidden, experts, generator=g) / hidden ** 0.5).to(device)


def make_expert(expert: int, hidden: int, ffn: int, seed: int,
                device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
                ) -> Expert:
    """Expert `expert`'s MLP (the same parameters on every rank that makes it).  Drawn
    from a generator of its own, not torch's global one: ranks run as threads in the
    CPU tests, where a seeded global generator would be shared."""
    g = torch.Generator().manual_seed(1_000_003 * seed + 17 * expert + 2)
    mlp = Expert(hidden, ffn)
    with torch.no_grad():
        for layer in (mlp.fc1, mlp.fc2):  # nn.Linear's default bound, 1/sqrt(fan_in)
            bound = layer.in_features ** -0.5
            layer.weight.uniform_(-bound, bound, generator=g)
            layer.bias.uniform_(-bound, bound, generator=g)
    return mlp.to(device=device, dtype=dtype)


def tokens_of(rank: int, step: int, tokens: int, hidden: int, seed: int) -> torch.Tensor:
    """Rank `rank`'s f32 tokens at `step`, `tokens` (the capacity) of them: a step uses
    the first `count_of(...)` (any rank can make any rank's)."""
    g = torch.Generator().manual_seed(1_000_003 * seed + 10_007 * step + rank)
    return torch.randn(tokens, hidden, generator=g)


def count_of(rank: int, step: int, cap: int, seed: int) -> int:
    """How many tokens rank `rank` has at `step`: the capacity, 0, 0 on rank 0 and the
    capacity elsewhere, then drawn from 0 .. cap (any rank can tell any rank's)."""
    fixed = {0: cap, 1: 0, 2: 0 if rank == 0 else cap}
    if step in fixed:
        return fixed[step]
    g = torch.Generator().manual_seed(3_000_017 * seed + 10_007 * step + rank + 5)
    return int(torch.randint(0, cap + 1, (1,), generator=g))


def gate(x: torch.Tensor, weights: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(expert of each of a token's top k `[tokens, k]` int32, their weights f32, summing
    to 1 per token).  Computed in f32 from `x` as the rank holds it."""
    probs = torch.softmax(x.float() @ weights, dim=-1)
    top, experts = torch.topk(probs, k, dim=-1)
    return experts.to(torch.int32), top / top.sum(dim=-1, keepdim=True)


def rank_counts(topk_rank: torch.Tensor, nranks: int, count: torch.Tensor | None = None
                ) -> torch.Tensor:
    """How many tokens go to each rank (int32 `[nranks]`; a token counts once per rank);
    `count` (a one-element device tensor): only the first `count` tokens count."""
    hits = torch.zeros(topk_rank.shape[0], nranks, dtype=torch.int32, device=topk_rank.device)
    hits.scatter_(1, topk_rank.long(), 1)
    if count is not None:  # on the device: a captured graph serves every count
        live = torch.arange(topk_rank.shape[0], device=topk_rank.device) < count
        hits *= live[:, None].to(torch.int32)
    return hits.sum(dim=0, dtype=torch.int32)


def reference(xs: Sequence[torch.Tensor], gate_weights: torch.Tensor,
              experts: Sequence[torch.nn.Module], k: int, dtype: torch.dtype
              ) -> list[torch.Tensor]:
    """The layer without communication: every rank's `y` (f32), each token through its k
    experts (f32 parameters) on the token as the rank holds it (rounded to `dtype`), the
    outputs summed with the gate's weights.  The gate runs per rank, as the ranks run it."""
    ys = []
    with torch.no_grad():
        for x in xs:
            held = x.to(dtype)
            chosen, weights = gate(held, gate_weights, k)
            outs = torch.stack([e(held.float()) for e in experts], dim=1)  # [t, E, hidden]
            picked = torch.gather(outs, 1, chosen.long()[:, :, None].expand(-1, -1,
                                                                             outs.shape[2]))
            ys.append((weights[:, :, None] * picked).sum(dim=1))
    return ys


# -- the layer --------------------------------------------------------------------------------
class MoELayer:
    """This rank's part of the layer: the gate, its expert, the two protocols.

    The phases (`route`, `dispatch`, `expert`, `combine`) are separate so a test can run
    the ranks of a fake job in lockstep; `eager(x)` runs them all.  `functional(x)` is the
    form for torch.compile: window contents passed as arguments, outputs returned.

    `x` is this step's tokens, `[n, hidden]` with n up to `tokens` when the protocols take
    a run-time count (`batched`), exactly `tokens` otherwise.  `count`, a one-element int32
    device tensor, is the CUDA-graph form: `x` whole, the count read on the device.
    """

    def __init__(self, comm: cct.Communicator, args: argparse.Namespace) -> None:
        nranks, device = comm.nranks, comm.device
        problem = rank_problem(args, nranks)
        if problem is not None:
            raise ValueError(problem)
        self.nranks, self.rank, self.device = nranks, comm.rank, device
        self.tokens, self.hidden, self.k = args.tokens, args.hidden, args.k
        self.dtype = DTYPES[args.dtype]
        params = {"tokens": args.tokens, "hidden": args.hidden, "k": args.k, "T": args.dtype}
        self.dispatch_op = comm.load(PROTOCOLS[0], **params)
        self.combine_op = comm.load(PROTOCOLS[1], **params)
        self.gate_weights = make_gate(args.hidden, nranks, args.seed, device)
        self.expert_mlp = make_expert(comm.rank, args.hidden, args.ffn, args.seed, device,
                                      self.dtype)
        self.zeros = torch.zeros(args.hidden, dtype=self.dtype, device=device)
        self.y = torch.zeros(args.tokens * args.hidden, dtype=self.dtype, device=device)
        # both protocols take the count (ccogen.torch.batch): a step may have fewer tokens
        self.batched = self.dispatch_op.batch is not None and self.combine_op.batch is not None

    def _count(self, op: cct.Op, count: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The count argument of `op` (its count buffer's name) when one is given."""
        if count is None:
            return {}
        assert op.batch is not None, "a count tensor needs protocols that take one"
        return {op.batch.count: count}

    def route(self, x: torch.Tensor, count: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(topk_rank int32 `[n * k]`, topk_weight f32 `[n * k]`, rank counts)."""
        chosen, weights = gate(x, self.gate_weights, self.k)  # expert e lives on rank e
        return (chosen.reshape(-1), weights.reshape(-1),
                rank_counts(chosen, self.nranks, count))

    def dispatch(self, x: torch.Tensor, topk_rank: torch.Tensor, counts: torch.Tensor,
                 count: torch.Tensor | None = None) -> torch.Tensor:
        """The received rows `[nranks * tokens, hidden]` (a view of the window `recv`: the
        rows of tokens not sent this step are left as they were)."""
        recv, _got = self.dispatch_op(x=x.reshape(-1), topk_rank=topk_rank,
                                      rank_counts=counts, **self._count(self.dispatch_op, count))
        return recv.view(-1, self.hidden)

    def expert(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's expert on every received row, into the window `expert_out`."""
        out = self.combine_op.windows["expert_out"]
        with torch.no_grad():
            out.view(-1, self.hidden).copy_(self.expert_mlp(rows))
        return out

    def combine(self, topk_rank: torch.Tensor, topk_weight: torch.Tensor,
                count: torch.Tensor | None = None) -> torch.Tensor:
        """`y` `[n, hidden]` (this layer's buffer, overwritten by the next call)."""
        n = topk_rank.numel() // self.k
        self.combine_op.windows["topk_rank"][:n * self.k].copy_(topk_rank)
        self.combine_op(topk_weight=topk_weight, zeros=self.zeros, y=self.y[:n * self.hidden],
                        **self._count(self.combine_op, count))
        return self.y[:n * self.hidden].view(n, self.hidden)

    def eager(self, x: torch.Tensor, count: torch.Tensor | None = None) -> torch.Tensor:
        topk_rank, topk_weight, counts = self.route(x, count)
        rows = self.dispatch(x, topk_rank, counts, count)
        self.expert(rows)
        return self.combine(topk_rank, topk_weight, count)

    def functional(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        topk_rank, topk_weight, counts = self.route(x)
        recv, _got = self.dispatch_op(x=x.reshape(-1), topk_rank=topk_rank,
                                      rank_counts=counts)
        out = self.expert_mlp(recv.view(-1, self.hidden)).reshape(-1)
        y = torch.empty(n * self.hidden, dtype=self.dtype, device=self.device)
        # a window's contents are whole: the routing rows beyond n are rank 0 (not read)
        table = torch.zeros(self.tokens * self.k, dtype=torch.int32, device=self.device)
        table[:n * self.k] = topk_rank
        self.combine_op(expert_out=out, topk_rank=table, topk_weight=topk_weight,
                        zeros=self.zeros, y=y)
        return y.view(n, self.hidden)


class GraphedLayer:
    """The layer captured once in a CUDA graph (static input and output) and replayed.

    With protocols that take a count, the graph holds the whole `tokens` rows and the
    count in a device tensor: a replay after writing a step's tokens into the first n rows
    of `x` and n into `count` moves n tokens (one graph for every count)."""

    def __init__(self, layer: MoELayer) -> None:
        self.layer = layer
        self.x = torch.zeros(layer.tokens, layer.hidden, dtype=layer.dtype, device=layer.device)
        self.y = torch.zeros_like(self.x)
        self.count = (torch.full((1,), layer.tokens, dtype=torch.int32, device=layer.device)
                      if layer.batched else None)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.mode = ""

    def _body(self) -> None:
        with torch.no_grad():
            self.y.copy_(self.layer.eager(self.x, self.count))

    def _capture(self) -> None:
        device = self.layer.device
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
            print(f"rank {self.layer.rank}: capture in global mode failed "
                  f"({str(exc)[:200]}); thread_local", flush=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._body()
        self.graph = graph

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        self.x[:n].copy_(x)
        if self.count is not None:
            self.count.fill_(n)                        # on the stream: no host synchronisation
        if self.graph is None:
            self._capture()
        assert self.graph is not None
        self.graph.replay()                            # no host synchronisation
        return self.y[:n]


def make_forward(layer: MoELayer, mode: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if mode == "graph":
        return GraphedLayer(layer)
    if mode == "compile":
        return torch.compile(layer.functional, fullgraph=True)
    return layer.eager


# -- the check ----------------------------------------------------------------------------------
def relative_error(y: torch.Tensor, want: torch.Tensor) -> float:
    """max |y - want| relative to max |want| (0 for a step of no tokens; inf when the
    shapes differ)."""
    if y.shape != want.shape:
        return float("inf")
    if want.numel() == 0:
        return 0.0
    scale = float(want.abs().max()) or 1.0
    return float((y.float().cpu() - want.float().cpu()).abs().max()) / scale


# -- the program ----------------------------------------------------------------------------------
def run(comm: cct.Communicator, args: argparse.Namespace, backend: str) -> bool:
    rank, nranks, device = comm.rank, comm.nranks, comm.device
    mode = mode_of(args)
    layer = MoELayer(comm, args)
    forward = make_forward(layer, mode)
    experts = [make_expert(e, args.hidden, args.ffn, args.seed) for e in range(nranks)]
    gate_weights = make_gate(args.hidden, nranks, args.seed)
    ok, worst, seen = True, 0.0, set()
    for step in range(args.steps):
        counts = [count_of(r, step, args.tokens, args.seed) if layer.batched else args.tokens
                  for r in range(nranks)]
        seen.add(counts[rank])
        xs = [tokens_of(r, step, args.tokens, args.hidden, args.seed)[:n]
              for r, n in enumerate(counts)]
        with torch.no_grad():
            y = forward(xs[rank].to(device=device, dtype=layer.dtype))
        # a hang is a DeviceError, not a hang (the first step waits for every rank's
        # start-up: torch.compile's own work, a graph's capture)
        comm.synchronize(timeout_s=300.0 if step == 0 else 60.0)
        want = reference(xs, gate_weights, experts, args.k, layer.dtype)[rank]
        error = relative_error(y, want)
        worst = max(worst, error)
        if error > RTOL[args.dtype]:
            print(f"rank {rank}: step {step}: MISMATCH: y differs from the communication-free "
                  f"layer by {error:.3g} (relative; tolerance {RTOL[args.dtype]:g}; "
                  f"{counts[rank]} tokens)", flush=True)
            ok = False
    if rank == 0:
        how = (f", {forward.mode} capture, {args.steps} replays"
               if isinstance(forward, GraphedLayer) else "")
        tokens = (f"0..{args.tokens} tokens ({len(seen)} counts on rank 0)" if layer.batched
                  else f"{args.tokens} tokens")
        print(f"{mode}{how}: {args.steps} steps on {nranks} ranks ({args.dtype}, "
              f"{tokens} x {args.hidden}, top-{args.k}, {comm.target}, {backend}): "
              f"worst error {worst:.2g} (tolerance {RTOL[args.dtype]:g}): "
              f"{'ok' if ok else 'FAILED'}", flush=True)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    backend = "gloo" if args.shared_gpu else "nccl"
    target = args.target or ("nvshmem" if args.shared_gpu else "nccl-lsa")
    dist.init_process_group(backend)
    problem = rank_problem(args, dist.get_world_size())
    if problem is not None:
        if dist.get_rank() == 0:
            print(f"moe_layer.py: error: {problem}", file=sys.stderr, flush=True)
        dist.destroy_process_group()
        return 2
    comm = cct.Communicator(target=target)          # device: LOCAL_RANK % visible GPUs
    ok = run(comm, args, backend)
    comm.synchronize()
    dist.barrier()
    flags: list[object] = [None] * comm.nranks
    dist.all_gather_object(flags, ok)
    if comm.rank == 0:
        print(f"RESULT: {'PASS' if all(flags) else 'FAIL'} ({comm.nranks} ranks, {target}, "
              f"{args.dtype}, {mode_of(args)})", flush=True)
    comm.close()
    dist.destroy_process_group()
    return 0 if all(flags) else 1


if __name__ == "__main__":
    sys.exit(main())
