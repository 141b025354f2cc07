"""``--gpuprof-backend=nsys``: run the pytest session again under ``nsys profile``.

Two role objects, one for each of the two sessions.  The outer pytest (the one the user
started, ``OutsideNsys``, chosen by ``plugin.pytest_cmdline_main``) runs no test.  It
re-executes the same command line under ``nsys profile``; that inner session
(``NsysInnerSession``, registered by ``plugin._register_roles``, with its backend
``backends.NsysInnerBackend``) runs every test, emits NVTX ranges for the profiled ones
inside one cudaProfilerStart/Stop capture range, and hands over which profiled tests ran to
the end and which it skipped (no GPU) instead of judging them.  Once nsys has written the
report, the outer session exports it to SQLite, cuts out each test's NVTX range
(``NsysReportBackend``), judges it like the torch backend does, prints the same summary and
exits with the status a direct run would have had.

nsys stores the environment of every process it traces in its report.  So the
session is launched with only the variables a process needs before Python runs
(the others reach it through a private file), the SQLite export is scrubbed, and
both files are deleted unless ``--gpuprof-keep-traces`` asks to keep them.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ..capture.marker import marker_of
from ..capture.nsys import (
    STOP_GRACE_S,
    check_report,
    export_sqlite,
    find_nsys,
    profile_command,
    scrub_report,
    scrub_sqlite,
)
from ..capture.profiler import GpuProf, StepPlan
from ..compare.judge import Traces
from ..errors import GpuprofError, TraceError
from ..report.words import failure_message
from ..trace.model import Trace
from ..trace.nsys_sqlite import cuda_processes, for_range, load_nsys
from .backends import UNFINISHED_LOOP, Backend, HandedOver, NsysInnerBackend
from .fresh import child_pytest, echo, read_results
from .outcomes import Outcomes, Relay
from .rank_processes import RankOutcome, RankProfiling, rank_result
from .role import INSIDE_NSYS
from .session import GpuprofSession
from .settings import Settings


class NsysInnerSession(GpuprofSession):
    """The session inside ``nsys profile`` (or the process under ncu, which runs inside nsys's
    role): it runs the tests and marks the profiled ones in NVTX, and hands them to the session
    outside nsys, which judges them from the report (``run_outer``), instead of judging them."""

    def __init__(self, settings: Settings, relay: Relay | None = None) -> None:
        assert settings.nsys_inner is not None  # (chosen where it is set)
        process = settings.process
        # a distributed test's rank: its test's session holds the capture range open
        self.inner = NsysInnerBackend(settings.nsys_inner, owns_capture=not process.profiled_rank,
                                      process_steps=process.under_ncu)
        super().__init__(settings, self.inner, relay=relay)
        self.handed_over: list[HandedOver] = []  # the profiled tests that ran, for the session outside

    def _measured(self, item: pytest.Item, prof: GpuProf, arguments: Mapping[str, object]) -> None:
        """Judged by the session outside nsys once nsys wrote the report."""
        self.handed_over.append({"nodeid": item.nodeid, "marker": dict(arguments), "completed": prof.completed})

    def ranks_ended(self, item: pytest.Item, outcomes: list[RankOutcome]) -> None:
        """A distributed test whose ranks this session spawned, handed over with each rank's process."""
        try:
            self.handed_over.append(nsys_ranks(item.nodeid, dict(marker_of(item).arguments), outcomes))
        except GpuprofError as exc:
            pytest.fail(f"gpuprof: {exc}", pytrace=False)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("=", "gpuprof")
        for line in self.outcomes.lines(inside_nsys=True):
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Close the capture range and hand the tests over."""
        self.inner.finish(self.handed_over, exitstatus, self.probes.readings, self.outcomes.skipped)


def nsys_ranks(nodeid: str, marker: dict[str, object], outcomes: list[RankOutcome]) -> HandedOver:
    """(inside nsys) A distributed test for the outer session: the process each rank ran in,
    read from its results (``NsysInnerBackend.finish``), whose NVTX ranges and GPU work the
    report holds, and the ranks that left their steps loop unfinished; the ranks' folder goes
    once they are read."""
    try:
        pids, unfinished = {}, []
        for o in sorted(outcomes):
            doc, test = rank_result(o, nodeid)
            if not isinstance(doc.get("pid"), int):
                raise GpuprofError(f"rank {o.rank} measured nothing (no results naming its process): {o.results}")
            pids[str(o.rank)] = doc["pid"]
            unfinished += [] if test.get("completed") else [o.rank]
    finally:
        if outcomes and outcomes[0].results is not None:
            shutil.rmtree(outcomes[0].results.parent, ignore_errors=True)
    return {"nodeid": nodeid, "marker": marker, "completed": not unfinished, "unfinished": unfinished, "ranks": pids}


class NsysReportBackend(Backend):
    """The tests of one nsys session report, each cut out by its NVTX range (the session
    outside nsys judges with it: nothing runs, nothing is measured again)."""

    name, runs_tests, needs_gpu, in_process = "nsys", False, False, False

    def __init__(self, report: Path, trace: Trace | None, kept: Path | None,
                 unfinished: dict[str, list[int] | None],
                 ranks: dict[str, dict[int, Trace | str]] | None = None) -> None:
        self.report = report
        self._trace = trace
        self._kept = kept  # the scrubbed export, when kept
        # tests that passed without finishing their steps() loop (a distributed test's: on which ranks)
        self._unfinished = unfinished
        self._ranks = ranks or {}  # a distributed test's ranks: each one's process's events, or why none

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        return GpuProf(plan)

    def rank_profiling(self, nodeid: str, plan: list[str], timeline_events: int) -> RankProfiling:
        raise GpuprofError("the session outside nsys runs no test: the report holds its ranks")

    def trace(self, nodeid: str, prof: GpuProf | None = None) -> tuple[Trace, Path | None]:
        if nodeid in self._unfinished:
            raise GpuprofError(UNFINISHED_LOOP)
        if self._trace is None:  # no test of the session's own process ran to the end
            raise GpuprofError(f"{self.report} holds no profiled test of the session's own process")
        try:
            return for_range(self._trace, nodeid), self._kept
        except TraceError as exc:
            raise TraceError(f"{self.report}: {exc}") from None

    def rank_traces(self, nodeid: str, size: int = 0,
                    outcomes: list[RankOutcome] | None = None) -> dict[int, tuple[Trace, Path | None]]:
        """Each rank's part of a distributed test: its process's events inside the test's range
        (the report names the ranks: ``size`` and ``outcomes`` are the spawning session's)."""
        if nodeid in self._unfinished:
            raise GpuprofError(f"rank {', '.join(map(str, self._unfinished[nodeid] or []))}: {UNFINISHED_LOOP}")
        cut = {}
        for rank, trace in self._ranks[nodeid].items():
            try:
                if isinstance(trace, str):
                    raise TraceError(trace)
                cut[rank] = for_range(trace, nodeid), self._kept
            except TraceError as exc:
                raise TraceError(f"{self.report}: rank {rank}: {exc}") from None
        return cut


def run_outer(settings: Settings, args: list[str], cwd: Path) -> tuple[int, Outcomes]:
    """Profile the session under nsys, then judge its profiled tests; returns the exit status."""
    nsys = find_nsys(settings.nsys_path)
    folder = settings.output_dir / "nsys"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"session-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    report = folder / f"{stem}.nsys-rep"
    results = folder / f"{stem}.tests.json"
    print(f"gpuprof: re-running this session under Nsight Systems ({nsys})")
    try:
        with child_pytest(args, cwd, {INSIDE_NSYS: str(results)}, under=profile_command(nsys, report), held=True,
                          merged=True, grace_s=STOP_GRACE_S) as session_under_nsys:
            tail = echo(session_under_nsys)
        inner = read_results(results, "the session under nsys",
                             ended=f"it ended with exit {session_under_nsys.returncode}:\n{tail}")
        results.unlink()  # read once: the outer session judges from it, nothing else needs it
        trace, ranks = None, {}
        if any(t["completed"] for t in inner["tests"]):
            check_report(report, tail)
            export = export_sqlite(nsys, report)
            try:
                scrub_sqlite(export, os.environ.values())
            except GpuprofError:
                export.unlink()  # never kept unscrubbed
                raise
            # the session's own events where its children (a distributed test's ranks) ran GPU
            # work too: their correlation ids repeat the session's
            others = {pid for pid, _ in cuda_processes(export)}
            if any(t["completed"] and "ranks" not in t for t in inner["tests"]):
                trace = load_nsys(export, process=inner.get("pid") if len(others) > 1 and inner.get("pid") in others
                                  else None)
            # a distributed test's ranks each ran in a process of its own, recorded in the same report
            ranks = {t["nodeid"]: {int(rank): _rank_process(export, pid, others) for rank, pid in t["ranks"].items()}
                     for t in inner["tests"] if t["completed"] and "ranks" in t}
    finally:
        kept = keep_or_delete(report, settings.keep_traces)
    backend = NsysReportBackend(report, trace, kept, {t["nodeid"]: t.get("unfinished") for t in inner["tests"]
                                                      if not t["completed"]}, ranks)
    judge = settings.judge()
    outcomes = Outcomes(settings, backend.kept_traces, baselines=judge.baselines)
    outcomes.skipped.update(inner["skipped"])
    for test in inner["tests"]:  # the passed ones (a failed test is not judged)
        nodeid = test["nodeid"]
        if "ranks" in test:
            load: Callable[[], Traces] = functools.partial(backend.rank_traces, nodeid)
        else:
            load = functools.partial(_one_process, backend, nodeid)
        outcomes.add(judge.judge(nodeid, test["marker"], load, distributed="ranks" in test,
                                 machine=inner.get("machine")))
    status = inner["exitstatus"]
    if status == 0 and any(r.failed for r in outcomes.results):
        status = 1
    return status, outcomes


def _one_process(backend: NsysReportBackend, nodeid: str) -> Traces:
    return {0: backend.trace(nodeid)}


def _rank_process(export: Path, pid: int, processes: set[int]) -> Trace | str:
    """A rank's own events in the report, or why there are none (said as that test's error,
    not the run's)."""
    if pid not in processes:
        return f"its process {pid} ran no GPU work the report holds"
    try:
        return load_nsys(export, process=pid)
    except TraceError as exc:
        return str(exc)


def keep_or_delete(report: Path, keep: bool) -> Path | None:
    """Keep the report, its environment values overwritten, and its scrubbed export when
    asked, or delete every file nsys wrote; returns the kept export."""
    written = [report.with_suffix(suffix) for suffix in (".nsys-rep", ".qdstrm", ".sqlite")]
    if not keep:
        for path in written:
            path.unlink(missing_ok=True)
        return None
    export = report.with_suffix(".sqlite")
    if report.is_file():
        scrub_report(report, os.environ.values())
        print(f"gpuprof: kept {report}, this session's environment values overwritten in it; nsys recorded "
              "the environments of the processes the session started, which may hold others"
              + (f": share the scrubbed {export}" if export.is_file() else ""))
    return export if export.is_file() else None


class OutsideNsys:
    """The nsys backend's session outside nsys, the pytest the user started: chosen by
    ``plugin.pytest_cmdline_main`` (``Settings.outside_nsys``) instead of pytest's own main, it
    runs no test and has no hooks."""

    def __init__(self, settings: Settings, config: pytest.Config) -> None:
        self.settings = settings
        self.config = config

    def main(self) -> int:
        """The outer session from start to end: its output, its reports, its exit status."""
        settings, config = self.settings, self.config
        try:
            status, outcomes = run_outer(settings, list(config.invocation_params.args), config.invocation_params.dir)
        except KeyboardInterrupt:
            print("gpuprof: interrupted; nsys and the session under it were stopped")
            return pytest.ExitCode.INTERRUPTED
        except GpuprofError as exc:
            print(f"gpuprof: {exc}")
            return pytest.ExitCode.INTERNAL_ERROR
        if not outcomes.finish(config, settings.records_again, writes_reports=True):
            status = status or pytest.ExitCode.TESTS_FAILED
        print("=" * 30 + " gpuprof (nsys backend) " + "=" * 30)
        for result in outcomes.results:
            if result.failed:
                print(f"FAILED {result.nodeid}\n{failure_message(result)}")
        print("\n".join(outcomes.lines()))
        return status
