"""Every library protocol, 100 back-to-back calls in ONE CUDA graph through ccogen.torch,
`ensure` checked on the first and the last call (issue #30), at the ranks torchrun starts:

    torchrun --nproc-per-node 4 benchmarks/b2b/graph_check.py --out b2b-logs

For each protocol of protocols/ (default parameters; the run-time ones, alltoallv and the
MoE pair, are left out: their inputs must satisfy `require`, which needs a drawn epoch,
ccogen.rt.drawn) whose team allows this many ranks:

1. load it (one kernel launch per call: no protocol here is `host_sync` any more, the
   report says the launches each call issues);
2. the inputs (the windows and buffers `ensure` names in `init(...)`, on the ranks it
   names them) of call i are the seeded contents of epoch i % 3
   (ccogen.rt.data.initial_bytes: any rank computes any rank's), so an output one or two
   calls stale does not pass;
3. one warm-up call outside the graph, then 100 calls captured in one graph: before each
   call the inputs are written as a loop's caller writes them (window contents passed to
   the call, buffers copied), and after call 1 and call 100 every window and buffer the
   checks read is copied aside;
4. one replay, then this rank's `ensure` comparisons for launch 1 and launch 100
   (`Instance.checks_at`: rotating regions) evaluated on the copies as `ccogen run`
   evaluates them (ccogen.rt.data.evaluate; a final region of another rank comes from
   that rank's copy, all-gathered).

`--dry-run` (no GPU, no torch.distributed): instantiate every protocol at `--ranks` and
print what would run (inputs, outputs, checks per call).  Prints one line per protocol;
rank 0 writes OUT/graph-<nranks>.json; exit 0 when every check held on every rank.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ccogen.instantiate import instantiate, team_sizes  # noqa: E402
from ccogen.ir.instance import Instance  # noqa: E402
from ccogen.rt.data import (  # noqa: E402
    CheckSpec,
    check_specs,
    evaluate,
    initial_bytes,
    make_reader,
    remote_finals,
)
from ccogen.syntax import load_ir  # noqa: E402
from ccogen.torch.spec import TORCH_DTYPES  # noqa: E402  (no torch import)

CALLS = 100
EPOCHS = 3  # call i's inputs are epoch i % 3's
SEED = 30
# need a drawn epoch (inputs that satisfy `require`)
RUNTIME = frozenset({"alltoallv", "moe_dispatch", "moe_combine", "moe_dispatch_ll"})
PROTOCOLS = ROOT / "protocols"


@dataclass(frozen=True)
class Plan:
    """What the check of one protocol at one team size does, from its instance."""

    name: str
    path: Path
    instance: Instance
    inputs: tuple[tuple[int, str], ...]  # (rank, window or buffer) `ensure` names in init()
    read: tuple[str, ...]     # windows and buffers whose finals some check reads

    def checks(self, launch: int, rank: int) -> list[CheckSpec]:
        return [c for c in check_specs(self.instance.checks_at(launch)) if c.rank == rank]

    def inputs_of(self, rank: int) -> tuple[str, ...]:
        """What rank `rank`'s caller writes before each call (its `init(...)` regions)."""
        return tuple(w for r, w in self.inputs if r == rank)

    def sizes(self) -> dict[str, int]:
        return dict(self.instance.window_sizes) | dict(self.instance.buffer_sizes)


def plans(nranks: int, only: set[str] | None = None) -> tuple[list[Plan], list[str]]:
    """The protocols checked at `nranks`, and a line for each left out."""
    out, skipped = [], []
    for path in sorted(PROTOCOLS.glob("*.cco")):
        name = path.stem
        if only and name not in only:
            continue
        if name in RUNTIME:
            skipped.append(f"{name}: run-time values (inputs must satisfy `require`)")
            continue
        protocol = load_ir(path)
        if nranks not in team_sizes(protocol) and protocol.team.size is not None:
            skipped.append(f"{name}: team of {team_sizes(protocol)} ranks")
            continue
        instance, diags = instantiate(protocol, nranks)
        if instance is None:
            skipped.append(f"{name}: not instantiable at {nranks} ranks "
                           f"({'; '.join(d.message for d in diags)[:200]})")
            continue
        checks = [c for e in (1, CALLS) for c in check_specs(instance.checks_at(e))]
        inputs = sorted({(r.rank, r.window) for c in checks for r in c.regions() if r.init})
        read = sorted({r.window for c in checks for r in c.regions() if not r.init})
        out.append(Plan(name, path, instance, tuple(inputs), tuple(read)))
    return out, skipped


def dry_run(ranks: list[int], only: set[str] | None) -> int:
    for n in ranks:
        found, skipped = plans(n, only)
        for p in found:
            per = len(p.checks(1, 0)) + len(p.checks(CALLS, 0))
            print(f"[{n} ranks] {p.name}: rank 0 writes {', '.join(p.inputs_of(0)) or '-'}, "
                  f"rank 1 {', '.join(p.inputs_of(1)) or '-'}; checked "
                  f"{', '.join(p.read)}; {per} comparison(s) on rank 0 (calls 1 and "
                  f"{CALLS}); period {p.instance.period}")
        for line in skipped:
            print(f"[{n} ranks] skipped {line}")
    return 0


def check(comm: Any, plan: Plan) -> dict[str, Any]:
    """The protocol's 100-call graph on this rank (module docstring, steps 1-4)."""
    import numpy as np
    import torch
    import torch.distributed as dist

    rank, nranks, dev = comm.rank, comm.nranks, comm.device
    op = comm.load(plan.path)
    kinds = {w.name: w.dtype for w in op.spec.windows} | {b.name: b.dtype
                                                          for b in op.spec.buffers}
    sizes = plan.sizes()

    def typed(data: Any, name: str) -> torch.Tensor:
        raw = torch.from_numpy(np.ascontiguousarray(data).view(np.uint8).copy()).to(dev)
        if name in op.windows:
            view = op.windows[name]
            return raw.view(view.dtype).view(view.shape)
        buf = next(b for b in op.spec.buffers if b.name == name)
        return raw.view(getattr(torch, TORCH_DTYPES[buf.dtype])).view(buf.shape)

    pristine = [{name: typed(initial_bytes(SEED, e, rank, name, sizes[name], kinds[name]), name)
                 for name in plan.inputs_of(rank)} for e in range(EPOCHS)]
    buffers = {b.name: typed(np.zeros(b.size, np.uint8), b.name) for b in op.spec.buffers}

    def call(i: int) -> None:
        args: dict[str, torch.Tensor] = {}
        for name in plan.inputs_of(rank):
            if name in buffers:
                buffers[name].copy_(pristine[i % EPOCHS][name])
            else:
                args[name] = pristine[i % EPOCHS][name]  # copied into the window by the op
        op(**args, **buffers)

    def current(name: str) -> torch.Tensor:
        return buffers[name] if name in buffers else op.windows[name]

    kept = {i: {name: torch.empty_like(current(name)) for name in plan.read} for i in (0, 99)}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (lazy loads) outside the capture: launch 0
        call(EPOCHS - 1)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(CALLS):
            call(i)
            if i in kept:
                for name, copy in kept[i].items():
                    copy.copy_(current(name))
    dist.barrier()
    graph.replay()
    torch.cuda.synchronize()
    launches = len(op._before) + len(op.placed.launches)
    result: dict[str, Any] = {"protocol": plan.name, "calls": CALLS,
                              "launches_per_call": launches}
    for i, key in ((0, "first"), (CALLS - 1, "last")):
        launch = i + 1  # the warm-up was launch 0
        mine = {(name, rank): kept[i][name].reshape(-1).view(torch.uint8).cpu().numpy()
                for name in plan.read}
        wanted = remote_finals(c for r in range(nranks) for c in plan.checks(launch, r))
        shared = {k: v.tobytes() for k, v in mine.items() if k in wanted}
        gathered: list[Any] = [None] * nranks
        dist.all_gather_object(gathered, shared)
        finals = dict(mine)
        for other in gathered:
            for k, v in other.items():
                finals.setdefault(k, np.frombuffer(v, dtype=np.uint8))
        failures = evaluate(plan.checks(launch, rank),
                            make_reader(SEED, i % EPOCHS, sizes, finals, kinds), i)
        result[f"{key}_ok"] = not failures
        result[f"{key}_failures"] = [f.format() for f in failures[:3]]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="b2b-logs")
    ap.add_argument("--only", default="", help="comma-separated protocol names")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ranks", default="2,4,8", help="with --dry-run: the team sizes")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s} or None
    if args.dry_run:
        return dry_run([int(r) for r in args.ranks.split(",") if r], only)
    import torch
    import torch.distributed as dist

    import ccogen.torch as cct

    dist.init_process_group("gloo")
    comm = cct.Communicator(target="nvshmem")
    rank, nranks = comm.rank, comm.nranks
    found, skipped = plans(nranks, only)
    report: dict[str, Any] = {"nranks": nranks, "cases": [], "skipped": skipped}
    ok = True
    t0 = time.monotonic()
    for plan in found:
        try:
            r = check(comm, plan)
        except Exception as exc:  # one protocol's failure must not hide the others'
            r = {"protocol": plan.name, "first_ok": False, "last_ok": False,
                 "error": f"{type(exc).__name__}: {exc}"[:500]}
        flags: list[Any] = [None] * nranks
        dist.all_gather_object(flags, bool(r["first_ok"] and r["last_ok"]))
        r["all_ranks_ok"] = all(flags)
        ok &= r["all_ranks_ok"]
        report["cases"].append(r)
        if rank == 0:
            print(f"[{nranks} ranks] graph {plan.name}: {CALLS} calls in one graph, first "
                  f"{'ok' if r['first_ok'] else 'FAILED'}, last "
                  f"{'ok' if r['last_ok'] else 'FAILED'}, every rank "
                  f"{'ok' if r['all_ranks_ok'] else 'FAILED'}, "
                  f"{r.get('launches_per_call', '?')} launch(es)/call "
                  f"{r.get('error', '')} {r.get('first_failures') or ''}"
                  f"{r.get('last_failures') or ''} ({time.monotonic() - t0:.0f} s)", flush=True)
    if rank == 0:
        for line in skipped:
            print(f"[{nranks} ranks] skipped {line}", flush=True)
        report["all_ok"] = ok
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"graph-{nranks}.json").write_text(json.dumps(report, indent=2) + "\n")
    torch.cuda.synchronize()
    comm.close()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(1 << 30))
    sys.exit(main())
