"""The long-run fuzzer: `python scripts/fuzz.py --inputs 100000 [--shard I/K] [--out DIR]`.

Runs the inputs of `tests/fuzzlib.py` (mutated bytes, tokens and lines of the library,
hostile parameters and team sizes, command-line misuse, and one input in `--ir-every`
a random IR protocol from the hypothesis strategies) and prints, every `--report`
seconds and at the end: inputs tried (per kind), tracebacks, timeouts, broken
properties, inputs per second and peak memory (RSS).

Reproducible and resumable: input i of seed S is always the same, a shard I/K runs the
inputs i with i % K == I, and `--start N` skips the first N.  Each failure is written
to `--out` (default `fuzz-out/`) as `<kind>-<index>.txt` with the input, the command
line and the traceback; `summary.json` holds the figures.  `--max-minutes` stops the
run early (the summary says how far it got, so a later run can `--start` there).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzzlib import STAGES, Failure, case, ir_cases, run_case  # noqa: E402


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inputs", type=int, default=100_000, help="inputs in all shards")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", default="0/1", metavar="I/K")
    p.add_argument("--start", type=int, default=0, help="skip the first N inputs")
    p.add_argument("--ir-every", type=int, default=50, metavar="N",
                   help="one IR protocol from the hypothesis strategies per N inputs")
    p.add_argument("--max-minutes", type=float, default=60.0)
    p.add_argument("--memory-gib", type=float, default=4.0,
                   help="address-space cap: a runaway allocation fails as a traceback")
    p.add_argument("--out", default="fuzz-out")
    p.add_argument("--report", type=float, default=60.0, metavar="S")
    args = p.parse_args(argv)
    shard, shards = (int(x) for x in args.shard.split("/"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cap = int(args.memory_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    counts: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    start = time.monotonic()
    last_report = start
    next_index = args.start

    def record(f: Failure) -> None:
        failures[f.what] += 1
        body = f"{f.what} in {f.kind} input {f.index} (seed {args.seed})\nargv: {f.argv}\n\n"
        body += f"--- input ---\n{f.text}\n--- detail ---\n{f.detail}\n"
        (out / f"{f.kind}-{f.index}.txt").write_text(body, encoding="utf-8")

    def summary(final: bool) -> dict[str, object]:
        elapsed = time.monotonic() - start
        total = sum(counts.values())
        figures = {
            "inputs": total, "per_kind": dict(counts), "stages": dict(STAGES),
            "tracebacks": failures["traceback"],
            "timeouts": failures["timeout"], "properties": failures["property"],
            "seconds": round(elapsed, 1), "inputs_per_second": round(total / max(elapsed, 1e-9), 1),
            "peak_rss_mib": round(_peak_mib(), 1), "seed": args.seed, "shard": args.shard,
            "next_start": next_index, "final": final,
        }
        print(json.dumps(figures), flush=True)
        return figures

    deadline = start + args.max_minutes * 60
    ir_batch = 50
    ir_seed = args.seed * 7919 + shard
    for i in range(args.start, args.inputs):
        if time.monotonic() > deadline:
            break
        next_index = i + 1
        if i % shards != shard:
            continue
        if args.ir_every and (i // shards) % (args.ir_every * ir_batch) == 0:
            counts["ir"] += ir_cases(ir_batch, record, seed=ir_seed)
            ir_seed += 1
        c = case(args.seed, i)
        counts[c.kind] += 1
        failure = run_case(c)
        if failure is not None:
            record(failure)
        if time.monotonic() - last_report > args.report:
            summary(False)
            last_report = time.monotonic()
    figures = summary(True)
    (out / f"summary-{shard}-of-{shards}.json").write_text(json.dumps(figures, indent=2) + "\n",
                                                          encoding="utf-8")
    return 1 if sum(failures.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
