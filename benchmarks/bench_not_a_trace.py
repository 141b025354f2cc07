"""Time the Kineto loader's refusal of files that are not traces (issue 33, item 6).

Files of zeros named ``*.pt.trace.json.gz`` (what a writer that died, or a file allocated
ahead, leaves): 64 MB, 512 MB and 1 GB written out, and a 2 GB sparse file (no block on
disk: the reads are not the disk's).  Each is loaded by ``load_kineto`` in a fresh
subprocess under ``/usr/bin/time -v`` (without it, the child's own ``wait4`` resource use):
its wall time and peak resident set size.  Each run must end in the loader's error naming
the file ("... is not a Chrome-trace JSON file"); a run past ``--timeout`` seconds is
killed and printed as such.  The subprocess imports ``pytest_gpuprof`` the way this
interpreter would from outside the checkout (``PYTHONPATH`` first), so another revision
is measured with ``PYTHONPATH=that/revision``; the module file loaded is printed.

    python benchmarks/bench_not_a_trace.py [--sizes 64M,512M,1G] [--sparse 2G] [--timeout 120] [--folder DIR]
    python benchmarks/bench_not_a_trace.py --smoke
        a 1 MB file and a 16 MB sparse one, in seconds (CI runs it).
    python benchmarks/bench_not_a_trace.py --sizes '' --sparse '' --json 2G
        valid JSON that is no trace, gzipped, of 2 GiB each once gunzipped (issue 43, item 5):
        a top-level member that is one long array, an events array of numbers, and an array of
        one long array; each must be refused in memory that does not follow its size.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME = Path("/usr/bin/time")
#: What the child runs: import the loader, then load the file; it prints the module file, its
#: peak RSS (KiB) before the load, the load's own seconds and the loader's error.
LOAD = """import resource, sys, time, pytest_gpuprof
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.trace.kineto import load_kineto
print(pytest_gpuprof.__file__)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
start = time.perf_counter()
try:
    load_kineto(sys.argv[1])
    said = "accepted"
except TraceError as exc:
    said = str(exc)
print(time.perf_counter() - start)
print(said)
"""
#: What the loader must say of each file (after its name).
REFUSED = "is not a Chrome-trace JSON file"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_of(text: str) -> int:
    """Bytes of a size given as ``64M``, ``1G``, ``512K`` or a plain number."""
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 64M or 1G")
    return int(match[1]) * _UNITS.get(match[2], 1)


def zeros(path: Path, size: int, sparse: bool) -> Path:
    """A file of SIZE zero bytes: written out, or SPARSE (its length set, no block written)."""
    with open(path, "wb") as fh:
        if sparse:
            fh.truncate(size)
            return path
        block = bytes(8 << 20)
        for at in range(0, size, len(block)):
            fh.write(block[:size - at])
    return path


#: Valid JSON that is no trace, by its shape: the text before and after a long run of "0,".
JSON_SHAPES = {
    "a long member": (b'{"otherData": [', b"0]}"),
    "an events array of numbers": (b'{"traceEvents": [', b"0]}"),
    "an array of one long array": (b"[[", b"0]]"),
}


def json_not_a_trace(path: Path, size: int, shape: str) -> Path:
    """A gzipped file of valid JSON, SIZE bytes once gunzipped, of the SHAPE given."""
    head, tail = JSON_SHAPES[shape]
    block = b"0," * (4 << 20)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            fh.write(block[:left - left % 2] if left < len(block) else block)
            left -= len(block)
        fh.write(tail)
    return path


def load_once(path: Path, timeout: float) -> tuple[float, float | None, int | None, int | None, str]:
    """Load PATH in a fresh subprocess: its wall seconds, the load's own seconds, the peak RSS
    in bytes before the load and over the whole process (None when it was killed), and the
    loader's error (or what became of the process)."""
    command = [sys.executable, "-c", LOAD, str(path)]
    timed = TIME.exists()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # run from the file's folder: '' on sys.path must not be the checkout
        child = subprocess.Popen([str(TIME), "-v", *command] if timed else command, stdout=out, stderr=err,
                                 cwd=path.parent)
        start = time.perf_counter()
        while True:  # wait4 gives this one child's own resource use (ru_maxrss in KiB on Linux)
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            wall = time.perf_counter() - start
            if pid:
                break
            if wall > timeout:
                child.kill()
                child.wait()
                return wall, None, None, None, f"no answer in {timeout:.0f} s (killed)"
            time.sleep(0.002)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        lines, report = out.read().decode(errors="replace").splitlines(), err.read().decode(errors="replace")
        if child.returncode != 0 or len(lines) < 4:
            return wall, None, None, None, f"exit {child.returncode}: {' '.join(report.strip().splitlines()[-1:])}"
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)[1]) * 1024 if timed \
            else usage.ru_maxrss * 1024
        print(f"  {path.name}: pytest_gpuprof from {Path(lines[0]).parent}")
        return wall, float(lines[2]), int(lines[1]) * 1024, peak, lines[3]


def bench(folder: Path, sizes: list[int], sparse: list[int], timeout: float, json_sizes: list[int] = ()) -> int:
    """Write each file, time its load, delete it; 1 when a file was not refused naming it."""
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{'/usr/bin/time -v' if TIME.exists() else 'wait4'}; timeout {timeout:.0f} s")
    failed = 0
    files = [(f"{size:,} bytes of zeros ({size >> 20} MiB{', sparse' if is_sparse else ''})",
              lambda size=size, is_sparse=is_sparse: zeros(
                  folder / f"zeros_{size >> 20}MiB{'_sparse' if is_sparse else ''}.pt.trace.json.gz", size, is_sparse))
             for size, is_sparse in [(s, False) for s in sizes] + [(s, True) for s in sparse]]
    files += [(f"valid JSON, {shape}, {size >> 20} MiB gunzipped",
               lambda size=size, n=n, shape=shape: json_not_a_trace(folder / f"json_{n}.pt.trace.json.gz", size, shape))
              for size in json_sizes for n, shape in enumerate(JSON_SHAPES)]
    for what, write in files:
        path = write()
        what += f", {path.stat().st_size / 2**20:.1f} MiB on disk" if "JSON" in what else ""
        try:
            wall, load, before, peak, said = load_once(path, timeout)
        finally:
            path.unlink()
        if peak is None:
            print(f"{what}: {wall:.2f} s: {said}")
        else:
            print(f"{what}: load {load:.3g} s (process {wall:.2f} s), peak RSS {peak / 2**20:.0f} MiB "
                  f"({before / 2**20:.0f} MiB before the load): {said}")
        if not said.startswith(f"{path} {REFUSED}" if "zeros" in what else f"{path}"):
            failed += 1
    print(f"{'all' if not failed else 'not all'} refused naming the file" + (f" ({failed} not)" if failed else ""))
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64M,512M,1G", help="sizes of the files written out (default 64M,512M,1G)")
    parser.add_argument("--sparse", default="2G", help="sizes of the sparse files (default 2G)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a load may take before it is killed")
    parser.add_argument("--folder", type=Path, help="where the files are written (default: a temporary folder)")
    parser.add_argument("--json", default="", help="sizes (gunzipped) of the gzipped files of valid JSON that is "
                        "no trace, one of each shape (default: none)")
    parser.add_argument("--smoke", action="store_true", help="a 1 MB file and a 16 MB sparse one")
    args = parser.parse_args()
    sizes, sparse = ("1M", "16M") if args.smoke else (args.sizes, args.sparse)
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        return bench(Path(tmp), [size_of(s) for s in sizes.split(",") if s],
                     [size_of(s) for s in sparse.split(",") if s], args.timeout,
                     [size_of(s) for s in args.json.split(",") if s])


if __name__ == "__main__":
    sys.exit(main())
