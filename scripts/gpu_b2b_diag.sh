#!/usr/bin/env bash
# Issue 30: confirm why `counted_broadcast` stalled in the 8-rank CUDA-graph check
# (docs/performance.md, "The 8-rank graph stall of `counted_broadcast`"), on ONE GPU
# shared by NVSHMEM ranks under MPS (the device tool's nvidia-h200), from the repository
# root, in about 5 minutes:
#   1. the binding's budget (8 ranks on an H200: 15 CTAs a kernel): 100 calls in one
#      graph, expected to pass ("first ok, last ok, every rank ok ... max_ctas 15");
#   2. the old shape (`--max-ctas 32`, 10 calls, `--watch 30`): expected to stall in the
#      warm-up call; every rank prints its progress words ("stalled after 30 s (grid
#      [32], max_ctas 32): scratch [...]"): the launch ticket (the third scratch word) is
#      32 on the ranks whose CTAs all started and less on the others, about 132 CTAs
#      started over all ranks, one per SM; the ranks exit with status 3.
# DIAG_RANKS (8) and DIAG_PROTOCOL (counted_broadcast) change what runs.  Logs in $OUT
# (default b2b-diag): budget.log, old-shape.log, graph-<n>.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-b2b-diag}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
N=${DIAG_RANKS:-8}
P=${DIAG_PROTOCOL:-counted_broadcast}
$PY -c "import ccogen._ccogen_rt" 2>/dev/null || build_extension
STARTED_MPS=
if ! echo get_default_active_thread_percentage | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && STARTED_MPS=1; sleep 1
fi
graph() {  # graph LOG PORT CAP FLAGS...
  local log=$1 port=$2 cap=$3
  shift 3
  timeout -k 5 "$cap" $PY -m torch.distributed.run --nproc-per-node "$N" --master-port "$port" \
    benchmarks/b2b/graph_check.py --only "$P" --out "$OUT" "$@" > "$OUT/$log.log" 2>&1
  echo "$log: exit $?"
}
graph budget 29701 200 --watch 60
graph old-shape 29702 120 --calls 10 --watch 30 --max-ctas 32
grep -h "stalled\|graph $P" "$OUT"/budget.log "$OUT"/old-shape.log
[ -n "$STARTED_MPS" ] && echo quit | nvidia-cuda-mps-control
exit 0
