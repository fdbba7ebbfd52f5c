#!/usr/bin/env bash
# The data-parallel example (examples/dp_allreduce_step.py) and `ccogen bench` of a protocol
# with a local buffer, on ONE GPU shared by several NVSHMEM ranks under CUDA MPS (the device
# tool's nvidia-h200), in one time-bounded command (DP_TOTAL seconds, default 285: under 5
# minutes).  From the repository root:
#   1. setup: the extension (unless it imports already or SKIP_BUILD=1), MPS (started
#      unless it runs; stopped at the end if started here), prebuild of the cubins and the
#      shim the runs load (scripts/torch_prebuild.py --dp);
#   2. tests: the torch GPU tests of the example (tests/torch/test_gpu.py -k data_parallel:
#      2 ranks, eager, --graph, --compile; DP_TESTS=all runs the whole file, the alltoall
#      example and the debug-build hang included), with the cache prebuilt in step 1
#      (CCOGEN_TEST_KEEP_CACHE=1: otherwise the tests build into a cache of their own);
#   3. the example at 4 ranks (DP_RANKS): eager, then --graph;
#   4. bench: `ccogen bench protocols/allreduce_oneshot.cco --target nvshmem --ranks 2`
#      (functional only: the ranks share the GPU), generated code and hand-written reference;
#   5. the example at 4 ranks with --compile (last of the runs: the slowest to start).
# Every stage runs under `timeout` (its whole process group is killed), never past the
# total; a stage without enough time left is SKIPPED.  Logs in $OUT (default dp-logs, 5
# files): setup.log, tests.log, dp.log, bench.log, summary.txt (the table, also printed).
# Exit 0 when every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-dp-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${DP_TOTAL:-285}
RANKS=${DP_RANKS:-4}
SUMMARY="$OUT/summary.txt"
source scripts/gpu_stages.sh
stage_table 48

# -- 1. setup ---------------------------------------------------------------------------------
STARTED_MPS=
{
  date -u; nvidia-smi -L; nproc
  if [ -z "${SKIP_BUILD:-}" ] && ! $PY -c "import ccogen._ccogen_rt" 2>/dev/null; then
    echo "building the extension"; build_extension
  fi
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.device_count(), 'GPU')"
  if ! echo get_default_active_thread_percentage | nvidia-cuda-mps-control >/dev/null 2>&1; then
    nvidia-cuda-mps-control -d && STARTED_MPS=1; sleep 1
  fi
  echo "MPS: $(echo get_default_active_thread_percentage | nvidia-cuda-mps-control 2>&1)" \
    "(started here: ${STARTED_MPS:-no})"
} > "$OUT/setup.log" 2>&1
b=$(budget_for 90 20)
t0=$SECONDS
if [ "$b" -gt 0 ]; then
  timeout -k 5 "$b" $PY scripts/torch_prebuild.py --target nvshmem --ranks "2,$RANKS" --dp \
    >> "$OUT/setup.log" 2>&1
  rc=$?
else
  rc=124
fi
echo "== setup done after $SECONDS s (prebuild exit $rc)" >> "$OUT/setup.log"
record "setup + prebuild" "$(verdict $rc)" $(( SECONDS - t0 )) "$(tail -n 2 "$OUT/setup.log" | head -n 1)"

STAGE_PORT=29631
dp_run() {  # dp_run NRANKS MODE CAP: one torchrun of the example, appended to dp.log
  local flags=()
  [ "$2" = eager ] || flags=("--$2")
  torchrun_stage "example $1 ranks $2" "$OUT/dp.log" "$3" --nproc-per-node "$1" \
    examples/dp_allreduce_step.py --shared-gpu "${flags[@]}"
}

# -- 2. the torch GPU tests ---------------------------------------------------------------------
b=$(budget_for 150 40)
if [ "$b" -gt 0 ]; then
  select=(-k data_parallel); [ "${DP_TESTS:-}" = all ] && select=()
  t0=$SECONDS
  CCOGEN_TEST_MPS=1 CCOGEN_TEST_KEEP_CACHE=1 timeout -k 5 "$b" $PY -m pytest -v -rA -p no:cacheprovider -m gpu \
    tests/torch/test_gpu.py "${select[@]}" > "$OUT/tests.log" 2>&1
  rc=$?
  echo "== exit $rc after $(( SECONDS - t0 )) s" >> "$OUT/tests.log"
  reported=0
  while read -r name res; do
    [ "$res" = PASSED ] && res=PASS
    record "pytest ${name#tests/torch/test_gpu.py::}" "$res" - ""
    reported=$(( reported + 1 ))
  done < <(grep -oE "^tests/torch/test_gpu.py::[^ ]+ (PASSED|FAILED|SKIPPED|ERROR)" \
             "$OUT/tests.log")
  record "pytest run" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$reported tests reported; $(tail -n 2 "$OUT/tests.log" | head -n 1 | cut -c1-100)"
else
  echo "skipped: $(left) s left" > "$OUT/tests.log"; record "pytest test_gpu.py" SKIPPED 0 ""
fi

# -- 3. the example at RANKS ranks: eager, graph --------------------------------------------------
: > "$OUT/dp.log"
dp_run "$RANKS" eager 60
dp_run "$RANKS" graph 60

# -- 4. ccogen bench of a protocol with a buffer, 2 ranks on the GPU (functional only) ---------
b=$(budget_for 75 30)
if [ "$b" -gt 0 ]; then
  t0=$SECONDS
  timeout -k 5 "$b" $PY -m ccogen bench protocols/allreduce_oneshot.cco --target nvshmem \
    --ranks 2 --sweep n=4096,65536 --iters 5 --warmup 1 --no-plot --watchdog 20 \
    -o /tmp/ccogen-dp-bench --work /tmp/ccogen-dp-bench/build > "$OUT/bench.log" 2>&1
  rc=$?
  echo "== exit $rc after $(( SECONDS - t0 )) s" >> "$OUT/bench.log"
  record "bench allreduce_oneshot x2" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -c "ensure FAILED" "$OUT/bench.log") cases with ensure FAILED; $(grep -m1 -o "under MPS[^;]*" "$OUT/bench.log")"
else
  echo "skipped: $(left) s left" > "$OUT/bench.log"; record "bench allreduce_oneshot x2" SKIPPED 0 ""
fi

# -- 5. the example at RANKS ranks under torch.compile ------------------------------------------
dp_run "$RANKS" compile 100

if [ -n "$STARTED_MPS" ]; then echo quit | nvidia-cuda-mps-control; fi
echo "total $SECONDS s of $TOTAL; exit $STATUS" >> "$SUMMARY"
cat "$SUMMARY"
exit $STATUS
