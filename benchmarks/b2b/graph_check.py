"""Every library protocol, 100 back-to-back calls in ONE CUDA graph through ccogen.torch,
`ensure` checked on the first and the last call (issue #30), at the ranks torchrun starts:

    torchrun --nproc-per-node 4 benchmarks/b2b/graph_check.py --out b2b-logs

For each protocol of protocols/ whose team allows this many ranks (default parameters;
the run-time ones at the small shapes of RUNTIME_PARAMS):

1. load it (one kernel launch per call: no protocol here is `host_sync`; ranks sharing a
   GPU get `ccogen run`'s SM budget, ccogen.rt.placement.sharing_budget);
2. the inputs of call i are epoch i % 3's: for a static protocol the seeded contents
   (ccogen.rt.data.initial_bytes: any rank computes any rank's) of the windows and
   buffers `ensure` names in `init(...)`, on the ranks it names them; for a run-time
   protocol (alltoallv, the MoE protocols) contents drawn to satisfy `require`
   (ccogen.rt.drawn.draw_epoch, generic over what `require` bounds: `ccogen run`'s
   epochs 2, 3 and 4, so the checked calls move data), written as the
   checker's and the simulator's caller writes them (ccogen.sim.runtime.caller_keys):
   every buffer, and the windows `ensure` reads as `init(...)`.  Those windows are the
   only ones a caller may rewrite between two calls: the checker proves each protocol
   safe back to back with exactly these writes at each rank's launch boundary (a peer
   that still loads one, or still puts into it, from the previous launch would be an
   E031 / E025 race: `moe_combine`'s closing barrier is what lets its caller rewrite
   `topk_rank` and `expert_out`, which peers load).  Windows the protocol writes
   (landing windows: `back`, `recv`, `got`) are never refilled inside the graph; they
   get draw 2's contents once, before the warm-up, as `ccogen run` fills them;
3. one warm-up call outside the graph (launch 0, epoch 2), then 100 calls captured in one
   graph: before each call the inputs are written as a loop's caller writes them (window
   contents passed to the call, buffers copied), and after call 1 and call 100 every
   window and buffer the checks read is copied aside;
4. one replay, then this rank's `ensure` comparisons for launch 1 and launch 100
   (`Instance.checks_at`: rotating regions; a draw's own checks for a run-time protocol)
   evaluated on the copies as `ccogen run` evaluates them (ccogen.rt.data.evaluate; a
   final region of another rank comes from that rank's copy, all-gathered).

Diagnosis of a stall (`--watch S`): the warm-up call and the replay run on a side stream
and the host polls them; after S seconds each rank prints its progress words, read on
another stream while the kernels still spin: the kernel's scratch words (per kernel: one
barrier counter per logical block, the rank-wide barrier counter, then the launch
ticket: launches started x grid, plus one per CTA of a launch still starting), its
counters (bytes landed) and its nonzero signal words, then the rank exits with status 3.
`--calls N` captures N calls instead of 100, `--max-ctas N` overrides the SM budget
(`--max-ctas 32` at 8 ranks on one GPU is the budget that stalled `counted_broadcast`
before the binding picked one).

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for where in (ROOT, HERE):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

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
from ccogen.rt.drawn import DrawSpec, EpochDraw, draw_epoch  # noqa: E402
from ccogen.sim.runtime import caller_keys  # noqa: E402
from ccogen.syntax import load_ir  # noqa: E402
from ccogen.torch.spec import TORCH_DTYPES  # noqa: E402  (no torch import)

CALLS = 100
EPOCHS = 3  # call i's inputs are epoch i % 3's (the warm-up, call -1: epoch 2)
SEED = 30
# run-time values (`Instance.runtime`): their inputs are drawn to satisfy `require`, at
# these small shapes
RUNTIME_PARAMS: dict[str, dict[str, int]] = {
    "alltoallv": {"cap": 64},
    "moe_dispatch": {"tokens": 8, "hidden": 8, "k": 2},
    "moe_combine": {"tokens": 8, "hidden": 8, "k": 2},
    "moe_dispatch_ll": {"tokens": 8, "hidden": 8, "k": 2},
}
FIRST_DRAW = 2
PROTOCOLS = ROOT / "protocols"


@dataclass(frozen=True)
class Plan:
    """What the check of one protocol at one team size does, from its instance."""

    name: str
    path: Path
    instance: Instance
    inputs: tuple[tuple[int, str], ...]  # (rank, window or buffer) its caller writes
    read: tuple[str, ...]     # windows and buffers whose finals some check reads
    params: tuple[tuple[str, int], ...] = ()
    draws: tuple[EpochDraw, ...] = ()  # a run-time protocol's epochs (ccogen.rt.drawn)

    def checks(self, launch: int, rank: int) -> list[CheckSpec]:
        if self.draws:  # not rotating (checked in `plans`): every launch its draw's checks
            specs: list[CheckSpec] = list(self.draws[(launch - 1) % EPOCHS].checks)
        else:
            specs = check_specs(self.instance.checks_at(launch))
        return [c for c in specs if c.rank == rank]

    def inputs_of(self, rank: int) -> tuple[str, ...]:
        """What rank `rank`'s caller writes before each call."""
        return tuple(w for r, w in self.inputs if r == rank)

    def sizes(self) -> dict[str, int]:
        return dict(self.instance.window_sizes) | dict(self.instance.buffer_sizes)

    def contents(self, epoch: int, rank: int, name: str, kind: str) -> Any:
        """The raw bytes of `name` on `rank` in `epoch` (seeded, or the epoch's draw)."""
        if self.draws:
            return self.draws[epoch].arrays[(rank, name)]
        return initial_bytes(SEED, epoch, rank, name, self.sizes()[name], kind)

    def initial(self, epoch: int) -> dict[tuple[str, int], Any] | None:
        """make_reader's `initial`: a draw's contents by (name, rank), or None (seeded)."""
        if not self.draws:
            return None
        return {(name, rank): a for (rank, name), a in self.draws[epoch].arrays.items()}


def _runtime_plan(name: str, path: Path, instance: Instance) -> Plan | str:
    """A run-time protocol's plan: EPOCHS draws, the caller's keys (module doc, step 2)."""
    if instance.period != 1:
        return f"{name}: rotating run-time protocol (the draws' checks are one launch's)"
    spec = DrawSpec.of(instance, SEED)
    assert spec is not None
    # ccogen run's epochs 2.. (mixed-2, interior-3, mixed-4), not 0 and 1: `low` moves
    # nothing (every count 0), and calls 1 and 100 (epoch 0) are the ones checked
    draws = tuple(draw_epoch(spec, FIRST_DRAW + e) for e in range(EPOCHS))
    checks = [c for d in draws for c in d.checks]
    inputs = sorted(caller_keys(instance))  # every buffer, and the `init(...)` windows
    read = sorted({r.window for c in checks for r in c.regions() if not r.init})
    return Plan(name, path, instance, tuple(inputs), tuple(read),
                tuple(sorted(RUNTIME_PARAMS.get(name, {}).items())), draws)


def plans(nranks: int, only: set[str] | None = None) -> tuple[list[Plan], list[str]]:
    """The protocols checked at `nranks`, and a line for each left out."""
    out, skipped = [], []
    for path in sorted(PROTOCOLS.glob("*.cco")):
        name = path.stem
        if only and name not in only:
            continue
        protocol = load_ir(path)
        if nranks not in team_sizes(protocol) and protocol.team.size is not None:
            skipped.append(f"{name}: team of {team_sizes(protocol)} ranks")
            continue
        params = RUNTIME_PARAMS.get(name, {})
        instance, diags = instantiate(protocol, nranks, dict(params))
        if instance is None:
            skipped.append(f"{name}: not instantiable at {nranks} ranks "
                           f"({'; '.join(d.message for d in diags)[:200]})")
            continue
        if instance.runtime:
            plan = _runtime_plan(name, path, instance)
            if isinstance(plan, str):
                skipped.append(plan)
            else:
                out.append(plan)
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
            drawn = f"; drawn: {', '.join(d.label for d in p.draws)}" if p.draws else ""
            print(f"[{n} ranks] {p.name}: rank 0 writes {', '.join(p.inputs_of(0)) or '-'}, "
                  f"rank 1 {', '.join(p.inputs_of(1)) or '-'}; checked "
                  f"{', '.join(p.read)}; {per} comparison(s) on rank 0 (calls 1 and "
                  f"{CALLS}); period {p.instance.period}{drawn}")
        for line in skipped:
            print(f"[{n} ranks] skipped {line}")
    return 0


def progress(comm: Any, op: Any, manifest: Any, elapsed: float) -> str:
    """This rank's progress words (module doc, "Diagnosis"), read on a stream of their own
    while the graph may still spin."""
    import torch

    heap = comm._heap_tensor(op.placed)
    areas: list[tuple[str, int, int]] = []
    if manifest.scratch is not None:
        areas.append(("scratch", manifest.scratch[0], min(manifest.scratch[1], 8 * 16)))
    areas += [(f"counter {c.name}", c.offset, 8) for c in manifest.counters]
    if manifest.signals.count:
        areas.append(("signals", manifest.signals.offset, min(8 * manifest.signals.count, 8 * 64)))
    side = torch.cuda.Stream()
    host = {name: torch.empty(size, dtype=torch.uint8, pin_memory=True)
            for name, _, size in areas}
    with torch.cuda.stream(side):
        for name, off, size in areas:
            host[name].copy_(heap[off:off + size], non_blocking=True)
        read = torch.cuda.Event()
        read.record(side)
    t0 = time.monotonic()
    while not read.query():
        if time.monotonic() - t0 > 5:
            return f"rank {comm.rank}: stalled after {elapsed:.0f} s; the progress words " \
                   "could not be read within 5 s"
        time.sleep(0.01)
    words = {name: host[name].view(torch.int64).tolist() for name, _, _ in areas}
    grids = [k.grid for k in manifest.kernels]
    cells = [f"scratch {words.get('scratch', [])}"]
    cells += [f"{name} {w[0]}" for name, w in words.items() if name.startswith("counter")]
    if "signals" in words:
        cells.append(f"signals (index: value) "
                     f"{ {i: v for i, v in enumerate(words['signals']) if v} }")
    return (f"rank {comm.rank}: stalled after {elapsed:.0f} s (grid {grids}, max_ctas "
            f"{comm.max_ctas}): {'; '.join(cells)}")


def check(comm: Any, plan: Plan, calls: int = CALLS, watch_s: float = 0.0) -> dict[str, Any]:
    """The protocol's graph of `calls` calls on this rank (module docstring, steps 1-4)."""
    import numpy as np
    import torch
    import torch.distributed as dist
    from graph_capture import capture, replay

    from ccogen.torch.loader import generate

    rank, nranks, dev = comm.rank, comm.nranks, comm.device
    params = dict(plan.params)
    op = comm.load(plan.path, **params)
    kinds = {w.name: w.dtype for w in op.spec.windows} | {b.name: b.dtype
                                                          for b in op.spec.buffers}

    def typed(data: Any, name: str) -> torch.Tensor:
        raw = torch.from_numpy(np.ascontiguousarray(data).view(np.uint8).copy()).to(dev)
        if name in op.windows:
            view = op.windows[name]
            return raw.view(view.dtype).view(view.shape)
        buf = next(b for b in op.spec.buffers if b.name == name)
        return raw.view(getattr(torch, TORCH_DTYPES[buf.dtype])).view(buf.shape)

    pristine = [{name: typed(plan.contents(e, rank, name, kinds[name]), name)
                 for name in plan.inputs_of(rank)} for e in range(EPOCHS)]
    buffers = {b.name: typed(np.zeros(b.size, np.uint8), b.name) for b in op.spec.buffers}
    if plan.draws:  # every window and buffer as `ccogen run` fills them (module doc, 2)
        for w in op.spec.windows:
            op.windows[w.name].copy_(typed(plan.contents(EPOCHS - 1, rank, w.name, w.dtype),
                                           w.name))
        for b in op.spec.buffers:
            buffers[b.name].copy_(typed(plan.contents(EPOCHS - 1, rank, b.name, b.dtype),
                                        b.name))
        torch.cuda.synchronize()
        dist.barrier()

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

    last = calls - 1
    kept = {i: {name: torch.empty_like(current(name)) for name in plan.read} for i in (0, last)}

    def step(i: int) -> None:
        call(i)
        for name, copy in kept.get(i, {}).items():
            copy.copy_(current(name))

    def stalled(when: str) -> Callable[[float], None]:
        def report(elapsed: float) -> None:
            manifest = generate(plan.path, comm.target, nranks, params,
                                max_ctas=comm.max_ctas).manifest
            print(f"[{plan.name}, {when}] {progress(comm, op, manifest, elapsed)}", flush=True)
        return report

    graph = capture(lambda: call(-1), step, calls, watch_s, stalled("the warm-up call"))
    if graph is None or not replay(graph, watch_s, stalled(f"the graph of {calls} calls")):
        os._exit(3)  # the kernels still spin: no teardown can finish
    launches = len(op._before) + len(op.placed.launches)
    result: dict[str, Any] = {"protocol": plan.name, "calls": calls,
                              "launches_per_call": launches, "max_ctas": comm.max_ctas}
    for i, key in ((0, "first"), (last, "last")):
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
        epoch = i % EPOCHS
        failures = evaluate(plan.checks(launch, rank),
                            make_reader(SEED, epoch, plan.sizes(), finals, kinds,
                                        plan.initial(epoch)), i)
        result[f"{key}_ok"] = not failures
        result[f"{key}_failures"] = [f.format() for f in failures[:3]]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="b2b-logs")
    ap.add_argument("--only", default="", help="comma-separated protocol names")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ranks", default="2,4,8", help="with --dry-run: the team sizes")
    ap.add_argument("--calls", type=int, default=CALLS, help="calls captured in the graph")
    ap.add_argument("--watch", type=float, default=0.0, metavar="S",
                    help="print every rank's progress words and exit 3 when a replay has "
                         "not finished after S seconds (0: wait)")
    ap.add_argument("--max-ctas", type=int, default=0,
                    help="override the SM budget the binding picks (0: its own)")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s} or None
    if args.dry_run:
        return dry_run([int(r) for r in args.ranks.split(",") if r], only)
    if args.calls < 2:
        ap.error("--calls must be at least 2 (the first and the last call are checked)")
    import torch
    import torch.distributed as dist

    import ccogen.torch as cct

    dist.init_process_group("gloo")
    comm = cct.Communicator(target="nvshmem")
    if args.max_ctas:
        comm.max_ctas = args.max_ctas
    rank, nranks = comm.rank, comm.nranks
    found, skipped = plans(nranks, only)
    report: dict[str, Any] = {"nranks": nranks, "max_ctas": comm.max_ctas, "cases": [],
                              "skipped": skipped}
    ok = True
    t0 = time.monotonic()
    for plan in found:
        try:
            r = check(comm, plan, args.calls, args.watch)
        except Exception as exc:  # one protocol's failure must not hide the others'
            r = {"protocol": plan.name, "first_ok": False, "last_ok": False,
                 "error": f"{type(exc).__name__}: {exc}"[:500]}
        flags: list[Any] = [None] * nranks
        dist.all_gather_object(flags, bool(r["first_ok"] and r["last_ok"]))
        r["all_ranks_ok"] = all(flags)
        ok &= r["all_ranks_ok"]
        report["cases"].append(r)
        if rank == 0:
            print(f"[{nranks} ranks] graph {plan.name}: {args.calls} calls in one graph, "
                  f"first {'ok' if r['first_ok'] else 'FAILED'}, last "
                  f"{'ok' if r['last_ok'] else 'FAILED'}, every rank "
                  f"{'ok' if r['all_ranks_ok'] else 'FAILED'}, "
                  f"{r.get('launches_per_call', '?')} launch(es)/call, max_ctas "
                  f"{r.get('max_ctas')} {r.get('error', '')} {r.get('first_failures') or ''}"
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
