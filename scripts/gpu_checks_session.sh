#!/usr/bin/env bash
# The GPU checks of a session that changed GPU-facing code, on ONE GPU (the device tool's
# nvidia-h200) shared by NVSHMEM ranks under CUDA MPS, in one time-bounded command
# (CHECKS_TOTAL seconds at most, default 540).  From the repository root:
#   1. setup: the native extension, MPS;
#   2. tests: every gpu-marked test under tests/ that one GPU can run (the others skip
#      with their reason), PYTEST_BUDGET seconds at most (default 260);
#   3. run-time: alltoallv, moe_dispatch, moe_combine and moe_dispatch_ll at 2, 4 and 8 ranks, 100 epochs
#      of freshly drawn contents (scripts/v2_runtime_mps_run.py), RUNTIME_BUDGET s (120);
#   4. matrix: every other protocol of protocols/ at MATRIX_RANKS (default 2,4,8), 100
#      back-to-back launches each (scripts/mps_matrix.py matrix), in the time left.
# Logs in $OUT (default checks-logs): setup.log, pytest.log, runtime.log, runtime.md,
# matrix.log, mps-matrix.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-checks-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${CHECKS_TOTAL:-540}
left() { echo $(( TOTAL - SECONDS )); }
{
  date -u; nvidia-smi -L
  build_extension
  nvidia-cuda-mps-control -d 2>&1; sleep 1
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
  echo "setup done after $SECONDS s"
} > "$OUT/setup.log" 2>&1
b=${PYTEST_BUDGET:-260}; [ "$b" -gt "$(( $(left) - 60 ))" ] && b=$(( $(left) - 60 ))
timeout -k 10 "$b" $PY -m pytest -q -rA -m gpu -p no:cacheprovider --timeout=150 \
  ${GPU_TESTS:-tests/runtime tests/torch tests/bench} > "$OUT/pytest.log" 2>&1
echo "== pytest exit $? after $SECONDS s" >> "$OUT/pytest.log"
b=${RUNTIME_BUDGET:-120}; [ "$b" -gt "$(( $(left) - 60 ))" ] && b=$(( $(left) - 60 ))
if [ "$b" -gt 40 ]; then
  timeout -k 10 "$b" $PY scripts/v2_runtime_mps_run.py --out "$OUT/runtime.md" \
    --work /tmp/ccogen-v2-runtime --total-s $(( b - 10 )) --case-s 40 --no-sanitizer \
    > "$OUT/runtime.log" 2>&1
  echo "== run-time matrix exit $? after $SECONDS s" >> "$OUT/runtime.log"
fi
STATIC=$(ls protocols/*.cco | xargs -n1 basename | sed 's/\.cco$//' \
  | grep -v -E '^(alltoallv|moe_dispatch|moe_combine|moe_dispatch_ll)$' | paste -sd,)
b=$(( $(left) - 15 ))
if [ "$b" -gt 60 ]; then
  timeout -k 10 "$b" $PY scripts/mps_matrix.py --out "$OUT/mps-matrix.md" \
    --work /tmp/ccogen-mps-work matrix --protocols "${MATRIX_PROTOCOLS:-$STATIC}" --ranks "${MATRIX_RANKS:-2,4,8}" \
    --total-s $(( b - 10 )) > "$OUT/matrix.log" 2>&1
  echo "== matrix exit $? after $SECONDS s" >> "$OUT/matrix.log"
else
  echo "== matrix skipped: $(left) s left" > "$OUT/matrix.log"
fi
