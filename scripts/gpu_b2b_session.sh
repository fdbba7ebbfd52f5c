#!/usr/bin/env bash
# Issue #30 on ONE GPU shared by NVSHMEM ranks under CUDA MPS (the device tool's
# nvidia-h200), in one time-bounded command (B2B_TOTAL seconds, default 470).  From the
# repository root:
#   1. setup: the extension (unless it imports already or SKIP_BUILD=1), MPS (started unless
#      it runs; stopped at the end if started here), benchmarks/b2b/prebuild.py (every
#      instance the runs load, built in parallel);
#   2. torchrun benchmarks/b2b/b2b_graph.py --time at 2 and 4 ranks (B2B_RANKS): per call
#      of a 100-call CUDA graph, the old protocol (alltoall: host_sync + the binding's
#      barrier kernel; allreduce_oneshot: its barriers) and the library's leading-barrier
#      alltoall against the rotating one: alltoall 8 B / 4 KiB / 64 KiB per peer,
#      allreduce_oneshot 8 B .. 64 KiB (f32), with the launches per call;
#   3. torchrun benchmarks/b2b/graph_check.py at 2, 4 and 8 ranks (B2B_GRAPH_RANKS): every
#      library protocol (the run-time ones at small shapes, inputs drawn to satisfy
#      `require`), 100 back-to-back calls in one CUDA graph, `ensure` checked on the first
#      and the last call; B2B_GRAPH_ARGS adds flags (default `--watch 60`: a replay not
#      done after 60 s prints every rank's progress words and ends the stage).
# Every stage runs under `timeout`, never past the total.  Logs in $OUT (default b2b-logs):
# setup.log, time-<n>.log, graph-<n>.log, b2b-<n>.json and graph-<n>.json (rank 0's
# reports), summary.txt.  Exit 0 when every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-b2b-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${B2B_TOTAL:-470}
TIMED=${B2B_RANKS:-2,4}
GRAPHED=${B2B_GRAPH_RANKS:-2,4,8}
SUMMARY="$OUT/summary.txt"
source scripts/gpu_stages.sh
stage_table 40

STARTED_MPS=
{
  date -u; nvidia-smi -L; nproc
  if [ -z "${SKIP_BUILD:-}" ] && ! $PY -c "import ccogen._ccogen_rt" 2>/dev/null; then
    echo "building the extension"; build_extension
  fi
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  if ! echo get_default_active_thread_percentage | nvidia-cuda-mps-control >/dev/null 2>&1; then
    nvidia-cuda-mps-control -d && STARTED_MPS=1; sleep 1
  fi
  echo "MPS started here: ${STARTED_MPS:-no}"
} > "$OUT/setup.log" 2>&1
b=$(budget_for 170 20)
t0=$SECONDS
if [ "$b" -gt 0 ]; then
  timeout -k 5 "$b" $PY benchmarks/b2b/prebuild.py --ranks "$TIMED" --check-ranks "$GRAPHED" \
    >> "$OUT/setup.log" 2>&1
  rc=$?
else
  rc=124
fi
record "setup + prebuild" "$(verdict $rc)" $(( SECONDS - t0 )) "$(tail -n 1 "$OUT/setup.log")"

PORT=29661
run() {  # run SCRIPT NRANKS LOG CAP FLAGS...
  local script=$1 n=$2 log=$3 cap=$4 b t0 rc
  shift 4
  b=$(budget_for "$cap" 30)
  t0=$SECONDS
  if [ "$b" -le 0 ]; then record "$log" SKIPPED 0 "no time left"; return; fi
  timeout -k 5 "$b" $PY -m torch.distributed.run --nproc-per-node "$n" --master-port $((PORT++)) \
    "benchmarks/b2b/$script" --out "$OUT" "$@" > "$OUT/$log.log" 2>&1
  rc=$?
  record "$log" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -c ' ok,\| ratio ' "$OUT/$log.log") lines; $(grep -m1 -i 'error\|FAILED' "$OUT/$log.log")"
}
# the first timed size, every graph check, then the other timed sizes
first=${TIMED%%,*}
run b2b_graph.py "$first" "time-$first" 110 --time
# shellcheck disable=SC2086  # B2B_GRAPH_ARGS: several flags
for n in ${GRAPHED//,/ }; do
  run graph_check.py "$n" "graph-$n" "${B2B_GRAPH_CAP:-80}" ${B2B_GRAPH_ARGS:---watch 60}
done
for n in ${TIMED//,/ }; do [ "$n" != "$first" ] && run b2b_graph.py "$n" "time-$n" 110 --time; done

[ -n "$STARTED_MPS" ] && echo quit | nvidia-cuda-mps-control
grep -h "\[" "$OUT"/time-*.log "$OUT"/graph-*.log | grep " ranks\]" >> "$SUMMARY" || true
cat "$SUMMARY"
exit $STATUS
