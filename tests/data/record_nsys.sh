#!/usr/bin/env bash
# Record the small Nsight Systems reports the nsys tests read (run on a CUDA GPU),
# with the reference numbers of `nsys stats` beside them.
#
#   NSYS=/path/to/nsys tests/data/record_nsys.sh [OUT [WORKLOAD ...]]
#   (default OUT: tests/data/nsys; default workloads: overlap sync graph)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/nsys}
shift || true
workloads=${*:-overlap sync graph}
nsys=${NSYS:-nsys}
mkdir -p "$out"
for w in $workloads; do
  "$nsys" profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-graph-trace=node \
    --capture-range=cudaProfilerApi \
    --capture-range-end=stop --force-overwrite=true -o "$out/$w" python3 "$here/record_traces.py" --nvtx "$w"
  "$nsys" export --type sqlite --force-overwrite=true -o "$out/$w.sqlite" "$out/$w.nsys-rep"
  for r in cuda_gpu_kern_sum cuda_gpu_mem_time_sum cuda_gpu_mem_size_sum; do
    "$nsys" stats --report "$r" --format csv --force-export=false -o "$out/$w" "$out/$w.sqlite" >/dev/null
  done
  gzip -f -9 "$out/$w.sqlite"
  rm -f "$out/$w.nsys-rep"
done
ls -la "$out"
