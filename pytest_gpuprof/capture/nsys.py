"""Running Nsight Systems: find it, profile a command under it, export its report.

The profiled command runs in its own process group, so that Ctrl-C (or any
exception in the parent) can stop nsys and everything it launched, and no
nsys process is left behind.
"""

from __future__ import annotations

import collections
import glob
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ..errors import GpuprofError

ENV_NSYS = "GPUPROF_NSYS"
#: Where nsys is looked for after the option, the environment variable and PATH.
INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
#: Capture only what the metrics need: CUDA and NVTX (osrt for the CPU side), no
#: sampling, no context switches, between cudaProfilerStart and cudaProfilerStop.
#: CUDA graphs are traced node by node (nsys's default records a graph launch as one
#: activity), so graph kernels are counted and timed like the rest.
PROFILE_ARGS = (
    "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
    "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)


def find_nsys(explicit: str | None, option: str = "--gpuprof-nsys-path") -> Path:
    """The nsys binary: the option, then $GPUPROF_NSYS, then PATH, then the usual install places."""
    looked: list[str] = []
    for origin, candidate in ((option, explicit), (f"${ENV_NSYS}", os.environ.get(ENV_NSYS))):
        if candidate:
            if _runnable(Path(candidate)):
                return Path(candidate)
            looked.append(f"{origin}={candidate} (not an executable file)")
        else:
            looked.append(f"{origin} (not set)")
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    looked.append("PATH")
    for pattern in INSTALL_GLOBS:
        found = sorted(glob.glob(pattern), reverse=True)  # newest version directory first
        hits = [Path(p) for p in found if _runnable(Path(p))]
        if hits:
            return hits[0]
        looked.append(pattern)
    raise GpuprofError("Nsight Systems (nsys) not found; looked at: " + ", ".join(looked))


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def run_streamed(
    cmd: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None, grace_s: float = 10.0
) -> tuple[int, str]:
    """Run ``cmd`` in its own process group, copying its output to ours as it comes.

    Returns the exit status and the last lines of output (for error messages).
    On KeyboardInterrupt the group gets SIGINT, then SIGTERM and SIGKILL if it
    lingers, and the interrupt is re-raised once nothing of it is left.
    """
    tail: collections.deque[str] = collections.deque(maxlen=60)
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
    )
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    pending = b""
    try:
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            if out is not None:
                out.write(chunk)
                out.flush()
            else:
                sys.stdout.write(chunk.decode(errors="replace"))
            pending += chunk
            *lines, pending = pending.replace(b"\r", b"\n").split(b"\n")
            tail.extend(line.decode(errors="replace") for line in lines if line.strip())
        return proc.wait(), "\n".join(tail)
    except BaseException:
        _stop_group(proc, grace_s)
        raise


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; make sure no member of its group outlives it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


def profile_command(nsys: Path, report: Path, command: Sequence[str]) -> list[str]:
    """``nsys profile`` of ``command`` writing ``report`` (.nsys-rep), never overwriting."""
    return [str(nsys), "profile", *PROFILE_ARGS, "--force-overwrite=false", "-o", str(report.with_suffix("")),
            *command]


def check_report(report: Path, output_tail: str) -> None:
    """A capture whose importer failed leaves only a .qdstrm: say so with nsys's own words."""
    if report.is_file():
        return
    qdstrm = report.with_suffix(".qdstrm")
    said = "\n".join(line for line in output_tail.splitlines() if "rror" in line or "fail" in line.lower())
    if qdstrm.is_file():
        raise GpuprofError(
            f"nsys left only {qdstrm}: its importer failed to make {report.name}. nsys said:\n"
            f"{said or output_tail}\n(On machines that lack libdw.so.1 and libelf.so.1, install them "
            "(Debian/Ubuntu: libdw1, libelf1) or put them on LD_LIBRARY_PATH.)"
        )
    raise GpuprofError(f"nsys wrote no report {report}. nsys said:\n{said or output_tail}")


def export_sqlite(nsys: Path, report: Path) -> Path:
    """``nsys export --type sqlite`` beside the report; returns the .sqlite path."""
    target = report.with_suffix(".sqlite")
    cmd = [str(nsys), "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(target), str(report)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not target.is_file():
        raise GpuprofError(f"nsys export of {report} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return target
