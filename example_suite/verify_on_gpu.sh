#!/usr/bin/env bash
# On a GPU machine: record the example suite's baselines, re-run the suite three
# times against them (all must pass), then plant each bug (each must fail, naming
# the metric that caught it).  Logs and kept traces go to OUT (default .gpuprof/verify).
#
#   example_suite/verify_on_gpu.sh [OUT]
set -u
cd "$(dirname "$0")/.."
out=${1:-.gpuprof/verify}
mkdir -p "$out"
status=0
pytest="python3 -m pytest example_suite -p no:cacheprovider -q"

$pytest --gpuprof-update-baseline --gpuprof-keep-traces --gpuprof-output-dir "$out/record" >"$out/record.log" 2>&1
echo "record baselines: exit $?"
for i in 1 2 3; do
  $pytest --gpuprof >"$out/rerun$i.log" 2>&1
  rc=$?
  echo "re-run $i: exit $rc  ($(tail -1 "$out/rerun$i.log"))"
  [ $rc -eq 0 ] || status=1
done
for bug in item compute_stream pageable extra_kernel fp32; do
  GPUPROF_EXAMPLE_BUG=$bug $pytest --gpuprof --gpuprof-keep-traces --gpuprof-output-dir "$out/$bug" >"$out/$bug.log" 2>&1
  rc=$?
  echo "bug $bug: exit $rc  ($(tail -1 "$out/$bug.log"))"
  grep -E "^(FAILED|  [a-z_]+(\[.*\])?(\.count)?:)" "$out/$bug.log" | cut -c1-160 | head -8
  [ $rc -ne 0 ] || status=1
done
exit $status
