#!/usr/bin/env bash
# Issue 26's GPU item on ONE H200 (the device tool's nvidia-h200): the library's run-time
# protocols at their real shapes, NVSHMEM ranks under CUDA MPS, in stages a device command
# can hold (each <= STAGE_S seconds, default 540; choose with STAGES, default all three):
#   runs       scripts/realshape_mps_run.py runs: moe_dispatch, moe_combine and the
#              run-time-count stand-in moe_dispatch_ntok at decode (128 x 7168 bf16 top-8;
#              2, 4, 8 ranks) and prefill (4096 tokens; 2, 4 ranks), alltoallv (cap 4096;
#              2, 4, 8), 100 back-to-back launches each, contents drawn afresh and `ensure`
#              checked every launch (RUNS_CASES picks: decode,alltoallv,prefill;
#              RUNS_ITERS, CASE_S: launches and seconds per case, default 100 and 240);
#              RUNS_PROTOCOLS=a,b keeps only those protocols' cases;
#   sanitizer  compute-sanitizer memcheck and racecheck at decode, 2 ranks, of moe_dispatch
#              (SANITIZER_PROTOCOLS=a,b picks others);
#   zero       ccogen bench at 2 ranks of alltoallv, moe_dispatch, moe_combine and both
#              allreduces beside the hand-written references: generated / reference
#              (ZERO_PROTOCOLS=a,b keeps those; ZERO_SWEEP="p:sweep;q:sweep" replaces sweeps).
# Before it, from the repository root: `source scripts/gpu_setup.sh && build_extension;
# nvidia-cuda-mps-control -d` (this script does both when NO_SETUP is unset).
# Logs in $OUT (default realshape-logs): setup.log, <stage>.log, <stage>.md, summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-realshape-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
STAGES=${STAGES:-runs,sanitizer,zero}
STAGE_S=${STAGE_S:-540}
if [ -z "${NO_SETUP:-}" ]; then
  {
    date -u; nvidia-smi -L; nproc; free -g | head -2
    build_extension
    nvidia-cuda-mps-control -d 2>&1; sleep 1
    $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
    echo "setup done after $SECONDS s"
  } > "$OUT/setup.log" 2>&1
fi
: > "$OUT/summary.txt"
for stage in ${STAGES//,/ }; do
  t0=$SECONDS
  extra=()
  [ "$stage" = runs ] && extra=(--cases "${RUNS_CASES:-decode,alltoallv,prefill}" \
    --iters "${RUNS_ITERS:-100}" --case-s "${CASE_S:-240}")
  [ "$stage" = zero ] && extra=(--bench-out "$OUT/bench")
  timeout -k 10 "$STAGE_S" $PY scripts/realshape_mps_run.py "$stage" --out "$OUT/$stage.md" \
    --total-s $(( STAGE_S - 20 )) "${extra[@]}" > "$OUT/$stage.log" 2>&1
  rc=$?
  { echo "== $stage: exit $rc after $(( SECONDS - t0 )) s"; cat "$OUT/$stage.md" 2>/dev/null; echo; } \
    >> "$OUT/summary.txt"
done
# the device tool returns a few files: the bench outputs as one archive
if [ -d "$OUT/bench" ]; then tar czf "$OUT/bench.tgz" -C "$OUT" bench && rm -rf "$OUT/bench"; fi
cat "$OUT/summary.txt"
