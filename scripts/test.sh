#!/usr/bin/env bash
# Install ccogen (editable, with the test extra), run ruff and mypy (both must be clean),
# then the test suite.
# This is THE test command: the README and .ci/run both call it.
#   bash scripts/test.sh [extra pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Install only when the environment does not hold this checkout's install: a fresh clone,
# another checkout, or a change to what the install builds or declares (pyproject.toml,
# runtime/).  Python sources need no reinstall (the editable install serves them from
# the tree); an unchanged `pip install -e` still resolves and rebuilds for ~15 CPU s.
stamp="$(python -c 'import sys; print(sys.prefix)')/.ccogen-test-install"
want="$( (pwd; cat pyproject.toml; find runtime -type f -print0 | LC_ALL=C sort -z \
          | xargs -0 sha256sum) | sha256sum)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! python -c '
import pathlib, sys
import ccogen, ccogen._ccogen_rt
sys.exit(pathlib.Path(ccogen.__file__).resolve().parent != pathlib.Path("ccogen").resolve())
' 2>/dev/null; then
  rm -f "$stamp"
  python -m pip install -e '.[test,toolchain]'
  echo "$want" > "$stamp"
else
  echo "test.sh: ccogen already installed from this tree (pyproject.toml and runtime/ unchanged)"
fi
# clang-22 + mori headers (mori-sdma) and nvcc 13.5 (nccl-cft, nvshmem sm_100); fast when present
bash scripts/install-toolchains.sh
echo "test.sh: ruff check"
python -m ruff check .
echo "test.sh: mypy"
python -m mypy
# on every core (pytest-xdist): the suite is CPU-bound (instances, simulations, nvcc and
# clang builds); a test that needs a fixed order within its file states it itself
python -m pytest -q -n auto "$@"
