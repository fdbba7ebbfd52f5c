#!/usr/bin/env bash
# Issue 20 on ONE GPU (the device tool's nvidia-h200) shared by several NVSHMEM ranks under
# CUDA MPS, in one time-bounded command (about 6 minutes; MPS_TOTAL seconds at most,
# default 470):
#   1. build the extension, start the MPS control daemon unless it runs;
#   2. repro: counted_broadcast at 3 ranks in the launch shape that hung (128 CTAs, no
#      residency check: must hit the watchdog), the residency check refusing it, and the
#      default SM budget passing 100 launches (scripts/mps_matrix.py repro);
#   3. `ccogen run` itself: the issue's case at 3 ranks (100 epochs), and the two refusals
#      (nccl-lsa with fewer GPUs than ranks; --max-ctas 128 at 3 ranks on one GPU);
#   4. matrix: every protocol x ranks 2, 4, 8 x (default, largest size) x 100 launches;
#   5. hog: a compute kernel holding 100 SMs, then 128, while a protocol runs (it must
#      finish: beside it, then after it);
#   6. budget: alltoall at 2 ranks for --max-ctas 8 .. 128 (what the budget costs);
#   7. spin: the shape that hung, as it hung (spins until the watchdog; last, because
#      the killed ranks leave their kernels spinning in the MPS server);
#   then stop the MPS daemon if this script started it.
# Everything lands in $OUT (default mps-logs; at most 8 files: the device tool's limit):
#   setup.log, repro.log, cli.log, matrix.log, hog.log, budget.log, and the tables in
#   mps-matrix.md (+ mps-matrix.json).  Exit 0 when every stage came out as expected.
# Knobs: MPS_TOTAL, MATRIX_RANKS (2,4,8), MATRIX_PROTOCOLS (all), SKIP_BUILD=1 (extension
# already built), STAGES ("repro cli matrix hog budget spin").  Wheels the machine lacks (lark)
# are expected in .whl/, as for scripts/gpu_session.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-mps-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${MPS_TOTAL:-470}
STAGES=${STAGES:-repro cli matrix hog budget spin}
MD="$OUT/mps-matrix.md"
: > "$MD"
left() { echo $(( TOTAL - SECONDS )); }
{
  date -u; nvidia-smi -L; nproc
  [ -n "${SKIP_BUILD:-}" ] || build_extension
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
} 2>&1 | tee "$OUT/setup.log"
STARTED_MPS=
if ! echo get_default_active_thread_percentage | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && STARTED_MPS=1
  sleep 1
fi
echo "MPS: $(echo get_default_active_thread_percentage | nvidia-cuda-mps-control 2>&1)" \
  "(started here: ${STARTED_MPS:-no})" | tee -a "$OUT/setup.log"
STATUS=0
MATRIX="$PY scripts/mps_matrix.py --out $MD --work /tmp/ccogen-mps-work"
stage() {  # stage NAME SECONDS COMMAND...: run under a timeout, never past the total
  local name=$1 want=$2; shift 2
  local budget=$(( $(left) - 20 ))
  [ "$budget" -gt "$want" ] && budget=$want
  if [ "$budget" -lt 40 ]; then
    echo "== $name: skipped, $(left) s left" | tee -a "$OUT/$name.log"; STATUS=1; return
  fi
  echo "== $name: up to $budget s ($(left) s left)" | tee -a "$OUT/$name.log"
  timeout -k 10 "$budget" "$@" --total-s $(( budget - 15 )) 2>&1 | tee -a "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after ${SECONDS} s" | tee -a "$OUT/$name.log"
  [ "$rc" -eq 0 ] || STATUS=1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
    >> "$OUT/$name.log" 2>&1
}
for s in $STAGES; do
  case $s in
    repro) stage repro 120 $MATRIX repro ;;
    cli)
      {
        echo "== ccogen run: the issue's case, counted_broadcast at 3 ranks on one GPU"
        timeout -k 10 80 $PY -m ccogen run protocols/counted_broadcast.cco --target nvshmem \
          --ranks 3 --iters 100 --watchdog 20; echo "exit $? (expected 0)"
        echo "== ccogen run: nccl-lsa with more ranks than GPUs (expected: refused, exit 2)"
        timeout -k 10 40 $PY -m ccogen run protocols/alltoall.cco --target nccl-lsa --ranks 2 \
          --iters 3; echo "exit $? (expected 2)"
        echo "== ccogen run: --max-ctas 128 at 3 ranks on one GPU (expected: refused, exit 2)"
        timeout -k 10 60 $PY -m ccogen run protocols/counted_broadcast.cco --target nvshmem \
          --ranks 3 --iters 3 --max-ctas 128 --watchdog 10; echo "exit $? (expected 2)"
      } 2>&1 | tee "$OUT/cli.log"
      grep -q "exit 0 (expected 0)" "$OUT/cli.log" && [ "$(grep -c 'exit 2 (expected 2)' "$OUT/cli.log")" -eq 2 ] \
        || STATUS=1 ;;
    matrix) stage matrix 300 $MATRIX matrix --ranks "${MATRIX_RANKS:-2,4,8}" \
              ${MATRIX_PROTOCOLS:+--protocols "$MATRIX_PROTOCOLS"} ;;
    hog)  # room left for the protocol (it runs beside the compute kernel), then none
      stage hog 90 $MATRIX hog --hog-sms 100 --hog-seconds 15
      stage hog 60 $MATRIX hog --hog-sms 128 --hog-seconds 8 ;;
    budget) stage budget 100 $MATRIX budget --budgets 8,16,32,64,128 --launches 52 ;;
    spin) stage spin 60 $MATRIX repro-spin ;;  # last: may leave spinning kernels behind
  esac
done
[ -n "$STARTED_MPS" ] && timeout 20 sh -c 'echo quit | nvidia-cuda-mps-control' 
echo "== done after ${SECONDS} s, status $STATUS"
cat "$MD"
exit $STATUS
