#!/usr/bin/env bash
# Install ccogen (editable, with the test extra), run ruff and mypy (both must be clean),
# then the test suite.
# This is THE test command: the README and .ci/run both call it.
#   bash scripts/test.sh [extra pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -e '.[test,toolchain]'
# clang-22 + mori headers (mori-sdma) and nvcc 13.5 (nccl-cft, nvshmem sm_100); fast when present
bash scripts/install-toolchains.sh
echo "test.sh: ruff check"
python -m ruff check .
echo "test.sh: mypy"
python -m mypy
# on every core (pytest-xdist): the suite is CPU-bound (instances, simulations, nvcc and
# clang builds); a test that needs a fixed order within its file states it itself
python -m pytest -q -n auto "$@"
