"""How ccogen's cost grows with the instance (issue 25): the scale table.

Every figure is one `ccogen` command in a child process, measured by the kernel's
accounting of that child (`os.wait4`): CPU seconds (user + system) and peak resident
memory.  CPU seconds, not wall time, so that a loaded machine gives the same figures;
each child runs under a CPU limit (`--cpu-limit`, RLIMIT_CPU) and a run that reaches it
is shown as `> LIMIT` (a lower bound, left out of the fits).

Rows:

1. `lint`, `compile --target nvshmem` and `simulate --seeds 3` of `moe_dispatch` and
   `moe_combine` at their defaults (4096 tokens x 7168, top-8) on 8 ranks: the issue's
   targets are <= 5 CPU s and <= 1 GiB (lint), <= 10 CPU s (compile), <= 60 CPU s
   (simulate).
2. Fitted exponents: least squares of log(CPU s) against log(tokens) at 8 ranks over
   `--tokens` (default 128 .. 4096, x2), and against log(ranks) over `--ranks` (default
   2, 4, 8) at `--rank-tokens` tokens (default 128), for lint and compile.  Targets:
   tokens^0.2 (lint, compile), ranks^1.2 (lint).
3. `simulate --seeds 3` of both MoE protocols at 8 ranks over `--sim-tokens` (default
   128, 512, 1024) with the fitted tokens exponent; `--simulate-only` measures these rows
   and the two `simulate` rows of the defaults alone (the simulator's own table).
4. The 20k-op ring lint (`RING` below: 2500 puts per rank around a ring of 8, 20,024 op
   instances; target <= 2 CPU s; best of 3) and a cold `ccogen lint protocols/alltoall.cco`
   (a new interpreter: imports included; target <= 0.5 s; best of 5).  `--ring-only`
   measures these two rows alone.

`--ccogen CMD` measures another checkout (`--ccogen "python -m ccogen"` with that
checkout's interpreter and `PYTHONPATH`), which is how docs/performance.md's before and
after columns were taken on the same machine.  `--quick` measures only what fits in a
few minutes here (tokens up to 512, the defaults under a 60 s limit).

Run: `python benchmarks/bench_scale.py [--quick] [--cpu-limit S] [--ccogen CMD]`.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOE = ("moe_dispatch", "moe_combine")

RING = '''\
protocol ring(chunk: bytes = 4 KiB, iters: int = 2500):
    """A ring of puts: 2500 per rank, one signal each, the neighbour waits for all."""
    team lsa(8)
    queues 1
    window send: iters * chunk
    window recv: iters * chunk

    kernel ring(threads=32):
        barrier()  # the neighbour's caller has read the last launch's recv
        for i in range(iters):
            put((me + 1) % nranks, dst=recv[i*chunk : (i+1)*chunk],
                src=send[i*chunk : (i+1)*chunk], queue=0, signal="remote")
        quiet((me + 1) % nranks)
        wait_signal((me - 1) % nranks, queue=0, expected=iters)

    ensure:
        for i in range(iters):
            recv[i*chunk : (i+1)*chunk] == init(send@((me - 1) % nranks))[i*chunk : (i+1)*chunk]
'''


@dataclass
class Cost:
    cpu: float  # user + system seconds of the child
    rss: int  # peak resident bytes
    capped: bool  # stopped at the CPU limit
    code: int

    def show(self, limit: float) -> str:
        if self.capped:
            return f"> {limit:.0f} s (stopped), {self.rss / 2**20:,.0f}+ MiB"
        return f"{self.cpu:.2f} s, {self.rss / 2**20:,.0f} MiB"


def measure(argv: list[str], cpu_limit: float) -> Cost:
    """Run `argv` (stdout and stderr discarded), return its CPU time and peak RSS."""
    limit = max(1, math.ceil(cpu_limit))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))

    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null, cwd=ROOT, preexec_fn=cap)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    capped = os.WIFSIGNALED(status) and os.WTERMSIG(status) in (9, 24)  # SIGKILL, SIGXCPU
    return Cost(cpu, usage.ru_maxrss * 1024, capped, proc.returncode)


def fit(points: list[tuple[float, float]]) -> float | None:
    """The exponent b of cost = a * x^b, least squares in log-log (None: < 2 points)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def command(ccogen: list[str], verb: str, protocol: str, ranks: int, tokens: int | None,
            out: str) -> list[str]:
    argv = [*ccogen, verb, str(ROOT / "protocols" / f"{protocol}.cco"), "--ranks", str(ranks)]
    if tokens is not None:
        argv += ["--param", f"tokens={tokens}"]
    if verb == "compile":
        argv += ["--target", "nvshmem", "-o", out]
    if verb == "simulate":
        argv += ["--seeds", "3"]
    return argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu-limit", type=float, default=None,
                        help="CPU seconds per command (default 600, --quick 60)")
    parser.add_argument("--ccogen", default=f"{shlex.quote(sys.executable)} -m ccogen")
    parser.add_argument("--tokens", default=None, help="comma list (default 128..4096 x2)")
    parser.add_argument("--ranks", default="2,4,8")
    parser.add_argument("--rank-tokens", type=int, default=128)
    parser.add_argument("--skip-defaults", action="store_true")
    parser.add_argument("--ring-only", action="store_true",
                        help="only the ring lint and the cold lint (no MoE rows)")
    parser.add_argument("--simulate-only", action="store_true",
                        help="only the simulate rows (defaults, then --sim-tokens)")
    parser.add_argument("--sim-tokens", default="128,512,1024",
                        help="comma list of token counts for the simulate rows")
    args = parser.parse_args()
    limit = args.cpu_limit or (60.0 if args.quick else 600.0)
    tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else (
        [128, 256, 512] if args.quick else [128, 256, 512, 1024, 2048, 4096])
    ranks = [int(r) for r in args.ranks.split(",")]
    ccogen = shlex.split(args.ccogen)
    work = tempfile.mkdtemp(prefix="ccogen-scale-")
    print(f"CPU s (user+sys) and peak RSS per command; limit {limit:.0f} CPU s; {args.ccogen}")

    if args.simulate_only:
        simulate_rows(ccogen, [int(t) for t in args.sim_tokens.split(",")], limit, work,
                      defaults=not args.skip_defaults)
        return
    if not args.skip_defaults and not args.ring_only:
        print("\n| protocol | command (defaults, 8 ranks) | cost |\n|---|---|---|")
        for p in MOE:
            for verb in ("lint", "compile", "simulate"):
                c = measure(command(ccogen, verb, p, 8, None, work), limit)
                print(f"| {p} | {verb} | {c.show(limit)} |", flush=True)

    print("\n| protocol | command | tokens^b (8 ranks) | ranks^b "
          f"({args.rank_tokens} tokens) | points |\n|---|---|---|---|---|")
    for p in () if args.ring_only else MOE:
        for verb in ("lint", "compile"):
            by_t = [(t, measure(command(ccogen, verb, p, 8, t, work), limit)) for t in tokens]
            by_r = [(r, measure(command(ccogen, verb, p, r, args.rank_tokens, work), limit))
                    for r in ranks]
            bt = fit([(t, c.cpu) for t, c in by_t if not c.capped])
            br = fit([(r, c.cpu) for r, c in by_r if not c.capped])
            shown = ", ".join(f"T={t}: {c.show(limit)}" for t, c in by_t) + "; " + \
                ", ".join(f"R={r}: {c.show(limit)}" for r, c in by_r)
            print(f"| {p} | {verb} | {_b(bt)} | {_b(br)} | {shown} |", flush=True)

    if not args.ring_only:
        simulate_rows(ccogen, [int(t) for t in args.sim_tokens.split(",")], limit, work,
                      defaults=False)

    ring = Path(work) / "ring.cco"
    ring.write_text(RING, encoding="utf-8")
    c = min((measure([*ccogen, "lint", str(ring)], limit) for _ in range(3)),
            key=lambda c: c.cpu)
    print(f"\nring lint (20,024 op instances, 8 ranks; best of 3): {c.show(limit)}")
    cold = min((measure([*ccogen, "lint", str(ROOT / "protocols" / "alltoall.cco")], limit)
                for _ in range(5)), key=lambda c: c.cpu)
    print(f"cold lint of protocols/alltoall.cco (best of 5): {c_show(cold)}")


def simulate_rows(ccogen: list[str], tokens: list[int], limit: float, work: str, *,
                  defaults: bool) -> None:
    """`simulate --seeds 3` on 8 ranks: at the defaults (when `defaults`), then over
    `tokens` with the fitted exponent of CPU s against tokens."""
    if defaults:
        print("\n| protocol | simulate --seeds 3 (defaults, 8 ranks) |\n|---|---|")
        for p in MOE:
            c = measure(command(ccogen, "simulate", p, 8, None, work), limit)
            print(f"| {p} | {c.show(limit)} |", flush=True)
    print("\n| protocol | simulate --seeds 3, 8 ranks | tokens^b |\n|---|---|---|")
    for p in MOE:
        by_t = [(t, measure(command(ccogen, "simulate", p, 8, t, work), limit))
                for t in tokens]
        b = fit([(t, c.cpu) for t, c in by_t if not c.capped])
        shown = ", ".join(f"T={t}: {c.show(limit)}" for t, c in by_t)
        print(f"| {p} | {shown} | {_b(b)} |", flush=True)


def c_show(c: Cost) -> str:
    return f"{c.cpu:.2f} s, {c.rss / 2**20:,.0f} MiB"


def _b(b: float | None) -> str:
    return "-" if b is None else f"{b:.2f}"


if __name__ == "__main__":
    main()
