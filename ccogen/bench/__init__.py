"""`ccogen bench`: generated protocols timed beside hand-written references, the engine's own
collectives and the link ceilings, in one run (docs/performance.md).

- `sweep`      `--sweep PARAM=LO..HI[:xF]` / `PARAM=V1,V2,...`
- `traffic`    bytes each directed link carries per epoch (bandwidth is per direction)
- `reference`  benchmarks/reference kernels and their per-instance manifests
- `cases`      the picklable description of what the benchmark ranks run
- `worker`     one rank: verified epoch, timed samples (CUDA graphs for small sizes), check
- `collective` NCCL's all_to_all_single / all_gather_into_tensor through torch.distributed
- `ceiling`    cudaMemcpyPeerAsync and SM-store copies between GPUs 0 and 1
- `runner`     plan, build, measure, merge (`run_bench`)
- `results`, `report`, `plot`   points, statistics, CSV / JSON, tables, PNG
- `cli`        the `ccogen bench` subcommand; `campaign` the whole issue-7 campaign

Importing this package needs neither a GPU nor torch; measuring does.
"""

from __future__ import annotations

from ccogen.bench.results import BenchResult, Point, Stats
from ccogen.bench.runner import Settings, SweepRequest, run_bench
from ccogen.bench.sweep import Sweep, SweepError, parse_sweep
from ccogen.bench.traffic import Traffic, traffic_of

__all__ = ["BenchResult", "Point", "Settings", "Stats", "Sweep", "SweepError", "SweepRequest",
           "Traffic", "parse_sweep", "run_bench", "traffic_of"]
