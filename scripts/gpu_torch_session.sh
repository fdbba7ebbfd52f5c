#!/usr/bin/env bash
# The PyTorch binding on ONE GPU shared by several NVSHMEM ranks under CUDA MPS (the device
# tool's nvidia-h200), in one time-bounded command (TORCH_TOTAL seconds, default 280):
#   1. prebuild (parallel): generated files, cubins, shim (scripts/torch_prebuild.py);
#   2. examples/alltoall_step.py under torchrun at each of RANKS (default "2 4"), gloo
#      group, nvshmem engine: eager steps, 100 CUDA-graph replays, torch.compile, overhead;
#   3. the debug-build hang seen from PyTorch (tests/torch/gpu_device_error.py, 2 ranks; last: a
#      trapped kernel may leave the MPS server unusable).
# Expects: the extension built (scripts/gpu_setup.sh build_extension) and MPS running.
# Logs in $OUT (default torch-logs): setup.log, run-N.log, hang.log, overhead.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-torch-logs}; mkdir -p "$OUT"
TOTAL=${TORCH_TOTAL:-280}
PY=${PY:-python3}
left() { echo $(( TOTAL - SECONDS )); }
STATUS=0
{
  date -u; nvidia-smi -L
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.device_count(), 'GPU')"
  echo "MPS: $(echo get_default_active_thread_percentage | nvidia-cuda-mps-control 2>&1)"
  timeout -k 5 $(( $(left) - 150 )) $PY scripts/torch_prebuild.py --target nvshmem \
    --ranks "$(echo ${RANKS:-2 4} | tr ' ' ,)" || STATUS=1
  echo "setup done after $SECONDS s"
} > "$OUT/setup.log" 2>&1
port=29511
first=1
for n in ${RANKS:-2 4}; do
  # the first run leaves room for a later one (60 s) and the hang (25 s)
  if [ -n "$first" ]; then budget=$(( $(left) - 90 )); else budget=$(( $(left) - 30 )); fi
  first=
  [ "$budget" -gt 100 ] && budget=100
  if [ "$budget" -lt 30 ]; then echo "skipped: $(left) s left" > "$OUT/run-$n.log"; STATUS=1; continue; fi
  echo "== $n ranks, up to $budget s" > "$OUT/run-$n.log"
  timeout -k 5 "$budget" $PY -m torch.distributed.run --nproc-per-node "$n" \
    --master-port $((port++)) examples/alltoall_step.py --shared-gpu \
    --out "$OUT/overhead.txt" >> "$OUT/run-$n.log" 2>&1
  rc=$?; echo "== exit $rc after $SECONDS s" >> "$OUT/run-$n.log"
  [ $rc -eq 0 ] || STATUS=1
done
budget=$(( $(left) - 5 ))
if [ "$budget" -ge 20 ]; then
  timeout -k 5 "$budget" $PY -m torch.distributed.run --nproc-per-node 2 \
    --master-port $((port++)) tests/torch/gpu_device_error.py --shared-gpu > "$OUT/hang.log" 2>&1
  echo "== exit $? after $SECONDS s" >> "$OUT/hang.log"
  grep -q "rank 1: DeviceError: .*wait at hang_generated.cco:12" "$OUT/hang.log" || STATUS=1
else
  echo "skipped: $(left) s left" > "$OUT/hang.log"; STATUS=1
fi
exit $STATUS
