"""The local-reduce micro-benchmark (benchmarks/reduce/README.md).

    python benchmarks/reduce/run.py [--k 2,4,8] [--mib 64] [--iters 20] [--json OUT]

On one GPU: builds reduce_bench.cu, generates and builds local_reduce.cco's kernel for
every k (target nvshmem, one rank, one CTA per SM), then times a device-to-device copy,
the hand-written reduce and the generated one, and prints each reduce's bandwidth (bytes
read + written) as a share of the copy's.  The generated kernel is left out, with the
reason, while ccogen cannot generate `reduce` yet.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOAL = 0.90  # the generated reduce's target: 90 % of the copy's bandwidth


@dataclass(frozen=True)
class Generated:
    """The generated kernel of one instance, as reduce_bench.cu's --gen-* arguments."""

    cubin: Path
    symbol: str
    grid: int
    block: int
    params: tuple[str, ...]
    heap_size: int
    cooperative: bool

    def args(self) -> list[str]:
        return ["--gen-cubin", str(self.cubin), "--gen-symbol", self.symbol,
                "--gen-grid", str(self.grid), "--gen-block", str(self.block),
                "--gen-params", ",".join(self.params), "--gen-heap", str(self.heap_size)
                ] + (["--gen-cooperative"] if self.cooperative else [])


def build_bench(build: Path) -> Path:
    """nvcc reduce_bench.cu -> build/reduce_bench (for the GPU nvcc sees by default)."""
    from ccogen.toolchains.libraries import find_nvcc

    build.mkdir(parents=True, exist_ok=True)
    exe = build / "reduce_bench"
    subprocess.run([str(find_nvcc()), "-std=c++17", "-O3", "-arch=native", "-o", str(exe),
                    str(HERE / "reduce_bench.cu"), "-lcuda"], check=True)
    return exe


def generate(k: int, n: int, ctas: int, arch: str, build: Path) -> Generated | str:
    """Generate and build local_reduce.cco for k sources; the reason when it cannot be."""
    from ccogen.bench.reference import pending_codegen
    from ccogen.errors import DiagnosticError
    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir
    from ccogen.toolchains.cubin import build_cubin

    path = HERE / "local_reduce.cco"
    out = build / f"generated-k{k}"
    try:
        compile_for_run(load_ir(path), path.name, "nvshmem", 1, {"k": k, "n": n, "ctas": ctas},
                        out, debug=False, max_ctas=ctas)
    except DiagnosticError as exc:
        if pending_codegen(exc):
            return f"not generated: {exc}"
        raise
    cubin = build_cubin(out, "nvshmem", arch)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if len(manifest["kernels"]) != 1:
        return f"not run: {len(manifest['kernels'])} kernels (the runner launches one)"
    kernel = manifest["kernels"][0]
    grid, block = kernel["grid"], kernel["block"]
    grid = grid[0] if isinstance(grid, list) else grid
    block = block[0] if isinstance(block, list) else block
    return Generated(Path(cubin), kernel.get("symbol", kernel["name"]), int(grid), int(block),
                     tuple(kernel["params"]), int(manifest["heap_size"]),
                     bool(kernel.get("cooperative", False)))


def gbps(row: dict[str, Any]) -> float:
    """Bytes read + written per second, in GB/s (10^9 bytes)."""
    return float(row["bytes"]) / (float(row["ms"]) * 1e-3) / 1e9


def measure(exe: Path, k: int, mib: int, iters: int, generated: Generated | str,
            notes: list[str]) -> list[dict[str, Any]]:
    """Every measurement reduce_bench printed; a failure after some (the generated kernel
    failing to load or launch, say) keeps them and adds a note."""
    cmd = [str(exe), "--k", str(k), "--mib", str(mib), "--iters", str(iters)]
    if isinstance(generated, Generated):
        cmd += generated.args()
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        notes.append(f"k={k}: reduce_bench exited {done.returncode}: "
                     f"{done.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        return []
    copy = next(r for r in rows if r["name"] == "copy")
    for row in rows:
        row["gbps"] = gbps(row)
        row["of_copy"] = row["gbps"] / gbps(copy)
    return rows


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| k | kernel | grid x block | time (us) | GB/s (read + written) | of copy | "
             "wrong elements |", "|---|---|---|---|---|---|---|"]
    for row in results:
        shape = f"{row['grid']} x {row['block']}" if row["grid"] else "-"
        lines.append(f"| {row['k']} | {row['name']} | {shape} | {row['ms'] * 1e3:.1f} | "
                     f"{row['gbps']:.0f} | {100 * row['of_copy']:.1f} % | "
                     f"{row['mismatches']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="2,4,8", help="source counts (comma-separated)")
    parser.add_argument("--mib", type=int, default=64, help="MiB per source (bf16)")
    parser.add_argument("--iters", type=int, default=5, help="timed samples (median)")
    parser.add_argument("--build", type=Path, default=Path("/tmp/ccogen-reduce-bench"))
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)
    exe = build_bench(args.build)
    info = json.loads(subprocess.run([str(exe), "--info"], check=True, capture_output=True,
                                     text=True).stdout)
    n = args.mib * (1 << 20) // 2
    results: list[dict[str, Any]] = []
    notes: list[str] = []
    for k in (int(v) for v in args.k.split(",")):
        generated = generate(k, n, int(info["sms"]), str(info["arch"]), args.build)
        if isinstance(generated, str):
            notes.append(f"k={k}: generated reduce {generated}")
        results += measure(exe, k, args.mib, args.iters, generated, notes)
    print(f"{info['name']} ({info['sms']} SMs), bf16, {args.mib} MiB per source")
    print(table(results))
    for note in notes:
        print(note)
    for row in results:
        if row["name"] == "generated" and row["of_copy"] < GOAL:
            print(f"k={row['k']}: the generated reduce reaches {100 * row['of_copy']:.1f} % of "
                  f"the copy's bandwidth, under the {100 * GOAL:.0f} % goal")
    if args.json:
        args.json.write_text(json.dumps({"device": info, "mib": args.mib, "notes": notes,
                                         "results": results}, indent=2) + "\n",
                             encoding="utf-8")
    bad = [r for r in results if r["mismatches"]]
    return 1 if bad or not results else 0


if __name__ == "__main__":
    raise SystemExit(main())
