"""Time Holistic Trace Analysis (HTA) and ``gpuprof analyze`` on the same Kineto trace.

HTA (PyPI: HolisticTraceAnalysis, imported as ``hta``) is not a dependency of
gpuprof: install it in an environment of its own and pass that environment's
Python with --hta-python.  Each tool runs in a subprocess REPEAT times, timed like
bench_analyze.py does (wall time; peak RSS from ``/usr/bin/time -v``, else wait4):

* HTA: ``TraceAnalysis(trace_dir=DIR)`` with its default settings, DIR holding
  only the trace (a symbolic link to it), then
  ``get_gpu_kernel_breakdown(visualize=False)``; the child also reports HTA's
  version (importlib.metadata) and how long the import, the load and the
  breakdown took inside it;
* gpuprof: ``gpuprof analyze TRACE --json`` (every metric).

The default trace is bench_analyze.py's large one, built when missing.

    python benchmarks/bench_hta.py --hta-python /tmp/hta-venv/bin/python [--trace TRACE] [--repeat 1]
    python benchmarks/bench_hta.py --smoke [--hta-python PATH]
        the same on the smallest example trace; HTA is skipped, and says so, when
        PATH (default: this Python) cannot import it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_analyze import BIG, SOURCE, measured, run_analyze
from make_big_trace import SMOKE_SOURCE, build

#: Run by --hta-python: argv[1] the trace directory, argv[2] where to write what it found.
HTA_CHILD = """
import json, sys, time
from importlib.metadata import version
start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
imported = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
loaded = time.perf_counter()
kernel_types, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
done = time.perf_counter()
with open(sys.argv[2], "w") as out:
    json.dump({
        "version": version("HolisticTraceAnalysis"),
        "import_s": imported - start, "load_s": loaded - imported, "breakdown_s": done - loaded,
        "kernel_type_us": dict(zip(kernel_types["kernel_type"], map(int, kernel_types["sum"]))),
    }, out)
"""


def hta_missing(python: str) -> str | None:
    """Why PYTHON cannot run HTA (its last error line), or None when it can import it."""
    try:
        probe = subprocess.run([python, "-c", "import hta.trace_analysis"], capture_output=True, text=True)
    except OSError as exc:
        return str(exc)
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {probe.returncode}"


def run_hta(python: str, trace: Path) -> tuple[float, int, dict]:
    """One HTA process on a directory holding only TRACE: wall seconds, peak RSS in bytes, its report."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir, report = Path(tmp, "trace"), Path(tmp, "report.json")
        trace_dir.mkdir()
        (trace_dir / trace.name).symlink_to(trace.resolve())
        wall, peak, _ = measured([python, "-c", HTA_CHILD, str(trace_dir), str(report)])
        return wall, peak, json.loads(report.read_text())


def report_runs(tool: str, runs: list[tuple[float, int]], size: int) -> None:
    """The medians of a tool's (wall seconds, peak RSS bytes) runs."""
    wall = statistics.median(w for w, _ in runs)
    peak = statistics.median(p for _, p in runs)
    print(f"{tool} median of {len(runs)}: {wall:.2f} s, peak RSS {peak / 2**20:,.0f} MiB "
          f"({peak / size:.2f} x the file's size)")


def bench(trace: Path, hta_python: str, repeat: int) -> int:
    """REPEAT runs of HTA (unless HTA_PYTHON cannot import it: then it says so) and of gpuprof on TRACE."""
    size = trace.stat().st_size
    print(f"trace: {trace}, {size:,} bytes ({size / 1e6:.0f} MB)")
    missing = hta_missing(hta_python)
    if missing:
        print(f"HTA skipped: {hta_python} cannot import hta ({missing})")
    else:
        runs = []
        for i in range(repeat):
            wall, peak, found = run_hta(hta_python, trace)
            runs.append((wall, peak))
            if not i:
                print(f"HTA: HolisticTraceAnalysis {found['version']} ({hta_python})")
            print(f"hta run {i + 1}: {wall:.2f} s, peak RSS {peak / 2**20:,.0f} MiB ({peak / size:.2f} x file); "
                  f"inside: import {found['import_s']:.2f} s, load {found['load_s']:.2f} s, "
                  f"kernel breakdown {found['breakdown_s']:.2f} s; kernel time by type (us): "
                  + ", ".join(f"{kind} {us:,}" for kind, us in found["kernel_type_us"].items()))
        report_runs("hta", runs, size)
    runs = []
    for i in range(repeat):
        wall, peak, result = run_analyze(trace)
        runs.append((wall, peak))
        print(f"gpuprof run {i + 1}: {wall:.2f} s, peak RSS {peak / 2**20:,.0f} MiB ({peak / size:.2f} x file); "
              f"kernel_time_us {result['metrics']['kernel_time_us']:,} over {result['steps']['count']} steps")
    report_runs("gpuprof", runs, size)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hta-python", default=sys.executable,
                        help="Python of the environment HTA is installed in (default: this one)")
    parser.add_argument("--trace", type=Path, default=BIG,
                        help="Kineto trace (default: bench_analyze.py's large one, built when missing)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="the smallest example trace, one run of each tool")
    args = parser.parse_args()
    if args.smoke:
        return bench(SMOKE_SOURCE, args.hta_python, 1)
    if not args.trace.exists() and args.trace == BIG:
        copies, count, _ = build(SOURCE, BIG)
        print(f"built {BIG}: {count:,} events, {copies} copies of {SOURCE.name}")
    return bench(args.trace, args.hta_python, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
