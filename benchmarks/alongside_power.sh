#!/usr/bin/env bash
# The base revision measured alongside, for the power table (docs/benchmarks.md): on every
# GPU at once (the indices CUDA_VISIBLE_DEVICES names, else all), a base copy of the example
# suite and a head copy that plants a slowdown as a commit would (the default of
# GPUPROF_EXAMPLE_SLOWDOWN in its conftest.py, never the environment, which both sides'
# processes would see), gated with --gpuprof-base against no stored baseline (every test
# judged against one base process, its time failures decided by base/head pairs), the head's
# slowdown taken from LEVELS in turn (GPU i starting at its i-th),
# until DEADLINE_S seconds from the start.
#
#   DEADLINE_S=500 LEVELS="0 0.03" TESTS="cnn or transformer" bash benchmarks/alongside_power.sh OUT [PYTEST_ARGS...]
#
# PYTEST_ARGS go to every gate (--gpuprof-kernel-time-tolerance=0.02, say).  Each run's results
# document is OUT/gpu<i>/s<level>-<k>.json beside its log; benchmarks/power_table.py --alongside
# tables them on a CPU.
set -u
out=$(realpath -m "${1:?OUTDIR}")
shift
levels=(${LEVELS:-0 0.03})
deadline=$(( $(date +%s) + ${DEADLINE_S:-500} ))
# the GPUs CUDA_VISIBLE_DEVICES names, else every GPU nvidia-smi lists
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then gpus=(${CUDA_VISIBLE_DEVICES//,/ }); else gpus=($(nvidia-smi --query-gpu=index --format=csv,noheader)); fi
work=$(mktemp -d /tmp/alongside-XXXX)
one_gpu() {
  local i=$1 d=$out/gpu$1 k=0 side
  shift
  mkdir -p "$d/none"
  for side in base head; do
    mkdir -p "$work/$side$i"
    cp -r pyproject.toml example_suite "$work/$side$i/"
    sed -i 's/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN"[^)]*)/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN", "0")/' \
      "$work/$side$i/example_suite/conftest.py"
  done
  export CUDA_VISIBLE_DEVICES=$i
  while [ "$(( $(date +%s) + 60 ))" -lt "$deadline" ]; do
    local level=${levels[$(( (k + i) % ${#levels[@]} ))]}
    sed -i "s/os.environ.get(\"GPUPROF_EXAMPLE_SLOWDOWN\"[^)]*)/os.environ.get(\"GPUPROF_EXAMPLE_SLOWDOWN\", \"$level\")/" \
      "$work/head$i/example_suite/conftest.py"
    (cd "$work/head$i" && timeout $(( deadline - $(date +%s) )) python3 -m pytest example_suite -p no:cacheprovider -q \
      -k "${TESTS:-not distributed}" --ignore=example_suite/test_distributed.py --gpuprof \
      --gpuprof-base="$work/base$i" --gpuprof-baseline-dir="$d/none" --gpuprof-json="$d/s$level-$k.json" \
      --gpuprof-timeline-events=0 "$@") >"$d/s$level-$k.log" 2>&1
    echo "gpu $i: run $k, slowdown $level: exit $?: $(tail -n 1 "$d/s$level-$k.log")"
    grep -E "^gpuprof: .*: pair " "$d/s$level-$k.log" | cut -c1-220
    k=$((k + 1))
  done
}
unset GPUPROF_EXAMPLE_SLOWDOWN
for i in "${gpus[@]}"; do one_gpu "$i" "$@" & done
wait
rm -rf "$work"
