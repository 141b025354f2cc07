#!/usr/bin/env bash
# On a GPU machine: re-run the example suite three times against the baselines
# (all must pass), then plant each bug (each must fail, naming the metric that
# caught it).  With --record, first record the baselines on this GPU.
# Logs and kept traces go to OUT (default .gpuprof/verify).
#
#   example_suite/verify_on_gpu.sh [--record] [OUT]
set -u
cd "$(dirname "$0")/.."
record=0
if [ "${1:-}" = "--record" ]; then record=1; shift; fi
out=${1:-.gpuprof/verify}
mkdir -p "$out"
status=0
pytest="python3 -m pytest example_suite -p no:cacheprovider -q"

if [ $record -eq 1 ]; then
  $pytest --gpuprof-update-baseline --gpuprof-keep-traces --gpuprof-output-dir "$out/record" >"$out/record.log" 2>&1
  echo "record baselines: exit $?"
fi
for i in 1 2 3; do
  $pytest --gpuprof >"$out/rerun$i.log" 2>&1
  rc=$?
  echo "re-run $i: exit $rc  ($(tail -1 "$out/rerun$i.log"))"
  [ $rc -eq 0 ] || status=1
done
sed -n '/= gpuprof =/,/^===/p' "$out/rerun3.log"
for bug in item compute_stream pageable extra_kernel fp32; do
  GPUPROF_EXAMPLE_BUG=$bug $pytest --gpuprof --gpuprof-keep-traces --gpuprof-output-dir "$out/$bug" >"$out/$bug.log" 2>&1
  rc=$?
  echo "bug $bug: exit $rc  ($(tail -1 "$out/$bug.log"))"
  grep -E "^(FAILED|  [a-z_]+(\[.*\])?(\.count)?:)" "$out/$bug.log" | cut -c1-150 | head -8
  [ $rc -ne 0 ] || status=1
done
exit $status
