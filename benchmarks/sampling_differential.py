"""Differential run of loop sampling: sampled and unrolled instances, same findings?

Lints every library protocol (at small shapes), every example of the language reference,
every lint fixture, and `--count` random protocols (`tests.differential.loops`: long
loops with mutations; and `tests.differential.gen`: the checker-simulator generator)
twice, with loops checked on three iterations and with every loop unrolled (the oracle),
and prints how many were compared, how many findings they hold, how many loops were
sampled and unrolled (and why), and every disagreement (there must be none).

Run: `nice python benchmarks/sampling_differential.py [--count N] [--seed S]`
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

from ccogen.driver import CheckOptions, check_text  # noqa: E402
from tests.differential.gen import generate  # noqa: E402
from tests.differential.loops import findings, loop_protocol  # noqa: E402
from tests.test_spec_examples import PROTOCOLS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    cases: list[tuple[str, str, str, tuple[int, ...], dict[str, int]]] = []
    for path in sorted((ROOT / "protocols").glob("*.cco")):
        text = path.read_text(encoding="utf-8")
        params = {k: v for k, v in {"tokens": 8, "hidden": 16}.items() if f"{k}: int" in text}
        cases.append(("library", text, str(path), (2, 4), params))
    for i, text in enumerate(PROTOCOLS):
        cases.append(("reference", text, f"language.md#{i}", (2, 3), {}))
    for path in sorted((ROOT / "tests" / "lint").glob("*.cco")):
        cases.append(("fixture", path.read_text(encoding="utf-8"), str(path), (2, 3), {}))
    for i in range(args.count):
        if i % 4 == 3:
            p = generate(rng)
            cases.append(("random/gen", p.text, f"gen{i}.cco", (p.ranks,), {}))
        else:
            text, _ = loop_protocol(rng)
            cases.append(("random/loops", text, f"loops{i}.cco", (2, 3), {}))
    start = time.process_time()
    per: collections.Counter[str] = collections.Counter()
    with_findings = 0
    loops: collections.Counter[str] = collections.Counter()
    bad: list[str] = []
    for kind, text, name, ranks, params in cases:
        result = check_text(text, name, CheckOptions(ranks=ranks, params=params,
                                                     sample_loops=True))
        a = frozenset((d.code, d.span.line if d.span else 0) for d in result.diagnostics)
        b = findings(text, name, sample=False, ranks=ranks, params=params)
        per[kind] += 1
        with_findings += bool(b)
        for inst in result.instances:
            for n in inst.loops:
                loops["sampled" if n.sampled else "unrolled: " + n.reason.split(" (")[0]] += 1
        if a != b:
            bad.append(f"{name}: sampled {sorted(a)} != unrolled {sorted(b)}")
    total = sum(per.values())
    print(f"{total} protocols compared ({', '.join(f'{k} {v}' for k, v in per.items())}); "
          f"{with_findings} with findings; {time.process_time() - start:.0f} CPU s")
    print("loops of 4+ iterations, per instance:")
    for what, n in loops.most_common():
        print(f"  {n:6d}  {what}")
    print(f"disagreements: {len(bad)}")
    for line in bad:
        print("  " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
