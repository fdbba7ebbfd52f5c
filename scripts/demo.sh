#!/usr/bin/env bash
# The main job, end to end: install, lint the all-to-all example, generate NCCL LSA code.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -e .
ccogen lint protocols/alltoall.cco
ccogen compile protocols/alltoall.cco --target nccl-lsa -o build/demo
