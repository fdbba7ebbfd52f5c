"""kernels.cu size at 2 and 8 ranks, for every library protocol x SM target (issue 26 item 4).

Prints one row per (protocol, target) the target generates at both sizes: lines and bytes
at 2 and 8 ranks and their ratio (the goal: at most 1.3x), then, with `--nvcc`, the CPU
seconds nvcc takes to build `moe_dispatch` at 8 ranks for nvshmem (the goal: <= 30 s).

    .venv/bin/python benchmarks/bench_teamsize.py [--nvcc] [--targets nccl-lsa,nvshmem]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("nccl-lsa", "nvshmem", "nccl-cft")
GOAL = 1.3


def kernels(stem: str, target: str, nranks: int) -> str | None:
    """kernels.cu of protocols/<stem>.cco at `nranks` (None: the target refuses it)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers import library_params

    path = ROOT / "protocols" / f"{stem}.cco"
    try:
        compiled = compile_protocol(load_ir(path), target, source=f"protocols/{stem}.cco",
                                    ranks=nranks, params=library_params(path) or None)
    except DiagnosticError:
        return None
    return compiled.files.get("kernels.cu")


def nvcc_cpu(stem: str, target: str, nranks: int) -> float:
    """CPU seconds (user + system, children) of `ccogen build` of one instance: the
    generation and the real compiler (nvcc, ptxas)."""
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "ccogen", "build", "--target", target,
                        "--ranks", str(nranks), "-o", str(Path(tmp) / "out"),
                        str(ROOT / "protocols" / f"{stem}.cco")], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--nvcc", action="store_true", help="time nvcc on moe_dispatch at 8")
    parser.add_argument("--small", type=int, default=2)
    parser.add_argument("--large", type=int, default=8)
    args = parser.parse_args()
    print(f"{'protocol':28} {'target':9} {'lines@2':>8} {'lines@8':>8} {'x':>5} "
          f"{'bytes@2':>8} {'bytes@8':>8} {'x':>5}")
    over = rows = 0
    for path in sorted((ROOT / "protocols").glob("*.cco")):
        for target in args.targets.split(","):
            small = kernels(path.stem, target, args.small)
            large = kernels(path.stem, target, args.large)
            if small is None or large is None:
                continue
            lines = large.count("\n") / small.count("\n")
            size = len(large) / len(small)
            rows += 1
            flag = ""
            if lines > GOAL or size > GOAL:
                over += 1
                flag = "  OVER"
            print(f"{path.stem:28} {target:9} {small.count(chr(10)):8} "
                  f"{large.count(chr(10)):8} {lines:5.2f} {len(small):8} {len(large):8} "
                  f"{size:5.2f}{flag}")
    print(f"{rows - over}/{rows} rows within {GOAL}x")
    if args.nvcc:
        print(f"nvcc moe_dispatch nvshmem @{args.large}: "
              f"{nvcc_cpu('moe_dispatch', 'nvshmem', args.large):.1f} CPU s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
