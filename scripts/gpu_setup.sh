# Sourced by scripts/gpu_session.sh and scripts/bench_session.sh, from the repository root
# of a GPU machine (the device tool's nvidia-h200 kinds): the environment every GPU run
# keeps (never NVLink multicast), the wheels the machine lacks (lark, from .whl/), and
# `build_extension`, which builds the native runtime for this machine's Python into ccogen/.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1 CCOGEN_CACHE_DIR=${CCOGEN_CACHE_DIR:-/tmp/ccogen-cache}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=python3

build_extension() {
  cmake -S runtime -B /tmp/ccogen-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$(command -v $PY)" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" \
    >/dev/null && ninja -C /tmp/ccogen-build >/dev/null && cp /tmp/ccogen-build/_ccogen_rt*.so ccogen/
}
