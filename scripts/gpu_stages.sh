# Sourced by the time-bounded GPU session scripts (gpu_dp_session.sh, gpu_v2_session.sh),
# after they set TOTAL (the session's seconds), SUMMARY (the table's file) and OUT: each
# stage gets its seconds from `budget_for`, runs under `timeout`, and reports a row with
# `record`; STATUS ends 1 when a stage did not pass.
STATUS=0
STAGE_PORT=${STAGE_PORT:-29741}
left() { echo $(( TOTAL - SECONDS )); }
stage_table() {  # stage_table WIDTH: the table's header row
  STAGE_WIDTH=$1
  printf "| %-${STAGE_WIDTH}s | %-7s | %5s | %s\n" stage result s detail > "$SUMMARY"
}
record() {  # record STAGE RESULT SECONDS DETAIL
  printf "| %-${STAGE_WIDTH:-40}s | %-7s | %5s | %s\n" "$1" "$2" "$3" "$4" >> "$SUMMARY"
  case $2 in PASS) ;; *) STATUS=1 ;; esac
}
budget_for() {  # budget_for CAP MIN: seconds for a stage (0: skip it)
  local b=$(( $(left) - 5 ))
  [ "$b" -gt "$1" ] && b=$1
  [ "$b" -lt "$2" ] && b=0
  echo $b
}
verdict() { case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; *) echo FAIL ;; esac; }
torchrun_stage() {  # torchrun_stage LABEL LOG CAP TORCHRUN-ARGS...: an example, appended to LOG
  local label=$1 log=$2 cap=$3 b t0 rc result line
  shift 3
  b=$(budget_for "$cap" 30)
  if [ "$b" -eq 0 ]; then record "$label" SKIPPED 0 "$(left) s left"; return; fi
  echo "== $label: up to $b s: $*" >> "$log"
  t0=$SECONDS
  timeout -k 5 "$b" $PY -m torch.distributed.run --master-port $((STAGE_PORT++)) "$@" \
    > "$OUT/example.tmp" 2>&1
  rc=$?
  cat "$OUT/example.tmp" >> "$log"
  echo "== exit $rc after $(( SECONDS - t0 )) s" >> "$log"
  result=$(verdict $rc)
  [ "$result" = PASS ] && ! grep -q "^RESULT: PASS" "$OUT/example.tmp" && result=FAIL
  line=$(grep -E "^(eager|graph|compile)[^:]*: " "$OUT/example.tmp" | head -n 1)
  [ -n "$line" ] || line=$(grep -E "MISMATCH|Error" "$OUT/example.tmp" | head -n 1)
  record "$label" "$result" $(( SECONDS - t0 )) "${line:0:150}"
  rm -f "$OUT/example.tmp"
}
