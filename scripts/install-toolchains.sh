#!/usr/bin/env bash
# Install the toolchains `ccogen build` uses for the seed targets (no GPU needed):
#
#   mori-sdma          Debian clang-22 + lld-22 (HIP device code for gfx942/gfx950) and the
#                      headers of the amd-mori 1.2.4 wheel (mori/cco/cco.hpp)
#   nccl-cft, nvshmem  the CUDA 13.5 compiler wheels (nvcc >= 13.3 is needed for real CFT
#   at sm_100          code) in their own prefix, so the system nvcc is left alone; and the
#                      NCCL 2.32.3 / NVSHMEM 3.8.0 wheels (headers and libraries) in their
#                      own prefixes too: `ccogen build` looks there before the environment's
#                      packages, which torch pins lower (torch 2.14.1: NCCL 2.30.7, NVSHMEM
#                      3.4.5; nccl-cft needs NCCL >= 2.31, counted writes NVSHMEM 3.8)
#
# Everything lands under $CCOGEN_TOOLCHAINS (default ~/.cache/ccogen/toolchains), where
# ccogen.toolchains finds it.  Idempotent: a component already present is skipped, so a
# second run takes about a second.  Set CCOGEN_SKIP_TOOLCHAINS=1 to skip it entirely.
#
#   bash scripts/install-toolchains.sh
set -euo pipefail

if [ "${CCOGEN_SKIP_TOOLCHAINS:-0}" = "1" ]; then
  echo "install-toolchains: skipped (CCOGEN_SKIP_TOOLCHAINS=1)"
  exit 0
fi

ROOT="${CCOGEN_TOOLCHAINS:-$HOME/.cache/ccogen/toolchains}"
MORI_VERSION=1.2.4
CUDA_VERSION=13.5.37
CCCL_VERSION=13.3.5.0.6
NCCL_VERSION=2.32.3      # ccogen/toolchains/locate.py ENGINE_WHEELS names these directories
NVSHMEM_VERSION=3.8.0
MORI_DIR="$ROOT/mori-$MORI_VERSION"
CUDA_DIR="$ROOT/cuda-$CUDA_VERSION"
PYTHON="${PYTHON:-python3}"
mkdir -p "$ROOT"
start=$(date +%s)

retry() {  # retry CMD...: three attempts, for flaky registries
  local n
  for n in 1 2 3; do
    if "$@"; then return 0; fi
    echo "install-toolchains: attempt $n of '$*' failed" >&2
    sleep $((n * 3))
  done
  return 1
}

# --- clang-22 / lld-22 (Debian 12 bookworm-security) -------------------------------------
if command -v clang-22 >/dev/null && command -v ld.lld-22 >/dev/null; then
  echo "install-toolchains: clang-22 present ($(clang-22 --version | head -1))"
elif command -v apt-get >/dev/null && [ "$(id -u)" = "0" ]; then
  echo "install-toolchains: installing clang-22 lld-22 from Debian"
  retry apt-get update -qq
  retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    clang-22 lld-22 >/dev/null
else
  echo "install-toolchains: clang-22 missing and apt-get unavailable (not root?):" \
       "install clang-22 and lld-22 yourself" >&2
fi

# --- amd-mori headers ----------------------------------------------------------------------
if [ -f "$MORI_DIR/include/mori/cco/cco.hpp" ]; then
  echo "install-toolchains: mori $MORI_VERSION headers present"
else
  echo "install-toolchains: fetching the amd-mori $MORI_VERSION wheel (headers only)"
  tmp=$(mktemp -d)
  retry "$PYTHON" -m pip download -q --no-deps -d "$tmp" "amd-mori==$MORI_VERSION" \
    --python-version 3.12 --platform manylinux_2_39_x86_64 --only-binary=:all:
  "$PYTHON" - "$tmp" "$MORI_DIR" <<'EOF'
import pathlib, shutil, sys, zipfile
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("amd_mori-*.whl"))
prefix = "mori/_jit-sources/include/"
staging = tmp / "unpacked"
with zipfile.ZipFile(wheel) as z:
    z.extractall(staging, [n for n in z.namelist() if n.startswith(prefix)])
shutil.rmtree(dest, ignore_errors=True)
dest.mkdir(parents=True)
shutil.move(str(staging / prefix), str(dest / "include"))
(dest / "SOURCE").write_text(f"{wheel.name}: {prefix}\n")
EOF
  rm -rf "$tmp"
fi

# --- CUDA 13.5 compiler wheels -------------------------------------------------------------
if [ -x "$CUDA_DIR/nvidia/cu13/bin/nvcc" ] && [ -f "$CUDA_DIR/.complete" ]; then
  echo "install-toolchains: nvcc $CUDA_VERSION present"
else
  echo "install-toolchains: installing the CUDA $CUDA_VERSION compiler wheels into $CUDA_DIR"
  rm -rf "$CUDA_DIR"
  retry "$PYTHON" -m pip install -q --no-deps --target "$CUDA_DIR" \
    "nvidia-cuda-nvcc==$CUDA_VERSION" "nvidia-cuda-crt==$CUDA_VERSION" \
    "nvidia-nvvm==$CUDA_VERSION" "nvidia-cuda-runtime==$CUDA_VERSION" \
    "nvidia-cuda-cccl==$CCCL_VERSION"
  touch "$CUDA_DIR/.complete"
fi

# --- NCCL / NVSHMEM wheels for `ccogen build` (apart from the environment's packages) -------
engine_wheel() {  # engine_wheel DIR-NAME PACKAGE==VERSION HEADER
  local dir="$ROOT/$1"
  if [ -f "$dir/.complete" ] && [ -f "$dir/$3" ]; then
    echo "install-toolchains: $2 present"
  else
    echo "install-toolchains: installing $2 into $dir"
    rm -rf "$dir"
    retry "$PYTHON" -m pip install -q --no-deps --target "$dir" "$2"
    touch "$dir/.complete"
  fi
}
engine_wheel "nccl-$NCCL_VERSION" "nvidia-nccl-cu13==$NCCL_VERSION" nvidia/nccl/include/nccl.h
engine_wheel "nvshmem-$NVSHMEM_VERSION" "nvidia-nvshmem-cu13==$NVSHMEM_VERSION" \
  nvidia/nvshmem/include/non_abi/nvshmem_version.h

echo "install-toolchains: done in $(( $(date +%s) - start )) s ($ROOT)"
