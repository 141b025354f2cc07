#!/usr/bin/env bash
# On a GPU machine: re-run the example suite against its baselines (all must
# pass), then plant each bug (each must fail, naming the metric that caught it).
#
#   example_suite/verify_on_gpu.sh [--record] [--reruns N] [OUT] [-- PYTEST_ARGS...]
#
# --record first records the baselines on this GPU, with one command that runs 3 fresh
# processes (the baselines learn how much each metric moves between processes); PYTEST_ARGS go to every run
# (e.g. -- --gpuprof-nsys --gpuprof-baseline-dir=.gpuprof/nsys-baselines).
# Logs and kept traces go to OUT (default .gpuprof/verify).
set -u
cd "$(dirname "$0")/.."
record=0 reruns=3 out=.gpuprof/verify
while [ $# -gt 0 ]; do
  case "$1" in
    --record) record=1 ;;
    --reruns) reruns=$2; shift ;;
    --) shift; break ;;
    *) out=$1 ;;
  esac
  shift
done
mkdir -p "$out"
status=0
pytest=(python3 -m pytest example_suite -p no:cacheprovider -q --gpuprof "$@")

if [ $record -eq 1 ]; then
  # one command records in 3 fresh processes; --gpuprof-baseline-runs 1: the first replaces
  # what was recorded before, the other two add theirs
  "${pytest[@]}" --gpuprof-update-baseline --gpuprof-baseline-runs 1 --gpuprof-keep-traces \
    --gpuprof-output-dir "$out/record" >"$out/record.log" 2>&1
  echo "record baselines in 3 processes: exit $?  ($(grep -E 'recorded run|[0-9]+ (passed|failed)' "$out/record.log" | tail -3 | tr '\n' ' '))"
fi
for i in $(seq 1 "$reruns"); do
  "${pytest[@]}" --gpuprof-output-dir "$out/rerun$i" >"$out/rerun$i.log" 2>&1
  rc=$?
  echo "re-run $i: exit $rc  ($(grep -E '[0-9]+ (passed|failed)' "$out/rerun$i.log" | tail -1))"
  grep -E "^  [a-z_]+(\[.*\])?(\.count|\.time_us)?:" "$out/rerun$i.log" | cut -c1-200 | head -5
  [ $rc -eq 0 ] || status=1
done
[ "$reruns" -gt 0 ] && grep -E '^(GPU: |test  |--|example_suite/)' "$out/rerun$reruns.log" | head -7
for bug in item compute_stream pageable extra_kernel fp32 spill; do
  GPUPROF_EXAMPLE_BUG=$bug "${pytest[@]}" --gpuprof-keep-traces --gpuprof-output-dir "$out/$bug" >"$out/$bug.log" 2>&1
  rc=$?
  echo "bug $bug: exit $rc  ($(grep -E '[0-9]+ (passed|failed)' "$out/$bug.log" | tail -1))"
  grep -E "^(FAILED|  [a-z_]+(\[.*\])?(\.[a-z_]+)?:)" "$out/$bug.log" | cut -c1-150 | head -8
  [ $rc -ne 0 ] || status=1
done
exit $status
