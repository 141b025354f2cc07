"""The plugin object of a pytest process that profiles its tests: the main process, a
pytest-xdist worker, an A/B side, a confirmation re-run, a recording's later process, a
distributed test's rank, the session inside nsys.

``plugin.py`` registers a ``GpuprofSession`` once profiling is on (a rank of a session
torchrun started gets ``torchrun_session.TorchrunSession``); its hook methods run each
profiled test under the backend's capture, have it judged (``compare.judge``), run the
steps after judging (``hookspec.pytest_gpuprof_judged``), fail the test on a regression,
and at the end have what the run found written (``outcomes.Outcomes``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..capture.marker import is_profiled, marker_of
from ..capture.probes import READINGS, best_readings, measure_machine
from ..capture.profiler import GpuProf
from ..capture.ranges import nvtx_range
from ..compare import baseline
from ..compare.baseline import Entry
from ..compare.distributed import rank_nodeid
from ..compare.evaluate import TestResult
from ..compare.judge import Traces
from ..errors import GpuprofError
from ..metrics.measure import measure
from ..options import option_args
from ..report.junit import junit_properties
from ..report.words import failure_message
from ..trace.model import Trace
from .backends import Backend, NsysInnerBackend, ReplayBackend, TorchBackend
from .bench import JUDGED, ORIGINAL
from .outcomes import Outcomes, Relay, kept_here
from .rank_processes import RankOutcome, RankProfiling, rank_result
from .settings import Settings
from .sides import Sides

PROFILER = pytest.StashKey[GpuProf]()
RANKS = pytest.StashKey[list[RankOutcome]]()


class GpuprofSession:
    """The run's profiling and judging, as pytest hooks (registered by ``plugin.py``)."""

    def __init__(self, settings: Settings, backend: Backend | None = None, relay: Relay | None = None) -> None:
        s = self.settings = settings
        self.backend = backend or self._backend(settings)
        self.worker = relay is not None  # a pytest-xdist worker: what it finds goes to the controller
        self.outcomes = Outcomes(settings, self.backend.kept_traces, relay or kept_here)
        self.judge = s.judge(alongside=s.base is not None and self.backend.in_process)
        self.against_base: Callable[[TestResult], Entry | None] | None = None  # run.base_revision's
        self.deferred: list[dict[str, Any]] = []  # inside nsys: profiled tests, judged by the outer session
        self.machine: dict[str, Any] | None = None  # this machine's probes, taken before the first profiled test
        self._probed_again = 0  # how many times the probes were read again (_probe_again)
        self._profiled: list[str] = []  # the profiled tests collected, in order

    @staticmethod
    def _backend(s: Settings) -> Backend:
        if s.replay_dir is not None:
            return ReplayBackend(s.replay_dir)
        if s.nsys_inner is not None:
            # a distributed test's rank: its test's session holds the capture range open
            return NsysInnerBackend(s.nsys_inner, owns_capture=not s.process.profiled_rank,
                                    process_steps=s.process.under_ncu)
        return TorchBackend(s.output_dir, s.keep_traces)

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
            item.nodeid, marker_of(item).arguments, lambda: {0: self._trace_here(item, prof)}, machine=self.machine,
            against_base=self.against_base, probe_again=self._probe_again, counters=not self.backend.in_process))

    def metrics_of(self, item: pytest.Item, prof: GpuProf) -> dict[str, Any]:
        """The metrics of a test measured here that gpuprof does not gate (pytest-benchmark's)."""
        return measure(self._trace_here(item, prof)[0]).metrics

    def _trace_here(self, item: pytest.Item, prof: GpuProf) -> tuple[Trace, Path | None]:
        """The test's trace from a backend that judges here (``judges_here``), which gives one."""
        found = self.backend.trace(item.nodeid, prof)
        if found is None:
            raise GpuprofError(f"{item.nodeid}: no trace to judge in this process")
        return found

    def rank_profiling(self, item: pytest.Item) -> RankProfiling:
        """How a distributed test's ranks measure (``run.rank_processes.spawn``): each rank
        measures its own steps and is judged against nothing; under nsys each marks them in
        NVTX inside this session's capture range, opened now."""
        return self.backend.rank_profiling(item.nodeid, self.plan_args(), self.settings.timeline_events)

    def judge_rank_traces(self, item: pytest.Item, outcomes: list[RankOutcome]) -> TestResult:
        """A distributed test judged from the Kineto traces its ranks kept (``outcomes``), or
        replayed, and remembered; the ranks' folder goes once they are read."""
        def load() -> Traces:
            return self.backend.rank_traces(item.nodeid, self._ranks_of(item), outcomes)

        try:
            return self.outcomes.add(self.judge.judge(item.nodeid, marker_of(item).arguments, load,
                                                      distributed=True, machine=self.machine))
        finally:
            if outcomes and outcomes[0].results is not None:
                shutil.rmtree(outcomes[0].results.parent, ignore_errors=True)

    def sides(self, config: pytest.Config) -> Sides | None:
        """The two checkouts of an A/B comparison (``--gpuprof-base``), or None."""
        s = self.settings
        if s.base is None or not self.backend.in_process:
            return None
        return Sides(config.rootpath, s.base.resolve(), s.base_python or sys.executable, sys.executable,
                     tuple(self.plan_args()), s.confirm_timeout, config.pluginmanager.has_plugin("xdist"))

    def _probe_again(self) -> dict[str, Any] | None:
        """The machine probes read once more, keeping each one's best reading, before a
        regression is blamed on the machine (capture.probes); None when no more readings may
        be taken or no GPU is at hand."""
        if self._probed_again >= READINGS - 1:
            return None
        import torch

        if not torch.cuda.is_available():
            return None
        self.machine = best_readings(self.machine, measure_machine(torch.cuda.current_device()))
        self._probed_again += 1
        return self.machine

    def add_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test not measured, and why."""
        self.outcomes.add_skipped(nodeid, reason)

    # --- pytest hooks -----------------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Finish or undo a baseline update that a killed run left midway (a pytest-xdist
        worker's controller has done so)."""
        if self.worker:
            return
        try:
            stale = baseline.clean(self.settings.baseline_dir)
        except (GpuprofError, OSError) as exc:
            raise pytest.UsageError(f"gpuprof: {exc}") from None
        if stale:
            self.outcomes.written.append(f"deleted {len(stale)} temporary file(s) an interrupted run left in "
                                         f"{self.settings.baseline_dir}")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._profiled = [item.nodeid for item in session.items if is_profiled(item)]
        self.backend.expect(self._profiled)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, saying why, a profiled test that cannot be measured here; read the machine
        probes before the first profiled test, except in one side's process of an A/B
        comparison: base and head share the machine, and the probes would add seconds to
        every process of every pair."""
        if not is_profiled(item):
            return
        ranks = self._ranks_of(item)  # a distributed test: by its rank 0
        reason = self.backend.unmeasurable(item.nodeid if ranks <= 1 else rank_nodeid(item.nodeid, 0))
        if reason:
            self.add_skipped(item.nodeid, reason)
            pytest.skip(f"gpuprof: {reason}")
        if self.backend.needs_gpu and self.machine is None and not self.settings.process.measures_for_another:
            self.machine = measure_machine(self._probed_gpu())

    def _probed_gpu(self) -> int:
        """The GPU the machine probes read: this process's current one."""
        import torch

        return torch.cuda.current_device()

    def _ranks_of(self, item: pytest.Item) -> int:
        """The ranks of the test: its marker's ``world_size``."""
        return marker_of(item).world_size

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """A steps() loop the test left unfinished stops profiling before the next test."""
        if PROFILER in item.stash:
            item.stash[PROFILER].close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """Marker form: run the test body once per step.  Replay: do not run it at all.  A
        test pytest-benchmark times (``bench.BenchmarkGate``) runs once, as written."""
        if ORIGINAL in pyfuncitem.stash or not is_profiled(pyfuncitem) or self._spawns_ranks(pyfuncitem):
            return None
        if not self.backend.runs_tests:
            return True
        if "gpuprof" in pyfuncitem.fixturenames:
            return None
        prof = self.profiler_of(pyfuncitem)
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        for _ in prof.steps():
            pyfuncitem.obj(**args)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        if not is_profiled(item):
            return (yield)
        if self._spawns_ranks(item):  # its ranks ran it (plugin.pytest_pyfunc_call), each profiled
            outcome = yield
            self._judge_ranks(item)
            return outcome
        return (yield from self._profiled_call(item))

    def _profiled_call(self, item: pytest.Item):
        """The test run under the backend's capture, then judged here (or, inside nsys, kept
        for the outer session), the steps after judging run, and the test failed on it."""
        self.backend.start()
        if self.backend.runs_tests:
            with nvtx_range(item.nodeid):
                outcome = yield
        else:
            outcome = yield
        prof = self.profiler_of(item)
        spec = marker_of(item)
        if not self.backend.judges_here:  # judged by the outer session once nsys wrote the report
            self.deferred.append({"nodeid": item.nodeid, "marker": dict(spec.arguments), "completed": prof.completed})
            return outcome
        result = item.stash[JUDGED] if JUDGED in item.stash else self.judge_test(item, prof)
        if result.metrics and self.backend.in_process and not self.settings.process.measures_for_another:
            item.config.hook.pytest_gpuprof_judged(item=item, result=result, arguments=dict(spec.arguments))
            self.judge.counters(result, spec.arguments)  # once Nsight Compute ran, or did not
        item.user_properties.extend(junit_properties(result))  # JUnit XML <properties> (docs/results.md)
        if result.status == "error" or result.failed and self.settings.process.place is None:
            pytest.fail(failure_message(result), pytrace=False)  # a rank's verdicts: its test's
        return outcome

    def _judge_ranks(self, item: pytest.Item) -> None:
        """A distributed test whose ranks this process spawned: judged from each rank's trace,
        or, inside nsys, kept for the outer session with each rank's process."""
        if not self.backend.judges_here:
            try:
                self.deferred.append(nsys_ranks(item.nodeid, dict(marker_of(item).arguments), item.stash[RANKS]))
            except GpuprofError as exc:
                pytest.fail(f"gpuprof: {exc}", pytrace=False)
            return
        result = self.judge_rank_traces(item, item.stash[RANKS])
        item.user_properties.extend(junit_properties(result))
        if result.failed:
            pytest.fail(failure_message(result), pytrace=False)

    def _spawns_ranks(self, item: pytest.Item) -> bool:
        """A distributed test's own process, which runs its ranks (``plugin.pytest_pyfunc_call``)."""
        return marker_of(item).world_size > 1 and self.settings.process.place is None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_sep("=", "gpuprof")
        for line in self.outcomes.lines(inside_nsys=not self.backend.judges_here):
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.backend.judges_here:
            self.backend.finish(self.deferred, exitstatus, self.machine, self.outcomes.skipped)
            return
        if self.worker:  # a worker: the controller writes, from what the workers sent
            return
        if not self.finish(session.config):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def finish(self, config: pytest.Config | None) -> bool:
        """The run's baselines and reports written (``Outcomes.finish``): False when it fails the run."""
        s = self.settings
        return self.outcomes.finish(config, s.records_again, writes_reports=not s.process.recording)

    def pytest_unconfigure(self) -> None:
        self.backend.close()

    # --- options for a measurement in a fresh process ---------------------------
    def plan_args(self) -> list[str]:
        """This run's step plan as options."""
        plan = self.settings.plan
        return option_args({"wait": plan.wait, "warmup": plan.warmup, "active": plan.active, "flush-l2": plan.flush_l2})

    def judging_args(self) -> list[str]:
        """This run's judging options and steps, for a re-run that judges as it does (``confirm``)."""
        return option_args({"": True, "baseline-dir": self.settings.baseline_dir,
                            **self.settings.rules.option_values()}) + self.plan_args()


def nsys_ranks(nodeid: str, marker: dict[str, Any], outcomes: list[RankOutcome]) -> dict[str, Any]:
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
