#!/usr/bin/env bash
# One batched GPU session on a 2-GPU machine (the device tool's nvidia-h200-x2):
# build the extension, run every gpu-marked test (the protocol library on both targets,
# 100 epochs each; the debug hang reports; the runtime's own checks), then
# compute-sanitizer memcheck and racecheck on generated alltoall (1 MiB) and pingpong.
# Logs go to $OUT.  Wheels the machine lacks (lark) are expected in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source scripts/gpu_setup.sh
{
  nvidia-smi -L; nvidia-smi topo -m
  build_extension
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count())"
} 2>&1 | tee "$OUT/setup.log"
PYTEST="$PY -m pytest -v -rA --durations=15 -p no:cacheprovider --timeout=120"
timeout ${PYTEST_BUDGET:-300} $PYTEST -m gpu ${GPU_TESTS:-tests/runtime tests/test_runtime.py} \
  2>&1 | tee "$OUT/pytest.log"
# alltoall at 1 MiB runs on a group of CTAs split per CTA (codegen/ctasplit.py); pingpong
# at its default 8 B takes the LL path (codegen/ll.py).
for p in alltoall pingpong; do
  for tool in memcheck racecheck; do
    for t in ${SAN_TARGETS:-nccl-lsa}; do
      if [ "$SECONDS" -gt "${DEADLINE:-520}" ]; then echo "== skipped $tool $p $t: out of time"; continue; fi
      echo "== compute-sanitizer --tool $tool: $p on $t"
      timeout 45 compute-sanitizer --tool $tool --target-processes all --report-api-errors no \
        $PY -m ccogen run protocols/$p.cco --target $t --ranks 2 --iters 2 \
        $([ $p = alltoall ] && echo --param block=1MiB) 2>&1 | tail -8
    done
  done
done 2>&1 | tee "$OUT/sanitizer.log"
