"""The plugin object of one rank of a session torchrun started (``torchrun ... -m pytest
--gpuprof``): every rank runs every test on its own GPU; rank 0 judges each profiled test from
every rank's trace and says how it went, every rank passes, skips or fails it so, and every
rank ends with the worst rank's exit status.  The ranks meet through ``torchrun.Torchrun``."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

import pytest

from ..capture.marker import is_profiled
from ..capture.profiler import GpuProf
from ..compare.distributed import rank_nodeid
from ..compare.judge import Judge
from ..errors import GpuprofError
from ..report.junit import junit_properties
from ..report.words import failure_message
from .backends import UNFINISHED_LOOP, Backend
from .rank_processes import RankOutcome
from .rank_processes import verdict as rank_verdict
from .session import AgainstBase, GpuprofSession, WritesAtEnd
from .settings import Settings
from .torchrun import Torchrun

#: Every rank ends with the worst rank's exit status, worst last: passed, no tests, tests
#: failed, usage error, interrupted, internal error.
EXIT_SEVERITY = {0: 0, 5: 1, 1: 2, 4: 3, 2: 4, 3: 5}


class TorchrunSession(GpuprofSession):
    """A rank's profiling: the session's, with the ranks meeting over each test."""

    def __init__(self, settings: Settings, torchrun: Torchrun, backend: Backend | None = None, *,
                 judge: Judge | None = None, against_base: AgainstBase | None = None) -> None:
        self.torchrun = torchrun
        # the probes read this rank's own GPU, not every rank the first
        super().__init__(settings, backend, judge=judge, against_base=against_base, gpu=lambda: torchrun.local_rank)
        # each rank's tests, probes and readings on its own GPU; a replay runs nothing on one
        self._own_gpu = _set_device if self.backend.needs_gpu else _no_device
        # each rank's trace, read by rank 0, where it profiles here; a replay's ranks kept theirs
        self._shared, self._read = (_trace_kept, _files_of) if self.backend.in_process else (_no_trace, _no_files)

    def _ending(self) -> WritesAtEnd:
        """Rank 0 writes the baselines and reports; no rank records again."""
        return WritesAtEnd(records_again=False,
                           writes_reports=self.torchrun.judges)

    def _trace_name(self, item: pytest.Item) -> str:
        return rank_nodeid(item.nodeid, self.torchrun.rank)  # each rank's trace is named for its rank

    def _ranks_of(self, item: pytest.Item) -> int:
        return self.torchrun.world_size

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Each rank's tests, probes and readings on its own GPU."""
        self._own_gpu(self.torchrun.local_rank)
        super().pytest_sessionstart(session)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A profiled test whose set-up did not pass here never ran here: say so to the others
        (and, as every session does, count a failed set-up for the end's summary)."""
        super().pytest_runtest_logreport(report)
        if report.when == "setup" and not report.passed and report.nodeid in self._profiled:
            reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
            self._share_ending(report.nodeid, f"skipped: {reason.removeprefix('Skipped: ')}" if report.skipped
                               else "error")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """The test ran on this rank; each rank shares how it ended and its trace, rank 0
        judges the test from every rank's (``judge_rank_traces``) and says how it went, and
        every rank passes, skips or fails the test so."""
        if not is_profiled(item):
            return (yield)
        t, key = self.torchrun, item.nodeid
        try:
            with self.backend.around_call(item.nodeid):
                outcome = yield
        except BaseException as exc:  # the body failed, skipped or was interrupted on this rank
            self._share_ending(key, f"skipped: {exc.msg}" if isinstance(exc, pytest.skip.Exception) else "failed",
                               item)
            raise
        prof = self.profiler_of(item)
        traces = self._shared(key, prof)
        t.share(key, {"ended": "passed", "tests": traces})
        if t.judges:
            verdict = self._verdict(key, item)
            t.share(f"verdict {key}", verdict)
        else:
            try:
                verdict = t.verdict(f"verdict {key}")
            except GpuprofError as exc:  # rank 0 never said
                pytest.fail(f"gpuprof: {exc}", pytrace=False)
        # rank 0 read it before it said how the test went
        if traces and prof.trace_path is not None and not self.settings.keep_traces:
            prof.trace_path.unlink(missing_ok=True)
        if verdict.get("skipped"):
            pytest.skip(verdict["skipped"])
        if verdict["failed"]:
            pytest.fail(verdict["message"], pytrace=False)
        return outcome

    def _share_ending(self, key: str, ended: str, item: pytest.Item | None = None) -> None:
        """This rank's test ended without a trace to judge (it failed, skipped, or its set-up
        did); rank 0 still says how the test went for every rank."""
        self.torchrun.share(key, {"ended": ended, "tests": []})
        if self.torchrun.judges:
            self.torchrun.share(f"verdict {key}", self._verdict(key, item))

    def _verdict(self, key: str, item: pytest.Item | None) -> dict[str, Any]:
        """(rank 0) How the test went on every rank: skipped where every rank skipped it,
        failed where one rank did not pass it (naming the first such rank), else judged from
        every rank's trace."""
        t = self.torchrun
        try:
            shared = t.gather(key)
        except GpuprofError as exc:
            return {"failed": True, "message": f"gpuprof: {exc}"}
        # how the ranks ended decides as it does for a distributed test's spawned ranks
        found = rank_verdict([RankOutcome(r, doc.get("ended", "passed"), "") for r, doc in shared.items()],
                             t.timeout_s)
        if found is not None:
            how, why = found
            return {"failed": how == "fail", "skipped": f"gpuprof: {why}" if how == "skip" else None,
                    "message": f"gpuprof: {why}"}
        if item is None:  # (every rank passed its set-up: item is the test)
            return {"failed": True, "message": f"gpuprof: {key} did not run on rank {t.rank}"}
        outcomes = self._read(t, key, shared)
        result = self.judge_rank_traces(item, outcomes)
        item.user_properties.extend(junit_properties(result))
        return {"failed": result.failed, "message": failure_message(result) if result.failed else ""}

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        t = self.torchrun
        if t.judges:
            return super().pytest_terminal_summary(terminalreporter)
        terminalreporter.write_sep("=", "gpuprof")
        terminalreporter.write_line(f"rank {t.rank} of {t.world_size} under torchrun: rank 0 judged each profiled "
                                    "test from every rank's trace, and writes the baselines and reports")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Every rank ends as the worst rank does."""
        super().pytest_sessionfinish(session, exitstatus)
        t = self.torchrun
        t.share("exit status", {"exitstatus": int(session.exitstatus)})
        try:
            statuses = [doc["exitstatus"] for doc in t.gather("exit status").values()]
        except GpuprofError as exc:
            self.outcomes.written.append(str(exc))
            statuses = [int(pytest.ExitCode.TESTS_FAILED)]
        session.exitstatus = max(statuses, key=lambda s: EXIT_SEVERITY.get(s, len(EXIT_SEVERITY)))


def _set_device(gpu: int) -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(gpu)


def _no_device(gpu: int) -> None:
    return None


def _trace_kept(key: str, prof: GpuProf) -> list[dict[str, str | None]]:
    """The trace this rank kept of the test, or why there is none, for rank 0 to read."""
    return [{"nodeid": key, "trace": str(prof.trace_path) if prof.completed else None,
             "message": "" if prof.completed else UNFINISHED_LOOP}]


def _no_trace(key: str, prof: GpuProf) -> list[dict[str, str | None]]:
    return []


def _files_of(t: Torchrun, key: str, shared: Mapping[int, object]) -> list[RankOutcome]:
    """(rank 0) What each rank said of the test: the file naming its trace."""
    return [RankOutcome(r, "passed", "", t.path(key, r)) for r in shared]


def _no_files(t: Torchrun, key: str, shared: Mapping[int, object]) -> list[RankOutcome]:
    return []
