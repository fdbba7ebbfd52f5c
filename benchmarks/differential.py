"""Differential run: random protocols, judged by `ccogen lint` and by `ccogen simulate`.

Draws `--count` protocols from `tests.differential.gen` (seeded, so a run is
reproducible), lints and simulates each (`tests.differential.judge`: seeded schedules
plus every schedule up to partial-order equivalence within `--exhaustive` seconds), and
prints the figures docs/checker.md quotes: protocols tried, how many the judges agree
on with the same codes, how many differ in a way the table of explained differences
accounts for (and by which row), and how many disagree without an explanation.  Every
unexplained disagreement is written to `--out` as a `.cco` file with the two verdicts in
a comment: each one becomes a fixture once understood.

Run: `nice python benchmarks/differential.py [--count N] [--seed S] [--out DIR]`
(about 7 protocols a second on one core; 3000 take ~8 minutes).
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.differential.gen import SHAPES, generate  # noqa: E402
from tests.differential.judge import judge  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--exhaustive", type=float, default=1.0,
                    help="seconds of exhaustive exploration per protocol (0: seeds only)")
    ap.add_argument("--out", type=Path, default=Path("differential-disagreements"))
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), default=None,
                    help="draw only this shape (repeatable; `header`: run-time loads)")
    args = ap.parse_args(argv)
    shapes = frozenset(args.shape) if args.shape else None
    rng = random.Random(args.seed)
    start = time.monotonic()
    same = explained = verdicts = 0
    erroneous = loads = load_broken = load_stale = 0
    schedules = 0
    rows: collections.Counter[str] = collections.Counter()
    drawn: collections.Counter[str] = collections.Counter()
    load_muts: collections.Counter[str] = collections.Counter()
    codes: collections.Counter[str] = collections.Counter()
    bad = []
    for i in range(args.count):
        p = generate(rng, shapes=shapes)
        v = judge(p, exhaustive=args.exhaustive)
        drawn[p.shape] += 1
        if "loads" in p.features:
            loads += 1
            load_muts[p.mutation] += 1
            load_broken += bool(v.sim)
            load_stale += v.stale
        schedules += v.schedules
        erroneous += bool(v.lint or v.sim)
        codes.update(v.lint)
        if v.lint == v.sim:
            same += 1
        elif v.explained:
            explained += 1
            verdicts += not v.same_verdict
            rows[f"{','.join(sorted(v.lint - v.sim)) or '-'} where the simulator reports "
                 f"{','.join(sorted(v.sim - v.lint)) or 'nothing more'}"] += 1
        else:
            bad.append((i, p, v))
        if (i + 1) % 250 == 0:
            print(f"  {i + 1} tried, {len(bad)} unexplained so far "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
    elapsed = time.monotonic() - start
    print(f"differential run: {args.count} protocols (seed {args.seed}), {schedules} simulated "
          f"schedules, {elapsed:.0f} s")
    print(f"  {erroneous} have an error by at least one judge, {args.count - erroneous} none; "
          f"{loads} read run-time values with `load`")
    print(f"  same codes: {same}; explained differences: {explained}; "
          f"unexplained disagreements: {len(bad)}")
    print(f"  of the explained differences, {verdicts} where one judge finds no error "
          f"(a misuse whose run does no harm, or one no schedule reaches)")
    for row, n in sorted(rows.items()):
        print(f"    explained: checker {row}: {n}")
    print("  shapes: " + ", ".join(f"{s} {n}" for s, n in sorted(drawn.items())))
    if loads:
        print("  mutations of those with loads: " +
              ", ".join(f"{m} {n}" for m, n in sorted(load_muts.items())))
        print(f"  with loads, an error in the simulator: {load_broken}, of them a stale load "
              f"(another launch's value read): {load_stale}")
    print("  checker codes: " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items())))
    if bad:
        args.out.mkdir(parents=True, exist_ok=True)
        for i, p, v in bad:
            path = args.out / f"{i:05d}-{p.shape}-{p.mutation}.cco"
            path.write_text(f"# lint: --ranks {p.ranks}\n# checker: {sorted(v.lint)}; "
                            f"simulator: {sorted(v.sim)}\n" + p.text, encoding="utf-8")
            print(f"  DISAGREE {path}: checker {sorted(v.lint)}, simulator {sorted(v.sim)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
