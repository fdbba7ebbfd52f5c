#!/usr/bin/env bash
# Issue 31 on ONE GPU (the device tool's nvidia-h200) shared by NVSHMEM ranks under CUDA MPS:
# the two protocols that stalled at 4 ranks (tests/runtime/data/stall/), in one
# time-bounded command (STALL_TOTAL seconds at most, default 400).
# Stages (STAGES, default "build run debug two"):
#   build  every cubin of the cases (release and debug) in parallel, each under a timeout,
#          with nvcc's --time (ORIG_DIRS: generated directories to build as they are, e.g.
#          the code generated before the fix, for the time it took);
#   run    `ccogen run` at 4 ranks, ITERS epochs (default 5), --watchdog 20, a monitor
#          printing every rank's phase every 10 s (nothing may pass unnamed);
#   debug  the same with --debug (bounded waits);
#   two    the 2-rank forms;
#   many   every case at 2 and 4 ranks, 100 back-to-back launches;
#   tests  the GPU tests of issue 31 (pytest -m gpu tests/runtime/test_gpu_stall.py).
# Logs land in $OUT (at most 8 files): setup.log, build.log, run.log, tests.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-stall-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${STALL_TOTAL:-400}
STAGES=${STAGES:-build run debug two}
ITERS=${ITERS:-5}
DATA=tests/runtime/data/stall
WORK=/tmp/ccogen-stall-work
left() { echo $(( TOTAL - SECONDS )); }
{
  date -u; nvidia-smi -L; nproc
  [ -n "${SKIP_BUILD:-}" ] || { time build_extension; }
  nvidia-cuda-mps-control -d 2>&1; sleep 1
  echo "MPS: $(echo get_default_active_thread_percentage | nvidia-cuda-mps-control 2>&1)"
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
} > "$OUT/setup.log" 2>&1
echo "setup done after $SECONDS s" >> "$OUT/setup.log"

cases() {  # FILE RANKS pairs
  echo "halo2d 4"; echo "moe_ll_dispatch_fp8 4"; echo "halo2d_2x1 2"; echo "moe_ll_dispatch_fp8 2"
}

monitor() {  # monitor DIR: every 10 s, every rank's phase and how long it has been in it
  local dir=$1
  while sleep 10; do
    for f in "$dir"/ccogen-run-*/rank*.phase; do
      [ -f "$f" ] || continue
      echo "   [monitor ${SECONDS}s] $(basename "$f"): $(cat "$f") ($(( $(date +%s) - $(stat -c %Y "$f") )) s)"
    done
  done
}

run_case() {  # run_case LABEL LIMIT_S ARGS...
  local label=$1 limit=$2; shift 2
  local tmp=/tmp/stall-tmp-$label; rm -rf "$tmp"; mkdir -p "$tmp"
  if [ "$(left)" -lt $(( limit + 15 )) ]; then echo "== $label: skipped, $(left) s left"; return; fi
  echo "== $label: ccogen run $* (up to $limit s)"
  monitor "$tmp" & local mon=$!
  local t0=$SECONDS
  TMPDIR=$tmp timeout -k 5 "$limit" $PY -m ccogen run "$@" 2>&1 | tail -40
  local rc=${PIPESTATUS[0]}
  kill "$mon" 2>/dev/null; wait "$mon" 2>/dev/null
  echo "== $label: exit $rc after $(( SECONDS - t0 )) s"
}

for stage in $STAGES; do
  case $stage in
  build)
    {
      echo "== build ($(left) s left)"
      for d in ${ORIG_DIRS:-}; do
        ( t0=$SECONDS; timeout 120 $PY -c "
import sys; from ccogen.toolchains.cubin import build_manifest_dir; build_manifest_dir(sys.argv[1])" "$d" \
            > "$WORK-$(basename "$d").log" 2>&1; echo "   as generated before the fix: $d: exit $? after $(( SECONDS - t0 )) s" ) &
      done
      $PY scripts/stall_build.py --data "$DATA" --work "$WORK" --timeout 120 ${BUILD_ARGS:-}
      wait
    } >> "$OUT/build.log" 2>&1 ;;
  run)
    { while read -r f n; do [ "$n" = 4 ] && run_case "$f-n$n" 60 "$DATA/$f.cco" --target nvshmem --ranks "$n" --iters "$ITERS" --watchdog 20; done < <(cases); } >> "$OUT/run.log" 2>&1 ;;
  debug)
    { while read -r f n; do [ "$n" = 4 ] && run_case "$f-n$n-debug" 60 "$DATA/$f.cco" --target nvshmem --ranks "$n" --iters 3 --watchdog 20 --debug; done < <(cases); } >> "$OUT/run.log" 2>&1 ;;
  two)
    { while read -r f n; do [ "$n" = 2 ] && run_case "$f-n$n" 60 "$DATA/$f.cco" --target nvshmem --ranks "$n" --iters "$ITERS" --watchdog 20; done < <(cases); } >> "$OUT/run.log" 2>&1 ;;
  many)
    { while read -r f n; do run_case "$f-n$n-x100" 75 "$DATA/$f.cco" --target nvshmem --ranks "$n" --iters 100 --watchdog 20 --times; done < <(cases); } >> "$OUT/many.log" 2>&1 ;;
  tests)
    { echo "== tests ($(left) s left)"
      timeout -k 5 $(( $(left) - 10 )) $PY -m pytest -q -s -rA -m gpu -p no:cacheprovider \
        --durations=0 tests/runtime/test_gpu_stall.py > "$OUT/tests-full.log" 2>&1
      echo "== tests: exit $?"
      grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|time per epoch|on nvshmem|error:|had not finished|timed-out|ensure:|s call" "$OUT/tests-full.log" | head -80
    } >> "$OUT/tests.log" 2>&1 ;;
  esac
done
echo "total $SECONDS s" >> "$OUT/setup.log"
