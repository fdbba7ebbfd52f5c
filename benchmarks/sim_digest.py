"""Every seeded and exhaustive simulation of the library protocols at small sizes, digested,
for a before/after comparison of a simulator change that must not change a result
(docs/performance.md, "Test-run cost: the simulator tests").

For each protocol of protocols/*.cco (the test suite's parameters) at 2 and 3 ranks (where
the protocol has them) it prints one line per seeded run (seeds 0..4) and per explored
schedule (up to 40): the seed, passed, deadlocked, the memory digest, a hash of the schedule
(the process ids in the order they stepped) and of the rendered failures; then the
instance's completeness.  Run it on both trees and compare:

    python benchmarks/sim_digest.py > after.txt
    PYTHONPATH=OLD_TREE python -S benchmarks/sim_digest.py > before.txt  # (-S: no
    diff before.txt after.txt                                 # editable-install hook)
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.helpers import library_params  # noqa: E402  (the suite's small MoE shapes)

SIZES = (2, 3)
SEEDS = 5
SCHEDULES = 40


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> int:
    import ccogen
    from ccogen.instantiate import team_sizes
    from ccogen.sim import simulate
    from ccogen.syntax import load_ir

    print(f"# ccogen from {Path(ccogen.__file__).parent}", file=sys.stderr)
    for path in sorted((ROOT / "protocols").glob("*.cco")):
        params = library_params(path)
        sizes = [n for n in team_sizes(load_ir(path), params=params) if n in SIZES]
        for n in sizes:
            for exhaustive in (False, True):
                kw = {"exhaustive": True, "max_schedules": SCHEDULES, "time_limit": math.inf} \
                    if exhaustive else {"seeds": SEEDS, "digests": True}
                report = simulate(path, [n], params=params, **kw)  # type: ignore[arg-type]
                mode = "exhaustive" if exhaustive else "seeded"
                print(f"== {path.stem} n{n} {mode} diags={_h(repr(report.diagnostics))}")
                for inst in report.instances:
                    print(f"  {inst.label} complete={inst.complete} limit={inst.limit!r} "
                          f"setup={_h(repr(inst.setup))} results={len(inst.results)}")
                    for r in inst.results:
                        print(f"    seed={r.seed} passed={r.passed} dead={r.deadlocked} "
                              f"digest={r.digest} steps={len(r.schedule)} "
                              f"schedule={_h(repr(r.schedule))} "
                              f"failures={_h(repr(r.failures))}")
                print(f"  summary={_h(report.summary())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
