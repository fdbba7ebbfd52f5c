#!/usr/bin/env bash
# Language v2 on ONE GPU (the device tool's nvidia-h200), in one time-bounded command
# (V2_TOTAL seconds, default 480).  From the repository root:
#   1. setup: the extension (unless it imports already), MPS (started unless it runs);
#   2. run-time sizes: scripts/v2_runtime_mps_run.py -- alltoallv, moe_dispatch and
#      moe_combine at 2, 4 and 8 NVSHMEM ranks sharing the GPU, 100 epochs with fresh
#      routings, `ensure` checked, then compute-sanitizer memcheck and racecheck;
#   3. the MoE example (examples/moe_layer.py) at V2_RANKS ranks (default 4) sharing the
#      GPU: eager, --graph, --compile (V2_MOE_MODES), V2_STEPS steps each (default 100), its kernels
#      prebuilt (scripts/torch_prebuild.py --moe);
#   4. one rank, no MPS, the default target `nccl-lsa` over an NCCL process group (the
#      path a one-GPU user takes): the MoE example (--k 1) and the data-parallel example;
#      `ccogen run` of the three run-time protocols at one rank on nccl-lsa;
#   5. `ccogen bench` of alltoallv at 2 ranks on drawn contents (`--contents high`);
#   6. tests/torch/test_gpu.py -k violated_require (a debug build's `require` failing on the
#      device is a DeviceError naming the line, the element and the value; 2 ranks, MPS).
# Every stage runs under `timeout`, never past the total; a stage without enough time left
# is SKIPPED.  Logs in $OUT (default v2-logs, 7 files): setup.log, runtime.log (with the
# table runtime.md), moe.log, one-rank.log, bench.log, summary.txt.  Exit 0 when every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-v2-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
TOTAL=${V2_TOTAL:-480}
RANKS=${V2_RANKS:-4}
STEPS=${V2_STEPS:-100}
SUMMARY="$OUT/summary.txt"
source scripts/gpu_stages.sh
stage_table 40

# -- 1. setup ------------------------------------------------------------------------------
{
  date -u; nvidia-smi -L
  $PY -c "import ccogen._ccogen_rt" 2>/dev/null || { echo "building the extension"; build_extension; }
  if ! echo get_default_active_thread_percentage | nvidia-cuda-mps-control >/dev/null 2>&1; then
    nvidia-cuda-mps-control -d; sleep 1
  fi
  echo "setup done after $SECONDS s"
} > "$OUT/setup.log" 2>&1

# -- 2. run-time sizes at 2, 4 and 8 ranks, sanitizer --------------------------------------
b=$(budget_for 300 120)
t0=$SECONDS
if [ "$b" -gt 0 ]; then
  timeout -k 5 "$b" $PY scripts/v2_runtime_mps_run.py --out "$OUT/runtime.md" \
    --work /tmp/ccogen-v2-runtime --total-s $(( b - 110 )) --case-s 60 --sanitizer-s 50 \
    > "$OUT/runtime.log" 2>&1
  rc=$?
  record "run-time matrix + sanitizer" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -c '| PASS |' "$OUT/runtime.md" 2>/dev/null) rows PASS"
else
  record "run-time matrix + sanitizer" SKIPPED 0 "$(left) s left"
fi

# -- 3. the MoE example at RANKS ranks sharing the GPU --------------------------------------
# its kernels (and the one-rank runs' on nccl-lsa) built first, in parallel, into the cache
b=$(budget_for 120 30)
t0=$SECONDS
if [ "$b" -gt 0 ]; then
  timeout -k 5 "$b" $PY scripts/torch_prebuild.py --target nvshmem --ranks "$RANKS" --moe \
    >> "$OUT/setup.log" 2>&1 &
  pid=$!
  timeout -k 5 "$b" $PY scripts/torch_prebuild.py --target nccl-lsa --ranks 1 --moe --dp \
    >> "$OUT/setup.log" 2>&1
  rc=$?
  wait $pid || rc=$?
  record "prebuild (moe x$RANKS nvshmem, x1 nccl-lsa)" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -c '^built' "$OUT/setup.log") lines 'built'"
fi
: > "$OUT/moe.log"
for mode in ${V2_MOE_MODES:-eager graph compile}; do
  flags=(); [ $mode = eager ] || flags=("--$mode")
  torchrun_stage "moe example $RANKS ranks $mode" "$OUT/moe.log" 150 --nproc-per-node "$RANKS" \
    examples/moe_layer.py --shared-gpu "${flags[@]}" --steps "$STEPS"
done

# -- 4. one rank on nccl-lsa (NCCL group, no MPS needed) -------------------------------------
: > "$OUT/one-rank.log"
torchrun_stage "moe example 1 rank nccl-lsa eager" "$OUT/one-rank.log" 90 --nproc-per-node 1 \
  examples/moe_layer.py --k 1 --steps 20
torchrun_stage "dp example 1 rank nccl-lsa eager" "$OUT/one-rank.log" 60 --nproc-per-node 1 \
  examples/dp_allreduce_step.py --steps 20
for args in "alltoallv cap=1024" "moe_dispatch tokens=16 hidden=128 k=1" \
            "moe_combine tokens=16 hidden=128 k=1"; do
  set -- $args
  stem=$1; shift
  params=(); for p in "$@"; do params+=(--param "$p"); done
  b=$(budget_for 60 20)
  if [ "$b" -eq 0 ]; then record "ccogen run $stem x1 nccl-lsa" SKIPPED 0 "$(left) s left"; continue; fi
  t0=$SECONDS
  echo "== ccogen run $stem 1 rank nccl-lsa" >> "$OUT/one-rank.log"
  timeout -k 5 "$b" $PY -m ccogen run "protocols/$stem.cco" --target nccl-lsa --ranks 1 \
    --iters 20 "${params[@]}" -o "/tmp/ccogen-v2-one/$stem" > "$OUT/run.tmp" 2>&1
  rc=$?
  cat "$OUT/run.tmp" >> "$OUT/one-rank.log"; echo "== exit $rc" >> "$OUT/one-rank.log"
  record "ccogen run $stem x1 nccl-lsa" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(tail -n 1 "$OUT/run.tmp" | cut -c1-120)"
  rm -f "$OUT/run.tmp"
done
# -- 5. `ccogen bench` of a run-time protocol on drawn contents (functional: ranks share the GPU)
b=$(budget_for 60 30)
if [ "$b" -gt 0 ]; then
  t0=$SECONDS
  timeout -k 5 "$b" $PY -m ccogen bench protocols/alltoallv.cco --target nvshmem --ranks 2 \
    --sweep cap=4096 --contents high --warmup 1 --iters 5 --epochs-per-graph 2 --no-plot \
    -o /tmp/ccogen-v2-bench > "$OUT/bench.log" 2>&1
  rc=$?
  record "bench alltoallv x2 (contents high)" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -m1 -o 'contents timed: [^)]*)' "$OUT/bench.log")"
else
  record "bench alltoallv x2 (contents high)" SKIPPED 0 "$(left) s left"
fi

# -- 6. a violated `require` seen from PyTorch (last: a trapped kernel may leave MPS unusable)
b=$(budget_for 90 40)
if [ "$b" -gt 0 ]; then
  t0=$SECONDS
  CCOGEN_TEST_MPS=1 CCOGEN_TEST_KEEP_CACHE=1 timeout -k 5 "$b" $PY -m pytest -q -rA \
    -p no:cacheprovider -m gpu tests/torch/test_gpu.py -k violated_require \
    >> "$OUT/one-rank.log" 2>&1
  rc=$?
  record "pytest violated require (2 ranks, MPS)" "$(verdict $rc)" $(( SECONDS - t0 )) \
    "$(grep -m1 -o 'rank 0: DeviceError: .*' "$OUT/one-rank.log" | cut -c1-150)"
else
  record "pytest violated require (2 ranks, MPS)" SKIPPED 0 "$(left) s left"
fi
echo "total $SECONDS s of $TOTAL; exit $STATUS" >> "$SUMMARY"
cat "$SUMMARY"
[ -f "$OUT/runtime.md" ] && cat "$OUT/runtime.md"
exit $STATUS
