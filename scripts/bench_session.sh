#!/usr/bin/env bash
# The benchmark campaign of issue 7 in one command, on a 2-GPU machine (the device tool's
# nvidia-h200-x2): build the extension, then `python3 -m ccogen.bench.campaign`, which for
# nccl-lsa and nvshmem times alltoall (block 8 B .. 256 MiB), pingpong (rounds 1 .. 128 at
# 8 B: one-way latency; size 8 B .. 64 MiB at one round: put bandwidth) and ring_allgather
# (chunk 16 B .. 256 MiB), each beside its hand-written reference (benchmarks/reference),
# NCCL through torch.distributed, the copy-engine and SM-store ceilings and the
# empty-kernel floor, all measured in this run (docs/performance.md).
#
# Everything lands in $OUT (default bench-logs):
#   setup.log, campaign.log, bench.tgz (bench/<target>/{*.txt,*.csv,*.png,results.json,results.csv},
#   bench/targets.md, bench/summary.txt), and targets.md (each target of the issue: goal,
#   measured, met) and summary.txt beside it.
# Generated code goes to /tmp (BENCH_WORK), not to $OUT.  Wall time: about 5 minutes
# planned (extension ~40 s, builds ~1 min on 32 cores, ~1.5 min per target); the whole
# script stops by BENCH_TOTAL seconds (default 530, under 9 minutes): the campaign gets
# what the set-up left, and starts no target with less than 150 s to go.
# BENCH_ARGS=--quick: two points per sweep (smoke); BENCH_TESTS=1 also runs the
# gpu-marked tests of tests/bench first.
# Wheels the machine lacks (lark) are expected in .whl/, as for scripts/gpu_session.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${BENCH_TOTAL:-530}
{
  date -u; nvidia-smi -L; nvidia-smi topo -m
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  build_extension
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
  $PY -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  $PY -c "import cupy, matplotlib; print('cupy', cupy.__version__, 'matplotlib', matplotlib.__version__)"
  nproc
} 2>&1 | tee "$OUT/setup.log"
if [ -n "${BENCH_TESTS:-}" ]; then
  timeout 240 $PY -m pytest -v -rA -p no:cacheprovider --timeout=200 -m gpu tests/bench \
    2>&1 | tee "$OUT/pytest-bench.log"
fi
BUDGET=$(( TOTAL - SECONDS ))
echo "== campaign: ${BUDGET} s left of ${TOTAL}" | tee "$OUT/campaign.log"
timeout "$BUDGET" $PY -m ccogen.bench.campaign -o "$OUT/bench" \
  --work "${BENCH_WORK:-/tmp/ccogen-bench-work}" --budget-s $(( BUDGET - 150 )) ${BENCH_ARGS:-} \
  2>&1 | tee -a "$OUT/campaign.log"
echo "campaign exit ${PIPESTATUS[0]} after ${SECONDS} s" | tee -a "$OUT/campaign.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
cat "$OUT/bench/targets.md" 2>/dev/null
# The device tool returns at most 8 files from $OUT: pack the per-target outputs into one
# archive and keep the two summaries beside it.
if [ -d "$OUT/bench" ]; then
  cp "$OUT/bench/targets.md" "$OUT/bench/summary.txt" "$OUT/" 2>/dev/null
  tar czf "$OUT/bench.tgz" -C "$OUT" bench && rm -rf "$OUT/bench"
fi
