#!/usr/bin/env bash
# Where the time goes, on a 2-GPU machine (the device tool's nvidia-h200-x2), in one command:
#  1. a quick `ccogen bench` of alltoall (both targets, 16 KiB .. 16 MiB) and of pingpong's
#     rounds on nvshmem, generated beside the hand-written reference (the zero-cost rows);
#  2. benchmarks/copy/copy_shape: peer-store bandwidth by launch shape, SM stores and the
#     bulk-copy (TMA) unit, against the copy engine, both directions;
#  3. Nsight Compute (--clock-control none) on copy_shape's kernels (full set, one process);
#  4. Nsight Compute's NVLink section and link counters on copy_shape's kernels;
#  5. Nsight Compute on ONE rank of generated and reference kernels (rank 0 profiled, rank 1
#     plain: a kernel that waits for its peer cannot be replayed, so only metrics that one
#     pass collects; benchmarks/profile/README.md).  (ncu 2025.3.1 on these machines has
#     no multi-process lockstep mode.)
# PROFILE_STEPS picks steps (default "bench copy ncu-copy ncu-nvlink ncu-rank").  Every step
# has a time limit and the script stops starting steps at PROFILE_TOTAL seconds (default
# 560).  Outputs: $OUT/profile.log (everything printed) and $OUT/profile.tgz
# (out/: bench tables, copy_shape tables, ncu reports as text).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-profile-logs}; mkdir -p "$OUT"
P=/tmp/ccogen-profile; rm -rf "$P"; mkdir -p "$P/out"
source scripts/gpu_setup.sh
TOTAL=${PROFILE_TOTAL:-560}
exec > >(tee "$OUT/profile.log") 2>&1
STEPS=" ${PROFILE_STEPS:-bench copy ncu-copy ncu-nvlink ncu-rank} "
left() { echo $(( TOTAL - SECONDS )); }
want() { [[ "$STEPS" == *" $1 "* ]]; }
step() {  # step NAME SECONDS: true when there is time for it
  if [ "$(left)" -lt "$2" ]; then echo "== skipped $1: $(left) s left"; return 1; fi
  echo "== $1 ($(left) s left)"; return 0
}
pack() { tar czf "$OUT/profile.tgz" -C "$P" out; }
trap pack EXIT

nvidia-smi -L; nvidia-smi topo -m
build_extension || echo "extension build failed"
ncu --version | tail -1
nvcc -O3 -std=c++17 -arch=sm_90 -o "$P/copy_shape" benchmarks/copy/copy_shape.cu || echo "copy_shape build failed"

# ---------------------------------------------------------------- 1. quick bench
W="$P/work"
BENCH="$PY -m ccogen bench --ranks 2 --compare none --no-ceiling --no-plot --work $W"
if want bench && step "bench alltoall" 200; then
  for t in nccl-lsa nvshmem; do
    timeout 150 $BENCH protocols/alltoall.cco --target $t --sweep block=16KiB..16MiB \
      -o "$P/out/bench-alltoall-$t" | tail -12
  done
fi
if want bench && step "bench pingpong rounds (nvshmem, nccl-lsa)" 120; then
  for t in nvshmem nccl-lsa; do
    timeout 100 $BENCH protocols/pingpong.cco --target $t --sweep rounds=1,8,64 --param size=8B \
      -o "$P/out/bench-pingpong-$t" | tail -8
  done
fi

# ---------------------------------------------------------------- 2. copy shapes
if want copy && step "copy_shape sm" 90; then
  timeout 120 "$P/copy_shape" sweep sm | tee "$P/out/copy_shape_sm.txt"
fi
if want copy && step "copy_shape tma" 60; then
  timeout 90 "$P/copy_shape" sweep tma | tee "$P/out/copy_shape_tma.txt"
fi

# ---------------------------------------------------------------- 3. ncu, one process
NCU="ncu --clock-control none"
{
  ncu --help | grep -iE -A2 "lockstep|communicator|replay-mode" || true
  ncu --list-sets || true
  ncu --list-sections || true
} > "$P/out/ncu-help.txt" 2>&1
ncu --query-metrics --chip gh100 > "$P/out/ncu-metrics-gh100.txt" 2>&1
N=$((256 << 20))
if want ncu-copy && step "ncu copy kernels" 150; then
  for shape in "slice $N 32 512" "slice $N 128 512" "stride $N 528 512" "tma $N 32 32 32768 4" "tma $N 132 32 32768 4"; do
    name=$(echo "$shape" | awk '{print $1"-"$3"x"$4}')
    timeout 60 $NCU --set full -k regex:^k_ --launch-skip 3 --launch-count 1 \
      "$P/copy_shape" one $shape > "$P/out/ncu-copy-$name.txt" 2>&1
    echo "ncu copy $name: rc $?"; grep -E "GB/s|Duration|Throughput|passes|==ERROR" "$P/out/ncu-copy-$name.txt" | head -12
  done
fi

# ---------------------------------------------------------------- 4. NVLink counters
NVL="nvltx__bytes.sum.per_second,nvltx__bytes_data_user.sum.per_second,nvltx__bytes_data_protocol.sum.per_second,nvltx__bytes.sum.pct_of_peak_sustained_elapsed,nvlrx__bytes.sum.per_second,nvlrx__bytes_data_user.sum,nvlrx__bytes_data_protocol.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,nvltx__cycles_active.avg.pct_of_peak_sustained_elapsed"
if want ncu-nvlink && step "ncu NVLink counters" 90; then
  for shape in "slice $N 128 512" "slice $N 32 512" "stride $N 528 512" "tma $N 64 32 65536 2"; do
    name=$(echo "$shape" | awk '{print $1"-"$3"x"$4}')
    timeout 60 $NCU --section Nvlink --section Nvlink_Tables --section SpeedOfLight --metrics "$NVL" \
      -k regex:^k_ --launch-skip 3 --launch-count 1 "$P/copy_shape" one $shape > "$P/out/ncu-nvlink-$name.txt" 2>&1
    echo "ncu nvlink $name: rc $?"; grep -E "GB/s|nvl|NVL|Duration|passes|==ERROR" "$P/out/ncu-nvlink-$name.txt" | head -24
  done
fi

# ---------------------------------------------------------------- 5. ncu, one rank
# Metrics one pass can collect: the first candidate set that ncu collects in one pass on
# copy_shape (a kernel that needs no peer).
LAUNCH="launch__grid_size,launch__block_size,launch__registers_per_thread"
M="gpu__time_duration.sum,$LAUNCH"
if want ncu-rank; then
  for set in "gpu__time_duration.sum,smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum" \
             "gpu__time_duration.sum,smsp__inst_executed.sum,smsp__cycles_active.avg" \
             "gpu__time_duration.sum,smsp__inst_executed.sum"; do
    $NCU --metrics "$set,$LAUNCH" -k regex:^k_ --launch-skip 3 --launch-count 1 "$P/copy_shape" one slice $((16 << 20)) 32 512 \
      > "$P/out/ncu-passes.txt" 2>&1
    grep -E "pass|ERROR" "$P/out/ncu-passes.txt" | head -3
    if grep -qE -- "- 1 pass" "$P/out/ncu-passes.txt"; then M="$set,$LAUNCH"; break; fi
  done
  echo "one-pass metrics: $M"
  timeout 120 $PY -m ccogen bench protocols/alltoall.cco --target nvshmem --sweep block=16KiB,1MiB --build-only --work "$P/m" -o "$P/m-out" >/dev/null
  timeout 120 $PY -m ccogen bench protocols/alltoall.cco --target nccl-lsa --sweep block=16KiB --build-only --work "$P/m" -o "$P/m-out" >/dev/null
  timeout 120 $PY -m ccogen bench protocols/pingpong.cco --target nvshmem --sweep rounds=8 --param size=8B --build-only --work "$P/m" -o "$P/m-out" >/dev/null
  timeout 120 $PY -m ccogen bench protocols/pingpong.cco --target nccl-lsa --sweep rounds=8 --param size=8B --build-only --work "$P/m" -o "$P/m-out" >/dev/null
fi

profile_rank() {  # profile_rank TARGET PROTOCOL PARAM VALUE IMPL PARAMS...
  local t=$1 proto=$2 sweep=$3 value=$4 impl=$5; shift 5
  local dir="$P/m/$t/$proto-$sweep/$value/$impl" name="$proto-$value-$t-$impl" id="prof$RANDOM"
  [ -d "$dir" ] || { echo "no $dir"; return; }
  CCOGEN_RUN_ID=$id RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 timeout 60 \
    $PY benchmarks/profile/run_rank.py "$dir" protocols/$proto.cco "$@" --iters 12 > "$P/out/rank1-$name.txt" 2>&1 &
  local peer=$!
  CCOGEN_RUN_ID=$id RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 timeout 60 \
    $NCU --metrics "$M" -k "regex:^(ccogen_|ref_)" --launch-skip 8 --launch-count 3 \
    $PY benchmarks/profile/run_rank.py "$dir" protocols/$proto.cco "$@" --iters 12 > "$P/out/ncu-rank0-$name.txt" 2>&1
  echo "ncu rank 0 $name: rc $?"; wait $peer
  grep -E "gpu__time_duration|inst_executed|cycles_active|local_op|registers|ERROR|FAIL|held" "$P/out/ncu-rank0-$name.txt" | head -16
}
if want ncu-rank && step "ncu one rank" 60; then
  for impl in generated reference; do
    for v in 16384 1048576; do
      step "rank profile alltoall $v $impl nvshmem" 20 && profile_rank nvshmem alltoall block $v $impl --param block=$v
    done
    step "rank profile alltoall 16384 $impl nccl-lsa" 20 && profile_rank nccl-lsa alltoall block 16384 $impl --param block=16384
    step "rank profile pingpong nvshmem $impl" 20 && profile_rank nvshmem pingpong rounds 8 $impl --param rounds=8 --param size=8
    step "rank profile pingpong nccl-lsa $impl" 20 && profile_rank nccl-lsa pingpong rounds 8 $impl --param rounds=8 --param size=8
  done
fi
echo "profile session done after $SECONDS s"
