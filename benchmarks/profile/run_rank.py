"""Run ONE rank of a manifest directory (generated or a reference's derived manifest), so
that a profiler can wrap that rank alone (benchmarks/profile/README.md).

    CCOGEN_RUN_ID=job RANK=r WORLD_SIZE=n LOCAL_RANK=r \
        python3 benchmarks/profile/run_rank.py DIR PROTOCOL.cco [--param K=V ...] [--iters N]

DIR is a directory `ccogen bench --build-only --work W` wrote (W/<target>/<protocol>-<param>/
<value>/{generated,reference}) or any `ccogen compile` output; PROTOCOL.cco and the
--param values give the instance whose `ensure` every epoch checks (the rank's own view).
Epochs are `ccogen run`'s: fill, host barrier, the kernels, host barrier, check.  Prints
the rank's report; exits 1 if a check failed or the rank stopped.
"""

from __future__ import annotations

import argparse
import sys

from ccogen.instantiate import instantiate, parse_params
from ccogen.manifest import load_manifest
from ccogen.rt.launch import run
from ccogen.syntax import load_ir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("protocol")
    parser.add_argument("--param", action="append", default=[], metavar="K=V")
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args(argv)
    manifest = load_manifest(args.directory)
    protocol = load_ir(args.protocol)
    instance, diags = instantiate(protocol, manifest.nranks, parse_params(args.param, protocol))
    if instance is None:
        print("\n".join(str(d) for d in diags), file=sys.stderr)
        return 2
    report = run(args.directory, instance, iters=args.iters)
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
