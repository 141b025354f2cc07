#!/usr/bin/env bash
# Unchanged runs and planted slowdowns of the example suite on every visible GPU at once, for
# the power table (benchmarks/power_table.py judges them again on a CPU; docs/benchmarks.md).
#
#   DEADLINE_S=520 LEVELS="0 0.02 0.03 0.05 0.10" bash benchmarks/power_collect.sh OUTDIR
#
# On each GPU i (one gate each, CUDA_VISIBLE_DEVICES=i): the baselines recorded by one plain
# --gpuprof-update-baseline with GPUPROF_EXAMPLE_SLOWDOWN=0 (three fresh processes), then
# gates with --gpuprof against them, the planted slowdown of each run taken from LEVELS in
# turn (GPU i starting at its i-th level, so that every level runs on every GPU and at
# every moment), until DEADLINE_S seconds from the start.  Each run's results document is
# OUTDIR/gpu<i>/s<level>-<k>.json; the baselines OUTDIR/gpu<i>/baselines.  The two-GPU tests
# and the Triton kernel's (no activation to slow; an Nsight Compute pass every run) are left out.
set -u
out=${1:?OUTDIR}
levels=(${LEVELS:-0 0.02 0.03 0.05 0.10})
deadline=$(( $(date +%s) + ${DEADLINE_S:-520} ))
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
suite=(example_suite -p no:cacheprovider -q --ignore=example_suite/test_fused_norm.py
       --ignore=example_suite/test_distributed.py)
one_gpu() {
  local i=$1 d=$out/gpu$1 k=0
  mkdir -p "$d"
  export CUDA_VISIBLE_DEVICES=$i
  GPUPROF_EXAMPLE_SLOWDOWN=0 python3 -m pytest "${suite[@]}" --gpuprof-update-baseline \
    --gpuprof-baseline-dir="$d/baselines" >"$d/record.log" 2>&1
  echo "gpu $i: recorded ($(tail -n 1 "$d/record.log"))"
  while [ "$(date +%s)" -lt "$deadline" ]; do
    local level=${levels[$(( (k + i) % ${#levels[@]} ))]}
    GPUPROF_EXAMPLE_SLOWDOWN=$level python3 -m pytest "${suite[@]}" --gpuprof --gpuprof-baseline-dir="$d/baselines" \
      --gpuprof-json="$d/s$level-$k.json" --gpuprof-timeline-events=0 >"$d/s$level-$k.log" 2>&1
    echo "gpu $i: run $k, slowdown $level: $(tail -n 1 "$d/s$level-$k.log")"
    k=$((k + 1))
  done
}
for i in $(seq 0 $((gpus - 1))); do one_gpu "$i" & done
wait
