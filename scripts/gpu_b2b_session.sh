#!/usr/bin/env bash
# Issue #30 on ONE GPU shared by NVSHMEM ranks under CUDA MPS (the device tool's
# nvidia-h200), in one time-bounded command (B2B_TOTAL seconds, default 560).  From the
# repository root:
#   1. setup: the extension (unless it imports already or SKIP_BUILD=1), MPS (started unless
#      it runs; stopped at the end if started here), benchmarks/b2b/prebuild.py (every
#      instance the runs load, built in parallel);
#   2. torchrun benchmarks/b2b/b2b_graph.py at 2 and 4 ranks: 100 back-to-back calls of
#      alltoall_rotating and allreduce_oneshot_rotating in one CUDA graph (every call's
#      `ensure` checked, first and last named), then per call of a 100-call graph, old
#      protocol (host_sync / barriers + the binding's barrier kernel) against the new one:
#      alltoall 8 B / 4 KiB / 64 KiB per peer, allreduce_oneshot 8 B .. 64 KiB (f32);
#   3. the 100-call check at 8 ranks (B2B_CHECK_RANKS).
# Every stage runs under `timeout`, never past the total.  Logs in $OUT (default b2b-logs):
# setup.log, run-<n>.log, b2b-<n>.json (rank 0's report), summary.txt.  Exit 0 when every
# stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-b2b-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${B2B_TOTAL:-560}
TIMED=${B2B_RANKS:-2,4}
CHECKED=${B2B_CHECK_RANKS:-8}
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
b=$(budget_for 200 20)
t0=$SECONDS
if [ "$b" -gt 0 ]; then
  timeout -k 5 "$b" $PY benchmarks/b2b/prebuild.py --ranks "$TIMED" --check-ranks "$CHECKED" \
    >> "$OUT/setup.log" 2>&1
  rc=$?
else
  rc=124
fi
record "setup + prebuild" "$(verdict $rc)" $(( SECONDS - t0 )) "$(tail -n 1 "$OUT/setup.log")"

PORT=29661
run() {  # run NRANKS FLAGS CAP
  local n=$1 flags=$2 cap=$3 b t0 rc
  b=$(budget_for "$cap" 30)
  t0=$SECONDS
  if [ "$b" -le 0 ]; then record "b2b x$n $flags" SKIPPED 0 "no time left"; return; fi
  timeout -k 5 "$b" $PY -m torch.distributed.run --nproc-per-node "$n" --master-port $((PORT++)) \
    benchmarks/b2b/b2b_graph.py --out "$OUT" $flags > "$OUT/run-$n.log" 2>&1
  rc=$?
  record "b2b x$n $flags" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -c ' ok,\| ratio ' "$OUT/run-$n.log") lines; $(grep -m1 -i 'error\|FAILED' "$OUT/run-$n.log")"
}
for n in ${TIMED//,/ }; do run "$n" "" 150; done
for n in ${CHECKED//,/ }; do run "$n" "--check" 100; done

[ -n "$STARTED_MPS" ] && echo quit | nvidia-cuda-mps-control
grep -h "\[" "$OUT"/run-*.log | grep " ranks\]" >> "$SUMMARY" || true
cat "$SUMMARY"
exit $STATUS
