"""Back-to-back launches in a CUDA graph through ccogen.torch (issue #30): the rotating
protocols against the old ones (host_sync plus the binding's launch-barrier kernel, or
barriers), and against the library's `alltoall` (a credit per pair) and the leading-barrier
form it replaced (benchmarks/b2b/alltoall_barrier.cco), at the ranks torchrun
starts (NVSHMEM ranks sharing one GPU under MPS).  Every library protocol's 100-call
graph check is benchmarks/b2b/graph_check.py.

    torchrun --nproc-per-node 4 benchmarks/b2b/b2b_graph.py --out b2b-logs

Two parts, each printed as it goes and written to OUT/b2b-<nranks>.json by rank 0:

* `--check`: for each rotating protocol, 100 calls captured in ONE CUDA graph, each call
  with its own input and output tensors (deterministic contents every rank can compute,
  so no communication is needed to check), one replay, then call 1 and call 100 (and
  every call between) compared with what `ensure` says, bit for bit;
* `--time`: per call of a 100-call CUDA graph (the same tensors every call), the median
  of `--samples` replays timed with CUDA events, for every size, old (and barrier, credit) and
  new, each with its ratio to new; with the launches each call issues (the binding's
  launch-barrier kernel + the protocol's kernels).

Sizes: alltoall 8 B, 4 KiB and 64 KiB per peer; allreduce_oneshot 8 B to 64 KiB (f32,
integer-valued inputs, so every order of summation gives the same bits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import ccogen.torch as cct

sys.path.insert(0, str(Path(__file__).resolve().parent))
from b2b_cases import A2A_SIZES, AR_SIZES, CALLS, PROTOCOLS
from graph_capture import capture, replay


def a2a_send(rank: int, nranks: int, block: int, call: int, dev: torch.device) -> torch.Tensor:
    """Rank `rank`'s `send` of call `call`: block p filled with a byte of (rank, p, call)."""
    vals = torch.tensor([(rank * 31 + p * 7 + call) % 251 + 1 for p in range(nranks)],
                        dtype=torch.uint8, device=dev)
    return vals.repeat_interleave(block)


def a2a_expected(rank: int, nranks: int, block: int, call: int, dev: torch.device
                 ) -> torch.Tensor:
    """What `ensure` says `recv` holds on `rank` after call `call` (own block: not checked)."""
    vals = torch.tensor([(p * 31 + rank * 7 + call) % 251 + 1 for p in range(nranks)],
                        dtype=torch.uint8, device=dev)
    return vals.repeat_interleave(block)


def ar_input(rank: int, n: int, call: int, dev: torch.device) -> torch.Tensor:
    return ((torch.arange(n, device=dev) * (rank + 1) + call) % 17).to(torch.float32)


def ar_expected(nranks: int, n: int, call: int, dev: torch.device) -> torch.Tensor:
    return sum(ar_input(r, n, call, dev) for r in range(nranks))  # type: ignore[return-value]


class Case:
    """One (protocol, size) as a user calls it."""

    def __init__(self, comm: Any, family: str, variant: str, size: int) -> None:
        self.family, self.variant, self.size = family, variant, size
        self.rotating = variant == "new"
        self.comm, self.dev, self.nranks, self.rank = comm, comm.device, comm.nranks, comm.rank
        name = PROTOCOLS[family][variant]
        if family == "alltoall":
            self.op = comm.load(name, block=size)
            self.len = self.nranks * size
        else:
            self.n = max(1, size // 4)
            self.op = comm.load(name, n=self.n, T="f32")
        self.name = Path(name).stem
        # the binding's launch-barrier kernel (host_sync protocols) + the protocol's kernels
        self.launches = len(self.op._before) + len(self.op.placed.launches)

    def inputs(self, call: int) -> torch.Tensor:
        if self.family == "alltoall":
            return a2a_send(self.rank, self.nranks, self.size, call, self.dev)
        return ar_input(self.rank, self.n, call, self.dev)

    def output(self) -> torch.Tensor:
        if self.family == "alltoall":
            return torch.zeros(self.len, dtype=torch.uint8, device=self.dev)
        return torch.zeros(self.n, dtype=torch.float32, device=self.dev)

    def call(self, inp: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """One call; returns the tensor that holds the result afterwards."""
        if self.family == "alltoall":
            if self.rotating:
                self.op(send=inp, recv=out)
                return out
            return self.op(send=inp)  # the `recv` window (a view of the heap)
        self.op(x=inp, out=out)  # old: `x` a window (copied in), new: `x` a buffer
        return out

    def expected(self, call: int) -> torch.Tensor:
        if self.family == "alltoall":
            return a2a_expected(self.rank, self.nranks, self.size, call, self.dev)
        return ar_expected(self.nranks, self.n, call, self.dev)

    def mask(self) -> slice | torch.Tensor:
        if self.family != "alltoall":
            return slice(None)
        keep = torch.ones(self.len, dtype=torch.bool, device=self.dev)
        keep[self.rank * self.size:(self.rank + 1) * self.size] = False  # own block
        return keep


def check(case: Case) -> dict[str, Any]:
    """100 calls in one graph, each its own input and output; every call checked."""
    ins = [case.inputs(i) for i in range(CALLS)]
    outs = [case.output() for _ in range(CALLS)]
    keep = [case.output() for _ in range(CALLS)]

    def step(i: int) -> None:
        # (the window of the old alltoall is overwritten next call: kept aside)
        keep[i].copy_(case.call(ins[i], outs[i]))

    graph = capture(lambda: case.call(ins[0], outs[0]), step, CALLS)
    assert graph is not None  # (no watch: the warm-up is waited for)
    replay(graph)
    mask = case.mask()
    bad = [i for i in range(CALLS) if not torch.equal(keep[i][mask], case.expected(i)[mask])]
    return {"protocol": case.name, "size": case.size, "calls": CALLS,
            "first_ok": 0 not in bad, "last_ok": CALLS - 1 not in bad, "bad_calls": bad[:10],
            "launches_per_call": case.launches}


def timing(case: Case, samples: int) -> dict[str, Any]:
    inp, out = case.inputs(0), case.output()
    g = capture(lambda: case.call(inp, out), lambda _: case.call(inp, out), CALLS)
    assert g is not None  # (no watch: the warm-up is waited for)
    per_call = []
    for _ in range(samples):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1000.0 / CALLS)  # µs
    return {"protocol": case.name, "size": case.size, "us_per_call": statistics.median(per_call),
            "launches_per_call": case.launches}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="b2b-logs")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--samples", type=int, default=20)
    args = ap.parse_args()
    if not (args.check or args.time):
        args.check = args.time = True
    dist.init_process_group("gloo")
    comm = cct.Communicator(target="nvshmem")
    rank, nranks = comm.rank, comm.nranks
    report: dict[str, Any] = {"nranks": nranks, "check": [], "time": []}
    ok = True
    t0 = time.monotonic()
    if args.check:
        for family, size in (("alltoall", 4096), ("allreduce", 4096)):
            r = check(Case(comm, family, "new", size))
            ok &= r["first_ok"] and r["last_ok"] and not r["bad_calls"]
            report["check"].append(r)
            if rank == 0:
                print(f"[{nranks} ranks] check {r['protocol']} {size} B: 100 calls in one "
                      f"graph, first {'ok' if r['first_ok'] else 'FAILED'}, last "
                      f"{'ok' if r['last_ok'] else 'FAILED'}, bad {r['bad_calls']}, "
                      f"{r['launches_per_call']} launch(es)/call ({time.monotonic() - t0:.0f} s)",
                      flush=True)
    if args.time:
        for family, sizes in (("alltoall", A2A_SIZES), ("allreduce", AR_SIZES)):
            for size in sizes:
                row = {v: timing(Case(comm, family, v, size), args.samples)
                       for v in PROTOCOLS[family]}
                report["time"] += list(row.values())
                if rank == 0:
                    new = row["new"]
                    cells = "  ".join(
                        f"{v} {r['protocol']}: {r['us_per_call']:7.2f} us "
                        f"({r['launches_per_call']} launch(es)), ratio "
                        f"{r['us_per_call'] / new['us_per_call']:.2f}x"
                        for v, r in row.items() if v != "new")
                    print(f"[{nranks} ranks] {family:9s} {size:6d} B  new {new['protocol']}: "
                          f"{new['us_per_call']:7.2f} us ({new['launches_per_call']} launch)  "
                          f"{cells} ({time.monotonic() - t0:.0f} s)", flush=True)
    flags = [None] * nranks
    dist.all_gather_object(flags, ok)
    if rank == 0:
        report["all_ranks_ok"] = all(flags)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"b2b-{nranks}.json").write_text(json.dumps(report, indent=2) + "\n")
    torch.cuda.synchronize()
    comm.close()
    dist.destroy_process_group()
    return 0 if all(flags) else 1


if __name__ == "__main__":
    os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(1 << 30))
    sys.exit(main())
