"""The plugin object of a pytest process that profiles its tests and judges them here: the
main process, a pytest-xdist worker, an A/B side, a confirmation re-run, a recording's later
process, a distributed test's profiled rank, a replay.

``plugin.py`` chooses the object of its process once (``_register_roles``) and builds it with
what it needs: its backend (``backend_of``), its judge, the base revision's entries
(``run.base_revision``) and, in a pytest-xdist worker, the relay to the controller.  Two
roles are subclasses: ``torchrun_session.TorchrunSession`` (a rank of a session torchrun
started) and ``nsys_backend.NsysInnerSession`` (the session inside nsys, which hands its tests
to the session outside instead of judging them).  What else differs between the processes is
a small strategy picked when the session is built, never asked about in a hook: whether the
machine probes are read (``Probes``), whether the steps after judging run, which verdicts fail
a test, whether the test bodies run, whether this process writes what the run found at its
end (``WritesAtEnd``) or relays it (``Relays``).

Its hook methods run each profiled test under the backend's capture, have it judged
(``compare.judge``), run the steps after judging (``hookspec.pytest_gpuprof_judged``), fail the
test on a regression, and at the end have what the run found written (``outcomes.Outcomes``).
A distributed test whose ranks this process spawns is measured by its ranks
(``rank_roles.RankSpawner``), which hand them back here (``ranks_ended``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..capture.marker import is_profiled, marker_of
from ..capture.probes import READINGS, best_readings, measure_machine
from ..capture.profiler import GpuProf
from ..compare import baseline
from ..compare.distributed import rank_nodeid
from ..compare.evaluate import TestResult
from ..compare.judge import AgainstBase, Judge, Traces
from ..errors import GpuprofError
from ..metrics.measure import measure
from ..report.junit import junit_properties
from ..report.words import failure_message
from ..trace.model import Trace
from .backends import Backend, ReplayBackend, TorchBackend
from .bench import JUDGED, ORIGINAL
from .outcomes import Outcomes, Relay, kept_here
from .rank_processes import RankOutcome, RankProfiling
from .settings import Settings

PROFILER = pytest.StashKey[GpuProf]()

def backend_of(s: Settings) -> Backend:
    """Where the traces of a session that judges here come from: kept traces (a replay), else
    torch.profiler in this process (the session inside nsys has its own, ``nsys_backend``)."""
    if s.replay_dir is not None:
        return ReplayBackend(s.replay_dir)
    return TorchBackend(s.output_dir, s.keep_traces)


def current_gpu() -> int:
    """This process's current GPU."""
    import torch

    return torch.cuda.current_device()


class Probes:
    """This machine's probes (``capture.probes``): read before the first profiled test, on the
    GPU the tests run on, and read once more, keeping each one's best reading, before a
    regression is blamed on the machine."""

    def __init__(self, gpu: Callable[[], int] = current_gpu) -> None:
        self.readings: dict[str, float] | None = None
        self._gpu = gpu
        self._again = 0  # how many times they were read again

    def read_once(self) -> None:
        """Before a profiled test: read them, unless they were."""
        if self.readings is None:
            self.readings = measure_machine(self._gpu())

    def again(self) -> dict[str, float] | None:
        """The probes read once more, each keeping its best reading; None when no more readings
        may be taken or no GPU is at hand."""
        if self._again >= READINGS - 1:
            return None
        import torch

        if not torch.cuda.is_available():
            return None
        self.readings = best_readings(self.readings, measure_machine(torch.cuda.current_device()))
        self._again += 1
        return self.readings


class Unprobed(Probes):
    """A process that measures no GPU here (a replay), or measures for another (an A/B side, a
    profiled rank, the process under ncu): base and head share the machine, and the probes would
    add seconds to every process of every pair."""

    def read_once(self) -> None:
        return None


class WritesAtEnd:
    """The process that writes what the run found (alone, or pytest-xdist's controller): it
    first finishes or undoes a baseline update a killed run left midway, and at the end writes
    the baselines and reports (``Outcomes.finish``)."""

    def __init__(self, records_again: bool, writes_reports: bool) -> None:
        self.records_again = records_again
        self.writes_reports = writes_reports

    def start(self, outcomes: Outcomes) -> None:
        s = outcomes.settings
        try:
            stale = baseline.clean(s.baseline_dir)
        except (GpuprofError, OSError) as exc:
            raise pytest.UsageError(f"gpuprof: {exc}") from None
        if stale:
            outcomes.written.append(f"deleted {len(stale)} temporary file(s) an interrupted run left in "
                                    f"{s.baseline_dir}")

    def end(self, outcomes: Outcomes, config: pytest.Config) -> bool:
        """False when what was written fails the run."""
        return outcomes.finish(config, self.records_again, writes_reports=self.writes_reports)


class Relays(WritesAtEnd):
    """A pytest-xdist worker: what it finds went to the controller, which cleans up and writes."""

    def __init__(self) -> None:
        super().__init__(records_again=False, writes_reports=False)

    def start(self, outcomes: Outcomes) -> None:
        return None

    def end(self, outcomes: Outcomes, config: pytest.Config) -> bool:
        return True


class GpuprofSession:
    """The run's profiling and judging, as pytest hooks (registered by ``plugin.py``)."""

    def __init__(self, settings: Settings, backend: Backend | None = None, *, judge: Judge | None = None,
                 against_base: AgainstBase | None = None, relay: Relay | None = None,
                 gpu: Callable[[], int] = current_gpu) -> None:
        s = self.settings = settings
        process = s.process
        self.backend = backend = backend or backend_of(settings)
        self.judge = judge or s.judge(alongside=s.base is not None and backend.in_process)
        self.against_base = against_base
        self.outcomes = Outcomes(settings, backend.kept_traces, relay or kept_here, self.judge.baselines)
        self.ending = self._ending() if relay is None else Relays()
        self.probes = Probes(gpu) if backend.needs_gpu and not process.measures_for_another else Unprobed(gpu)
        # Nsight Compute's counters are judged with the test unless it may run after it, here
        self._counters_with_the_test = not backend.in_process
        self._after_judging = self._steps_after_judging if backend.in_process and not process.measures_for_another \
            else _nothing_after_judging
        # a distributed test's rank: its test's process fails it on the ranks' verdicts
        self._fails = _fails_on_error if process.place is not None else _fails_on_failure
        # a distributed test's ranks measure it, unless this is one of them
        self._measured_here = _every_test if process.place is not None else _test_of_one_process
        self._body = self._steps_of_the_body if backend.runs_tests else _no_body  # a replay runs none
        self._profiled: list[str] = []  # the profiled tests collected, in order

    def _ending(self) -> WritesAtEnd:
        """How a process that writes what the run found ends."""
        s = self.settings
        return WritesAtEnd(s.records_again, writes_reports=True)

    # --- the gpuprof fixture object ---------------------------------------------
    def profiler_of(self, item: pytest.Item) -> GpuProf:
        """The item's GpuProf, made on first use (fixture or marker form)."""
        prof = item.stash.get(PROFILER, None)
        if prof is None:
            plan = marker_of(item).plan(self.settings.plan)
            prof = item.stash[PROFILER] = self.backend.profiler(self._trace_name(item), plan)
        return prof

    def _trace_name(self, item: pytest.Item) -> str:
        """What the test's trace is named for."""
        return item.nodeid

    # --- judging ----------------------------------------------------------------
    def judge_test(self, item: pytest.Item, prof: GpuProf) -> TestResult:
        """Judge a test measured here from the trace the backend gives for it, and remember it;
        where Nsight Compute may run after it (``in_process``), its counters are judged then."""
        return self.outcomes.add(self.judge.judge(
            item.nodeid, marker_of(item).arguments, lambda: {0: self._trace_here(item, prof)},
            machine=self.probes.readings, against_base=self.against_base, probe_again=self.probes.again,
            counters=self._counters_with_the_test))

    def metrics_of(self, item: pytest.Item, prof: GpuProf) -> dict[str, Any]:
        """The metrics of a test measured here that gpuprof does not gate (pytest-benchmark's)."""
        return measure(self._trace_here(item, prof)[0]).metrics

    def _trace_here(self, item: pytest.Item, prof: GpuProf) -> tuple[Trace, Path | None]:
        """The test's trace from the backend, which gives one where the test is judged here."""
        found = self.backend.trace(item.nodeid, prof)
        if found is None:
            raise GpuprofError(f"{item.nodeid}: no trace to judge in this process")
        return found

    def rank_profiling(self, item: pytest.Item) -> RankProfiling:
        """How a distributed test's ranks measure (``rank_roles.RankSpawner``): each rank
        measures its own steps and is judged against nothing; under nsys each marks them in
        NVTX inside this session's capture range, opened now."""
        return self.backend.rank_profiling(item.nodeid, self.settings.plan_args(), self.settings.timeline_events)

    def ranks_ended(self, item: pytest.Item, outcomes: list[RankOutcome]) -> None:
        """A distributed test whose ranks this process spawned (a replay: none) passed on every
        rank: judged from each rank's trace, and failed on a regression."""
        result = self.judge_rank_traces(item, outcomes)
        item.user_properties.extend(junit_properties(result))
        if result.failed:
            pytest.fail(failure_message(result), pytrace=False)

    def judge_rank_traces(self, item: pytest.Item, outcomes: list[RankOutcome]) -> TestResult:
        """A distributed test judged from the Kineto traces its ranks kept (``outcomes``), or
        replayed, and remembered; the ranks' folder goes once they are read."""
        def load() -> Traces:
            return self.backend.rank_traces(item.nodeid, self._ranks_of(item), outcomes)

        try:
            return self.outcomes.add(self.judge.judge(item.nodeid, marker_of(item).arguments, load,
                                                      distributed=True, machine=self.probes.readings))
        finally:
            if outcomes and outcomes[0].results is not None:
                shutil.rmtree(outcomes[0].results.parent, ignore_errors=True)

    def add_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test not measured, and why."""
        self.outcomes.add_skipped(nodeid, reason)

    def _ranks_of(self, item: pytest.Item) -> int:
        """The ranks of the test: its marker's ``world_size``."""
        return marker_of(item).world_size

    # --- pytest hooks -----------------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Finish or undo a baseline update that a killed run left midway (a pytest-xdist
        worker's controller has done so)."""
        self.ending.start(self.outcomes)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._profiled = [item.nodeid for item in session.items if is_profiled(item)]
        self.backend.expect(self._profiled)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, saying why, a profiled test that cannot be measured here; read the machine
        probes before the first profiled test (``Probes``)."""
        if not is_profiled(item):
            return
        ranks = self._ranks_of(item)  # a distributed test: by its rank 0
        reason = self.backend.unmeasurable(item.nodeid if ranks <= 1 else rank_nodeid(item.nodeid, 0))
        if reason:
            self.add_skipped(item.nodeid, reason)
            pytest.skip(f"gpuprof: {reason}")
        self.probes.read_once()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A profiled test collected here whose set-up failed (a mistake in its marker, a
        fixture that raised): never measured, and said so at the end."""
        if report.when == "setup" and report.failed and report.nodeid in self._profiled:
            self.outcomes.add_failed_set_up(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """A steps() loop the test left unfinished stops profiling before the next test."""
        if PROFILER in item.stash:
            item.stash[PROFILER].close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """Marker form: run the test body once per step.  Replay: do not run it at all.  A
        test pytest-benchmark times (``bench.BenchmarkGate``) runs once, as written."""
        if ORIGINAL in pyfuncitem.stash or not is_profiled(pyfuncitem) or not self._measured_here(pyfuncitem):
            return None
        return self._body(pyfuncitem)

    def _steps_of_the_body(self, pyfuncitem: pytest.Function) -> bool | None:
        """The body run once per step, unless it runs its own (the ``gpuprof`` fixture)."""
        if "gpuprof" in pyfuncitem.fixturenames:
            return None
        prof = self.profiler_of(pyfuncitem)
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        for _ in prof.steps():
            pyfuncitem.obj(**args)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """The test run under the backend's capture, then judged (``_measured``)."""
        if not is_profiled(item) or not self._measured_here(item):  # its ranks measure it
            return (yield)
        with self.backend.around_call(item.nodeid):
            outcome = yield
        self._measured(item, self.profiler_of(item), marker_of(item).arguments)
        return outcome

    def _measured(self, item: pytest.Item, prof: GpuProf, arguments: Mapping[str, object]) -> None:
        """A test measured here, judged here, the steps after judging run, and the test failed
        on it."""
        result = item.stash[JUDGED] if JUDGED in item.stash else self.judge_test(item, prof)
        self._after_judging(item, result, arguments)
        item.user_properties.extend(junit_properties(result))  # JUnit XML <properties> (docs/results.md)
        if self._fails(result):
            pytest.fail(failure_message(result), pytrace=False)

    def _steps_after_judging(self, item: pytest.Item, result: TestResult, arguments: Mapping[str, object]) -> None:
        """(a test measured in this process, for this run) The steps after judging
        (``hookspec.pytest_gpuprof_judged``), then its Nsight Compute counters judged."""
        if result.metrics:
            item.config.hook.pytest_gpuprof_judged(item=item, result=result, arguments=dict(arguments))
            self.judge.counters(result, arguments)  # once Nsight Compute ran, or did not

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("=", "gpuprof")
        for line in self.outcomes.lines():
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.ending.end(self.outcomes, session.config):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_unconfigure(self) -> None:
        self.backend.close()


def _nothing_after_judging(item: pytest.Item, result: TestResult, arguments: Mapping[str, object]) -> None:
    """A process that measures for another, or a replay: no step after judging runs here."""


def _fails_on_failure(result: TestResult) -> bool:
    return result.failed or result.status == "error"


def _fails_on_error(result: TestResult) -> bool:
    """A distributed test's rank: its verdicts are its test's, judged with every rank's."""
    return result.status == "error"


def _every_test(item: pytest.Item) -> bool:
    return True


def _test_of_one_process(item: pytest.Item) -> bool:
    return marker_of(item).world_size <= 1


def _no_body(pyfuncitem: pytest.Function) -> bool:
    """A replay: the test's body does not run."""
    return True
