"""Time ``gpuprof analyze`` on a large Kineto trace and check what it reports.

Builds the large trace with make_big_trace.py when it is not there yet (from a
real trace of the example suite, about 1.5 million events), then runs the real
command, ``gpuprof analyze BIG --json``, in a subprocess REPEAT times and
reports each run's wall time and peak resident memory, their medians and the
ratio of peak memory to the file's size.

The metrics are checked against the source trace's: the big trace is COPIES
back-to-back replays of the source's steps, so every count, byte total and
summed time must be exactly COPIES times the source's, every per-step list the
source's repeated COPIES times (the window's but for each copy's first step).
(Ratios and the window depend on the gaps between the copies and are only printed.)

    python benchmarks/bench_analyze.py [--source TRACE.json.gz] [--big BIG.json[.gz]] [--rebuild] [--repeat 3]
    python benchmarks/bench_analyze.py --smoke
        the same steps on two copies of the smallest example trace, in seconds (CI runs it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from make_big_trace import SMOKE_SOURCE, build
from pytest_gpuprof.metrics.specs import METRICS
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "example_suite/traces/example_suite_test_transformer.py_test_transformer_train_step.pt.trace.json.gz"
BIG = Path(tempfile.gettempdir()) / "gpuprof-bench-trace.json"
TIME = Path("/usr/bin/time")


def gpuprof_command() -> list[str]:
    """The installed ``gpuprof`` script of this interpreter's environment, else ``python -m``."""
    script = Path(sys.executable).with_name("gpuprof")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_gpuprof"]


def measured(command: list[str]) -> tuple[float, int, bytes]:
    """Run COMMAND once: wall seconds, its peak RSS in bytes, its standard output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if TIME.exists():
            start = time.perf_counter()
            code = subprocess.call([str(TIME), "-v", *command], stdout=out, stderr=err)
            wall = time.perf_counter() - start
            err.seek(0)
            report = err.read().decode(errors="replace")
            peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)[1]) * 1024
        else:
            # wait4 gives this one child's own resource use (ru_maxrss in KiB on Linux).
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=out, stderr=err)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - start
            child.returncode = code = os.waitstatus_to_exitcode(status)
            peak = usage.ru_maxrss * 1024
            err.seek(0)
            report = err.read().decode(errors="replace")
        if code != 0:
            raise SystemExit(f"{' '.join(command)} failed ({code}):\n{report}")
        out.seek(0)
        return wall, peak, out.read()


def run_analyze(trace: Path) -> tuple[float, int, dict]:
    """One run of ``gpuprof analyze TRACE --json``: wall seconds, peak RSS in bytes, its output."""
    wall, peak, out = measured(gpuprof_command() + ["analyze", str(trace), "--json"])
    return wall, peak, json.loads(out)


def scaled_mismatches(small: dict, big: dict, copies: int) -> list[str]:
    """What in the big trace's metrics is not the source's scaled by the number of copies."""
    bad = []
    if big["steps"]["count"] != copies * small["steps"]["count"]:
        bad.append(f"step count {big['steps']['count']} != {copies} x {small['steps']['count']}")
    if big["gpu"] != small["gpu"]:
        bad.append(f"gpu {big['gpu']!r} != {small['gpu']!r}")
    sm, bm = small["metrics"], big["metrics"]
    for name, spec in METRICS.items():
        if spec.kind in ("count", "bytes", "time") and name != "window_us":
            if _units(bm[name], spec.kind) != copies * _units(sm[name], spec.kind):
                bad.append(f"{name}: {bm[name]} != {copies} x {sm[name]}")
    if bm["kernels"].keys() != sm["kernels"].keys():
        bad.append("kernel names differ")
    for name, entry in sm["kernels"].items():
        other = bm["kernels"].get(name, {"count": 0, "time_us": 0.0})
        time_ns = _units(other["time_us"], "time")
        if other["count"] != copies * entry["count"] or time_ns != copies * _units(entry["time_us"], "time"):
            bad.append(f"kernel {name[:60]}: {other} != {copies} x {entry}")
    for name, values in small["per_step"].items():
        if name == "kernels":
            if big["per_step"]["kernels"].keys() != values.keys():
                bad.append("per_step kernels: the kernel names kept differ")
            for kernel, steps in values.items():
                if big["per_step"]["kernels"].get(kernel) != steps * copies:
                    bad.append(f"per_step kernel {kernel[:60]} is not the source's repeated {copies} times")
        elif name in WINDOW_SERIES:
            # each copy's first step also spans the gap after the copy before it: compare the others
            got, n = big["per_step"][name], len(values)
            if len(got) != n * copies or got[0] != values[0] or any(
                got[k * n + 1:(k + 1) * n] != values[1:] for k in range(copies)
            ):
                bad.append(f"per_step {name} is not the source's repeated {copies} times "
                           "(beyond each copy's first step)")
        elif big["per_step"][name] != values * copies:
            bad.append(f"per_step {name} is not the source's repeated {copies} times")
    if bm["step_gpu_time_us"] != sm["step_gpu_time_us"] * copies:
        bad.append(f"step_gpu_time_us is not the source's repeated {copies} times")
    return bad


#: Per-step lists of each step's slice of the window (and of the host's time before the step):
#: a copy's first step reaches back over the gap between two copies.
WINDOW_SERIES = ("window_us", "gpu_utilization", "copy_utilization", "sync_wait_fraction", "host_gap_us", "stalled")


def _units(value: float | int, kind: str) -> int:
    """Times as integer nanoseconds (printed with three decimals), so the comparison is exact."""
    return round(value * 1000) if kind == "time" else int(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="real Kineto trace to replicate")
    parser.add_argument("--big", type=Path, default=BIG, help="the large trace (built when missing; .gz: gzip -1)")
    parser.add_argument("--events", type=int, default=1_500_000, help="events in the large trace when building it")
    parser.add_argument("--copies", type=int, help="build exactly this many copies of the source (instead of --events)")
    parser.add_argument("--rebuild", action="store_true", help="build the large trace even if it exists")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true",
                        help="two copies of the smallest example trace in a temporary directory, one run, the check")
    args = parser.parse_args()
    if not args.smoke:
        return bench(args.source, args.big, args.events, args.copies, args.rebuild, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        return bench(SMOKE_SOURCE, Path(tmp) / "big.json", copies=2, rebuild=True, repeat=1)


def bench(source: Path, big: Path, events: int = 1_500_000, copies: int | None = None,
          rebuild: bool = False, repeat: int = 3) -> int:
    """Build BIG if needed, time REPEAT runs on it, then check its metrics against SOURCE's."""
    if rebuild or not big.exists():
        start = time.perf_counter()
        copies, count, size = build(source, big, events, copies)
        print(f"built {big}: {count:,} events, {copies} copies of {source.name} "
              f"({time.perf_counter() - start:.1f} s)")
    size = big.stat().st_size
    print(f"trace: {big}, {size:,} bytes ({size / 1e6:.0f} MB), {_count_events(big):,} events")
    print(f"command: {' '.join(gpuprof_command())} analyze {big} --json")
    print(f"machine: {os.cpu_count()} CPUs, {_memory_gib():.1f} GiB memory, Python {sys.version.split()[0]}")

    runs = []
    for i in range(repeat):
        wall, peak, result = run_analyze(big)
        runs.append((wall, peak))
        print(f"run {i + 1}: {wall:.2f} s, peak RSS {peak / 2**20:.0f} MiB ({peak / size:.2f} x file)")
    wall = statistics.median(w for w, _ in runs)
    peak = statistics.median(p for _, p in runs)
    print(f"median: {wall:.2f} s, peak RSS {peak / 2**20:.0f} MiB, {peak / size:.2f} x the file's size")

    _, _, small = run_analyze(source)
    copies, rest = divmod(result["steps"]["count"], small["steps"]["count"])
    bad = scaled_mismatches(small, result, copies) if not rest else ["step count is not a multiple of the source's"]
    m = result["metrics"]
    print(f"metrics: {m['kernel_count']:,} kernels over {m['step_count']} steps, "
          f"gpu_utilization {m['gpu_utilization']}, sync_count {m['sync_count']}")
    events, kept = _count_events(source), _kept_events(source)
    print(f"source: {events:,} events, of which the loader keeps {kept:,} ({kept / events:.0%}): "
          "kernels, copies, sets, runtime calls, annotations")
    if bad:
        print(f"check FAILED: the metrics are not {copies} x the source's:\n  " + "\n  ".join(bad))
        return 1
    print(f"check passed: counts, bytes, times and per-step lists are exactly {copies} x the source's")
    return 0


def _count_events(path: Path) -> int:
    """Events in a Kineto-layout file: each has exactly one "ph" key."""
    count, tail = 0, b""
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as fh:
        while block := fh.read(8 << 20):
            count += (tail + block).count(b'"ph"')
            tail = block[-3:]  # a key cut by the read is counted once, with the next block
    return count


def _kept_events(path: Path) -> int:
    """Events of the trace that the loader keeps: the time grows with their share."""
    trace = load_kineto(path)
    return sum(len(table) for table in (trace.kernels, trace.copies, trace.sets, trace.runtime, trace.ranges))


def _memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


if __name__ == "__main__":
    sys.exit(main())
