"""Every finding of the lint fixtures and library protocols, rendered, for a before/after
comparison of a change that must not change a finding (docs/performance.md).

For each file (tests/lint/*.cco, protocols/*.cco at the test suite's parameters, the
20k-op ring of `bench_scale.RING`) it prints the `full` and `json` renderings that
`ccogen lint` prints, after a `== path` line.  Run it on both trees and compare:

    python benchmarks/findings_digest.py > after.txt
    PYTHONPATH=OLD_TREE python -S benchmarks/findings_digest.py > before.txt  # (-S: no
    diff before.txt after.txt                                    # editable-install hook)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.helpers import library_params  # noqa: E402  (the suite's small MoE shapes)


def main() -> int:
    import ccogen
    from ccogen import cli

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import RING

    print(f"# ccogen from {Path(ccogen.__file__).parent}", file=sys.stderr)
    os.chdir(ROOT)  # the findings name the files by their paths from here: the same in both
    ring = Path(tempfile.gettempdir()) / "ccogen-findings-digest" / "ring.cco"
    ring.parent.mkdir(exist_ok=True)
    ring.write_text(RING, encoding="utf-8")
    files = [*sorted(Path("tests", "lint").glob("*.cco")), *sorted(Path("protocols").glob("*.cco")),
             ring]
    for path in files:
        params = [f"{k}={v}" for k, v in library_params(path).items()]
        args = [a for p in params for a in ("--param", p)]
        for fmt in ("full", "json"):
            print(f"== {path} --format {fmt}", flush=True)
            code = cli.main(["lint", "--format", fmt, "--color", "never", *args, str(path)])
            print(f"-- exit {code}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
