"""``--gpuprof-backend=nsys``: run the pytest session again under ``nsys profile``.

The outer pytest (the one the user started) runs no test.  It re-executes the
same command line under ``nsys profile``; that inner session (``backends.
NsysInnerBackend``) runs every test, emits NVTX ranges for the profiled ones inside
one cudaProfilerStart/Stop capture range, and writes which profiled tests ran to
the end.  Once nsys has written the report, the outer session exports it to
SQLite, cuts out each test's NVTX range (``NsysReportBackend``), judges it like the
torch backend does, prints the same summary and exits with the status a direct
run would have had.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from ..capture.nsys import check_report, export_sqlite, find_nsys, profile_command, run_streamed
from ..capture.profiler import GpuProf, StepPlan
from ..errors import GpuprofError, TraceError
from ..report.words import failure_message
from ..trace.model import Trace
from ..trace.nsys_sqlite import for_range, load_nsys
from .backends import INNER_ENV
from .session import GpuprofSession, Settings


class NsysReportBackend:
    """The tests of one nsys session report, each cut out by its NVTX range."""

    name, runs_tests, needs_gpu = "nsys", False, False

    def __init__(self, report: Path, trace: Trace | None) -> None:
        self.report = report
        self._trace = trace

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        return GpuProf(plan)

    def start(self) -> None:
        pass

    def trace(self, nodeid: str, prof: GpuProf | None = None) -> tuple[Trace, Path]:
        try:
            return for_range(self._trace, nodeid), self.report
        except TraceError as exc:
            raise TraceError(f"{self.report}: {exc}") from None

    def close(self) -> None:
        pass


def run_outer(settings: Settings, args: list[str], cwd: Path) -> tuple[int, GpuprofSession]:
    """Profile the session under nsys, then judge its profiled tests; returns the exit status."""
    nsys = find_nsys(settings.nsys_path)
    folder = settings.output_dir / "nsys"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"session-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    report = folder / f"{stem}.nsys-rep"
    results = folder / f"{stem}.tests.json"
    cmd = profile_command(nsys, report, [sys.executable, "-m", "pytest", *args])
    print(f"gpuprof: re-running this session under Nsight Systems ({nsys})")
    status, tail = run_streamed(cmd, env={**os.environ, INNER_ENV: str(results)}, cwd=cwd)
    if not results.is_file():
        raise GpuprofError(f"the session under nsys ended (exit {status}) before writing {results}:\n{tail}")
    inner = json.loads(results.read_text())
    passed = [t for t in inner["tests"] if t["passed"]]
    trace = None
    if passed:
        check_report(report, tail)
        trace = load_nsys(export_sqlite(nsys, report))
    backend = NsysReportBackend(report, trace)
    session = GpuprofSession(settings, backend)
    session.machine = inner.get("machine")
    for test in passed:
        session.judge(test["nodeid"], test["marker"], lambda nodeid=test["nodeid"]: backend.trace(nodeid))
    status = inner["exitstatus"]
    if status == 0 and any(r.failed for r in session.results):
        status = 1
    return status, session


def main(settings: Settings, config: pytest.Config) -> int:
    """The outer session from start to end: its output, its reports, its exit status."""
    try:
        status, session = run_outer(settings, list(config.invocation_params.args), config.invocation_params.dir)
    except KeyboardInterrupt:
        print("gpuprof: interrupted; nsys and the session under it were stopped")
        return pytest.ExitCode.INTERRUPTED
    except GpuprofError as exc:
        print(f"gpuprof: {exc}")
        return pytest.ExitCode.INTERNAL_ERROR
    if not session.finish():
        status = status or pytest.ExitCode.TESTS_FAILED
    print("=" * 30 + " gpuprof (nsys backend) " + "=" * 30)
    for result in session.results:
        if result.failed:
            print(f"FAILED {result.nodeid}\n{failure_message(result)}")
    print("\n".join(session.lines()))
    return status
