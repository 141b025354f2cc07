"""``--gpuprof-backend=nsys``: run the pytest session again under ``nsys profile``.

The outer pytest (the one the user started) runs no test.  It re-executes the
same command line under ``nsys profile``; that inner session runs every test,
emits NVTX ranges for the profiled ones inside one cudaProfilerStart/Stop
capture range, and writes which profiled tests passed.  Once nsys has written
the report, the outer session exports it to SQLite, cuts out each test's NVTX
range, judges it like the torch backend does, prints the same summary and
exits with the status a direct run would have had.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .errors import GpuprofError, TraceError
from .session import GpuprofSession, Settings, TestResult

INNER_ENV = "GPUPROF_NSYS_INNER"


def inner_results_path() -> Path | None:
    """Inside the re-executed session: where to write the profiled tests' outcomes."""
    value = os.environ.get(INNER_ENV)
    return Path(value) if value else None


def write_inner_results(path: Path, tests: list[dict[str, Any]], exitstatus: int) -> None:
    path.write_text(json.dumps({"tests": tests, "exitstatus": int(exitstatus)}, indent=2))


def run_outer(settings: Settings, args: list[str], cwd: Path) -> tuple[int, GpuprofSession]:
    """Profile the session under nsys, then judge its profiled tests; returns the exit status."""
    from .nsys import for_range, load_nsys
    from .nsys_run import (
        check_report,
        export_sqlite,
        find_nsys,
        profile_command,
        run_streamed,
    )

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
    session = GpuprofSession(settings)
    passed = [t for t in inner["tests"] if t["passed"]]
    if passed:
        check_report(report, tail)
        trace = load_nsys(export_sqlite(nsys, report))
        for test in passed:
            try:
                part = for_range(trace, test["nodeid"])
            except TraceError as exc:
                session.results.append(TestResult(test["nodeid"], "error", message=f"{report}: {exc}"))
                continue
            session.evaluate_trace(test["nodeid"], part, report, test["marker"])
    status = inner["exitstatus"]
    if status == 0 and any(r.failed for r in session.results):
        status = 1
    return status, session
