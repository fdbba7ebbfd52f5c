#!/usr/bin/env bash
# The runtime's GPU checks, for a machine with 2 NVIDIA GPUs, nvcc and the nvidia-nccl-cu13 /
# nvidia-nvshmem-cu13 packages (the device tool's nvidia-h200-x2 image has all three).
# Builds the extension with CMake into the source tree (no pip install), runs the GPU tests
# of tests/runtime, a compute-sanitizer pass over a 2-process run, and `ccogen run` on a few
# protocols.  Logs go to $OUT (or ./gpu-logs).
#   bash scripts/gpu_runtime_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1 CCOGEN_CACHE_DIR=${CCOGEN_CACHE_DIR:-/tmp/ccogen-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
{
  nvidia-smi -L; nvidia-smi topo -m
  $PY -c "import nvidia.nccl, nvidia.nvshmem; print('nccl/nvshmem packages found')"
  cmake -S runtime -B /tmp/ccogen-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$(command -v $PY)" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" \
    >/dev/null && ninja -C /tmp/ccogen-build >/dev/null && cp /tmp/ccogen-build/_ccogen_rt*.so ccogen/
  $PY -c "from ccogen.rt import native as r; print('devices', r.device_count(), r.compute_capability(0))"
} 2>&1 | tee "$OUT/setup.log"
PYTEST="$PY -m pytest -v -rA --durations=0 -p no:cacheprovider --timeout=150"
# the watchdog test first on idle GPUs, then everything (it runs again after the hang tests)
timeout 100 $PYTEST tests/runtime/test_gpu.py -k watchdog 2>&1 | tee "$OUT/pytest-watchdog.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/pytest-watchdog.log"
timeout 330 $PYTEST ${GPU_TESTS:-tests/runtime tests/test_runtime.py} 2>&1 | tee "$OUT/pytest.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/pytest.log"
for d in ${SAN_DIRS:-nccl_putsig nvshmem_putsig}; do  # memcheck follows the spawned ranks
  SAN="from ccogen.rt import run_manifest; print(run_manifest('tests/runtime/data/$d', iters=3).format())"
  timeout 80 compute-sanitizer --tool memcheck --target-processes all --report-api-errors no $PY -c "$SAN" 2>&1 | tail -25
done | tee "$OUT/sanitizer.log"
[ -n "${SKIP_CLI:-}" ] && exit 0
for t in nccl-lsa nvshmem; do  # nvshmem cubins take ~20 s to build
  for p in pingpong alltoall; do
    echo "== ccogen run protocols/$p.cco --target $t"
    timeout $([ $t = nvshmem ] && echo 60 || echo 30) \
      $PY -m ccogen run protocols/$p.cco --target $t --ranks 2 --iters 20 2>&1 | tail -20
    echo "exit ${PIPESTATUS[0]}"
  done
done | tee "$OUT/cli.log"
