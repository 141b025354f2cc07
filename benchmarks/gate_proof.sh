#!/usr/bin/env bash
# The device runs behind the gate's figures in docs/benchmarks.md, stage by stage (each
# fits one 10-minute device call).  Every stage writes under OUT; nothing is judged here
# that cannot be judged again from OUT on a CPU (benchmarks/gate_noise.py table).
#
#   benchmarks/gate_proof.sh machine  OUT         probes in 5 fresh processes; the observer effect
#   benchmarks/gate_proof.sh fixtures OUT         the small traces tests/ replays (record_traces.py)
#   benchmarks/gate_proof.sh aa OUT RUNS          baselines with one command, 3 fresh processes (unless OUT/aa/baselines
#                                                 exists), one run keeping its traces, then RUNS runs
#   benchmarks/gate_proof.sh planted OUT [BUG..]  each planted bug (or those named) once against OUT/aa/baselines
#   benchmarks/gate_proof.sh nsys OUT             the launch-bound test under Nsight Systems, recorded
#                                                 in 2 processes and judged in a third ($GPUPROF_NSYS)
#   benchmarks/gate_proof.sh sweep OUT RUNS S...  baselines with the slowdown code, RUNS runs per slowdown S
#
# Against the base revision measured alongside (docs/benchmarks.md): BASE (default
# /tmp/gpuprof-base) is a copy of this tree made by ab-base before the head is changed; a
# head is this tree with one change made as a commit makes it (a default in
# example_suite/conftest.py), never an environment variable.  The shipped baselines are
# an H200's.
#   benchmarks/gate_proof.sh ab-base OUT             copy this tree to BASE
#   benchmarks/gate_proof.sh ab-record OUT           baselines with one --gpuprof-update-baseline (3 processes) in
#                                                    OUT/baselines (then give the machine back: judge elsewhere)
#   benchmarks/gate_proof.sh ab-gate OUT RUNS        the gate workflow's command with BASE against OUT/baselines, on
#                                                    a head that differs from BASE in a comment
#   benchmarks/gate_proof.sh ab-nobase OUT RUNS      the same against no stored baseline (every test against BASE)
#   benchmarks/gate_proof.sh ab-plain OUT RUNS       plain `pytest example_suite --gpuprof` against OUT/baselines: the
#                                                    cost reference (median of RUNS)
#   benchmarks/gate_proof.sh ab-planted OUT BUG...   each planted bug as a commit, judged against BASE
#   benchmarks/gate_proof.sh ab-slowdown OUT RUNS [K]  the 10% activation slowdown as a commit (BASE at 0, head at
#                                                    0.10), judged against BASE alone; K: a -k expression
# The ab-gate, ab-nobase, ab-plain and ab-slowdown runs are numbered from FIRST (default 0: a
# later call on the same machine goes on with FIRST=N), and no A/B run (ab-planted's too)
# starts once BUDGET_S seconds have passed since the stage began (a device call's limit).
set -u
cd "$(dirname "$0")/.."
stage=$1 out=$2
shift 2
mkdir -p "$out"
py=${PYTHON:-python3}
suite=(-m pytest example_suite -p no:cacheprovider -q)
base=${BASE:-/tmp/gpuprof-base}
conftest=example_suite/conftest.py
# the two-GPU tests need two GPUs: a strict gate on a one-GPU machine would fail on them, skipped,
# so such a machine leaves their file out of the A/B runs, as a user's one-GPU runner would
one_gpu=()
[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] || one_gpu=(--ignore=example_suite/test_distributed.py)
gate=(-m pytest example_suite -p no:cacheprovider -ra --gpuprof --gpuprof-strict --gpuprof-base "$base"
      --gpuprof-base-python "$py" "${one_gpu[@]}")

spent() {  # another run fits in BUDGET_S seconds since the stage began (default: no limit)
  [ $SECONDS -lt "${BUDGET_S:-1000000}" ] && return 0
  echo "stopped: BUDGET_S=$BUDGET_S seconds spent"
  return 1
}

run() {  # NAME ARGS...: one run, its exit and time, its last line, what the pairs said
  local name=$1
  shift
  local start=$SECONDS
  "$py" "$@" --gpuprof-json="$out/$name.json" >"$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s ($(tail -n 1 "$out/$name.log" | tr -d '='))"
  grep -E "^FAILED|^gpuprof: .*: pair " "$out/$name.log" | cut -c1-200
}

case $stage in
machine)
  for i in 1 2 3 4 5; do
    $py -c 'import json; from pytest_gpuprof.capture.probes import measure_machine; print(json.dumps(measure_machine()))' \
      | tee -a "$out/probes.jsonl"
  done
  $py benchmarks/observer_effect.py --json "$out/observer.json"
  ;;
fixtures)
  mkdir -p "$out/fixtures"
  $py tests/data/record_traces.py --out "$out/fixtures" nested host
  for i in 0 1 2 3; do $py tests/data/record_traces.py --out "$out/fixtures" --tag "p$i" launch; done
  $py tests/data/record_traces.py --out "$out/fixtures" --tag busy --busy-cpu launch
  # tests/data/host/h100_*: six processes (the slowest host's and a fast one's kept), host work
  for i in 4 5; do $py tests/data/record_traces.py --out "$out/fixtures" --tag "p$i" launch; done
  $py tests/data/record_traces.py --out "$out/fixtures" --tag overhead --host-overhead 2000 launch
  ls -la "$out/fixtures"
  ;;
aa)
  runs=$1
  if [ ! -d "$out/aa/baselines" ]; then
    # one command: the baselines recorded in 3 fresh processes (--gpuprof-record-processes)
    $py "${suite[@]}" --gpuprof-update-baseline --gpuprof-baseline-dir="$out/aa/baselines" >"$out/aa-record.log" 2>&1
    echo "baselines recorded in 3 processes: exit $? ($(tail -1 "$out/aa-record.log"))"
    $py "${suite[@]}" --gpuprof --gpuprof-baseline-dir="$out/aa/baselines" --gpuprof-keep-traces \
      --gpuprof-output-dir="$out/ship" --gpuprof-json="$out/aa/ship.json" >"$out/aa-ship.log" 2>&1
    echo "run keeping traces: exit $? ($(tail -1 "$out/aa-ship.log"))"
  fi
  $py benchmarks/gate_noise.py aa --runs "$runs" --out "$out/aa" --budget-s "${BUDGET_S:-500}"
  ;;
planted)
  bugs=("$@")
  [ ${#bugs[@]} -gt 0 ] || bugs=(item compute_stream pageable extra_kernel fp32 host_overhead)
  for bug in "${bugs[@]}"; do
    GPUPROF_EXAMPLE_BUG=$bug $py "${suite[@]}" --gpuprof --gpuprof-baseline-dir="$out/aa/baselines" \
      --gpuprof-keep-traces --gpuprof-output-dir="$out/planted/$bug" --gpuprof-json="$out/planted/$bug.json" \
      >"$out/planted-$bug.log" 2>&1
    echo "bug $bug: exit $? ($(tail -1 "$out/planted-$bug.log"))"
    grep -E "^(FAILED|  [a-z_]+(\[.*\])?(\.count|\.time_us)?:)" "$out/planted-$bug.log" | cut -c1-160 | head -6
  done
  ;;
nsys)
  nsys=(--gpuprof-nsys --gpuprof-nsys-path="${GPUPROF_NSYS:?set GPUPROF_NSYS to the nsys binary}"
        --gpuprof-baseline-dir="$out/nsys/baselines" --gpuprof-output-dir="$out/nsys/output")
  $py -m pytest example_suite/test_launch_bound.py -p no:cacheprovider -q "${nsys[@]}" --gpuprof-update-baseline \
    --gpuprof-record-processes="${NSYS_RECORDS:-2}" >"$out/nsys-record.log" 2>&1
  echo "nsys baselines recorded in ${NSYS_RECORDS:-2} processes: exit $?"
  $py -m pytest example_suite/test_launch_bound.py -p no:cacheprovider -q "${nsys[@]}" \
    --gpuprof-json="$out/nsys/judged.json" >"$out/nsys-judge.log" 2>&1
  echo "nsys judged run: exit $?"; tail -4 "$out/nsys-judge.log"
  rm -f "$out"/nsys/output/nsys/*.nsys-rep "$out"/nsys/output/nsys/*.sqlite  # they hold the environment
  ;;
sweep)
  runs=$1
  shift
  args=()
  for s in "$@"; do args+=(--slowdown "$s"); done
  $py benchmarks/gate_noise.py sweep --runs "$runs" "${args[@]}" --out "${SWEEP_DIR:-$out/sweep}" --budget-s "${BUDGET_S:-540}"
  ;;
ab-base)
  rm -rf "$base" && mkdir -p "$base"
  cp -r pytest_gpuprof example_suite baselines pyproject.toml "$base/"
  ;;
ab-record)
  "$py" -m pytest example_suite -p no:cacheprovider -q --gpuprof-update-baseline \
    --gpuprof-baseline-dir="$out/baselines" >"$out/record.log" 2>&1
  echo "record: exit $? ($(tail -n 1 "$out/record.log"))"
  ;;
ab-gate | ab-nobase | ab-plain)
  grep -q "only this comment differs" example_suite/test_moe.py || echo "# head: only this comment differs" >>example_suite/test_moe.py
  for i in $(seq "${FIRST:-0}" $((${FIRST:-0} + $1 - 1))); do
    spent || break
    case $stage in
    ab-gate) run "gate$i" "${gate[@]}" --gpuprof-baseline-dir="$out/baselines" ;;
    ab-nobase) run "nobase$i" "${gate[@]}" --gpuprof-baseline-dir="$out/none" ;;
    ab-plain) run "plain$i" -m pytest example_suite -p no:cacheprovider -ra --gpuprof --gpuprof-baseline-dir="$out/baselines" \
                "${one_gpu[@]}" ;;
    esac
  done
  ;;
ab-planted)
  for bug in "$@"; do
    spent || break
    sed -i "s/os.environ.get(\"GPUPROF_EXAMPLE_BUG\", \"[a-z_]*\")/os.environ.get(\"GPUPROF_EXAMPLE_BUG\", \"$bug\")/" $conftest
    run "bug_$bug" "${gate[@]}" --gpuprof-baseline-dir="$out/none"
  done
  sed -i 's/os.environ.get("GPUPROF_EXAMPLE_BUG", "[a-z_]*")/os.environ.get("GPUPROF_EXAMPLE_BUG", "")/' $conftest
  ;;
ab-slowdown)
  runs=$1 pick=${2:-}
  sed -i 's/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN"[^)]*)/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN", "0.10")/' $conftest
  sed -i 's/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN"[^)]*)/os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN", "0")/' "$base/$conftest"
  for i in $(seq "${FIRST:-0}" $((${FIRST:-0} + runs - 1))); do
    spent || break
    run "slow$i" "${gate[@]}" --gpuprof-baseline-dir="$out/none" ${pick:+-k "$pick"}
  done
  ;;
*)
  echo "unknown stage $stage" >&2
  exit 2
  ;;
esac
