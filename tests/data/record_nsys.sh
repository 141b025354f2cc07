#!/usr/bin/env bash
# Record the small Nsight Systems reports the nsys tests read (run on a CUDA GPU),
# with the reference numbers of `nsys stats` beside them.  nsys stores the profiled
# process's environment in its report: the workload starts with only what it needs,
# the export is scrubbed (pytest_gpuprof.capture.nsys.scrub_sqlite: environment rows
# and strings, machine name, paths, GPU UUIDs) and the .nsys-rep is deleted.
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
  env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 ${PYTHONPATH:+PYTHONPATH="$PYTHONPATH"} \
    ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} ${CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"} \
    "$nsys" profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-graph-trace=node \
    --capture-range=cudaProfilerApi \
    --capture-range-end=stop --force-overwrite=true -o "$out/$w" python3 "$here/record_traces.py" --nvtx "$w"
  "$nsys" export --type sqlite --force-overwrite=true -o "$out/$w.sqlite" "$out/$w.nsys-rep"
  python3 -c 'import sys; from pathlib import Path; from pytest_gpuprof.capture.nsys import scrub_sqlite
print(sys.argv[1], scrub_sqlite(Path(sys.argv[1])))' "$out/$w.sqlite"
  for r in cuda_gpu_kern_sum cuda_gpu_mem_time_sum cuda_gpu_mem_size_sum; do
    "$nsys" stats --report "$r" --format csv --force-export=false -o "$out/$w" "$out/$w.sqlite" >/dev/null
  done
  gzip -f -9 -n "$out/$w.sqlite"
  rm -f "$out/$w.nsys-rep"
done
ls -la "$out"
