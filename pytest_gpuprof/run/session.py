"""One pytest run under ``--gpuprof``: a plugin object whose hooks profile, judge and report.

``plugin.py`` registers a ``GpuprofSession`` once profiling is on; its hook
methods run each profiled test under the backend's capture, judge the trace
against its baseline (``compare.evaluate``), fail the test on a regression, and
at the end write the baselines recorded and the reports asked for.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..capture.nsight_compute import find_ncu
from ..capture.probes import READINGS, best_readings, measure_machine
from ..capture.profiler import PLAN_KEYS, GpuProf, StepPlan, marker_arguments
from ..capture.ranges import nvtx_range
from ..compare import baseline
from ..compare.counter_verdicts import judge_counters
from ..compare.distributed import combine, entry_for, new_distributed_entry, rank_entry, rank_nodeid, rank_rules
from ..compare.evaluate import UNKNOWN_GPU, TestResult, evaluate, fail_unjudged, new_baseline_entry, of_measurement
from ..compare.pairs import base_entry
from ..compare.rules import Rules
from ..errors import ConfigError, GpuprofError
from ..metrics.measure import measure
from ..metrics.skew import rank_skew
from ..numbers import format_number
from ..options import RULE_OPTIONS, default, option_args
from ..report.document import results_document
from ..report.escaping import terminal_text
from ..report.junit import junit_properties
from ..report.terminal import session_lines
from ..report.words import failure_message
from ..report.writers import write_reports
from ..trace.model import Trace
from .backends import UNFINISHED_LOOP, Backend, NsysInnerBackend, ReplayBackend, TorchBackend
from .bench import GpuBenchmark
from .confirm import confirm, needs_confirmation
from .kernel_profiling import NcuPlan, ncu_plan, profile_kernels
from .rank_processes import RankOutcome, RankProfiling, rank_result
from .rank_processes import verdict as rank_verdict
from .record import NOT_WRITTEN, UPDATED, record_again, replay_recorded
from .role import Process
from .sides import SideRun, Sides, file_in, judge_pairs, needs_pairs, run_side, unusable
from .torchrun import Torchrun
from .xdist_relay import Outbox

#: What a distributed test is judged against in an A/B run (``--gpuprof-base``).
RANKS_NOT_ALONGSIDE = ("a distributed test is judged against its stored baseline only, not against the base revision "
                       "measured alongside")

@dataclass(frozen=True)
class Settings:
    """Resolved options (command line over ini over defaults)."""

    update_baseline: bool
    strict: bool
    baseline_dir: Path
    output_dir: Path
    keep_traces: bool
    replay_dir: Path | None
    plan: StepPlan
    rules: Rules
    backend: str = default("backend")  # "torch" or "nsys"
    nsys_path: str | None = None
    nsys_inner: Path | None = None  # set inside the session nsys re-executes: where its results go
    ncu: bool = False  # every profiled test's heaviest kernels also under Nsight Compute (not in a side)
    ncu_path: str | None = None  # the ncu binary
    timeline_events: int = default("timeline-events")  # events of the timeline sample kept with results, baselines
    baseline_runs: int = default("baseline-runs")  # recorded runs a baseline entry keeps
    confirm: int = default("confirm")  # fresh re-runs that must reproduce a time or ratio failure
    record_processes: int = default("record-processes")  # fresh processes an update records in
    confirm_timeout: float = default("confirm-timeout")  # seconds one such re-run may take
    base: Path | None = None  # the base revision's checkout, measured alongside (run.sides)
    base_python: str | None = None  # its interpreter (None: this one)
    base_only: bool = False  # every test judged against the base, none against stored baselines
    base_pairs: int = default("base-pairs")  # at most this many base/head pairs decide a failure
    torchrun: Torchrun | None = None  # this process is one rank of a session torchrun started (run.torchrun)
    process: Process = Process()  # what this pytest process is for, as its parent said (run.role)
    reports: dict[str, Path | None] = field(default_factory=dict)  # report kind -> path (report.writers.REPORTS)


PROFILER = pytest.StashKey[GpuProf]()
BENCHMARK = pytest.StashKey[Any]()
RESULT = pytest.StashKey[TestResult]()  # a test judged early (bench.GpuBenchmark measured it)
RANKS = pytest.StashKey[list[RankOutcome]]()
#: Under torchrun every rank ends with the worst rank's exit status, worst last: passed, no
#: tests, tests failed, usage error, interrupted, internal error.
EXIT_SEVERITY = {0: 0, 5: 1, 1: 2, 4: 3, 2: 4, 3: 5}  # a distributed test's profiled ranks, once they all passed


def is_profiled(item: pytest.Item) -> bool:
    return item.get_closest_marker("gpuprof") is not None or "gpuprof" in getattr(item, "fixturenames", ())


class GpuprofSession:
    """The run's state and its hooks (registered as a plugin by ``plugin.py``)."""

    def __init__(self, settings: Settings, backend: Backend | None = None) -> None:
        self.settings = settings
        self.backend = backend or self._backend(settings)
        self.results: list[TestResult] = []
        self.skipped: dict[str, str] = {}  # nodeid -> reason
        self._pending: dict[Path, dict[str, dict[str, Any]]] = {}
        self._recorded: dict[Path, list[str]] = {}  # per baseline file: what each update did to its runs
        self.written: list[str] = []  # lines about the files written at the end (baselines, reports)
        self.deferred: list[dict[str, Any]] = []  # inside nsys: profiled tests, judged by the outer session
        self.machine: dict[str, Any] | None = None  # this machine's probes, taken before the first profiled test
        self._probed_again = 0  # how many times the probes were read again (_probe_again)
        self.outbox: Outbox | None = None  # a pytest-xdist worker's: what it finds goes to the controller
        self._profiled: list[str] = []  # the profiled tests collected, in order
        self._base_pass: SideRun | None = None  # the base revision's fresh process for tests judged against it
        self._base_missing = ""  # why none of the profiled tests is at the base revision, if none is
        self.config: pytest.Config | None = None  # the run's, from pytest_sessionstart

    @staticmethod
    def _backend(s: Settings) -> Backend:
        if s.replay_dir is not None:
            return ReplayBackend(s.replay_dir)
        if s.nsys_inner is not None:
            # a distributed test's rank: its test's session holds the capture range open
            return NsysInnerBackend(s.nsys_inner, owns_capture=not s.process.profiled_rank,
                                    process_steps=s.process.under_ncu)
        return TorchBackend(s.output_dir, s.keep_traces)

    # --- the gpuprof fixture object and the rules of one test -------------------
    def profiler_of(self, item: pytest.Item) -> GpuProf:
        """The item's GpuProf, made on first use (fixture or marker form)."""
        prof = item.stash.get(PROFILER, None)
        if prof is None:
            kwargs = marker_arguments(item)
            plan = self.settings.plan.with_overrides(**{k: kwargs.get(k) for k in PLAN_KEYS})
            t = self.settings.torchrun  # under torchrun each rank's trace is named for its rank
            prof = item.stash[PROFILER] = self.backend.profiler(
                item.nodeid if t is None else rank_nodeid(item.nodeid, t.rank), plan)
        return prof

    def rules_for(self, nodeid: str, marker_kwargs: dict[str, Any]) -> Rules:
        """The run's rules with the test's marker on top (``Rules.with_marker``)."""
        return self.settings.rules.with_marker(marker_kwargs, nodeid)

    # --- judging ----------------------------------------------------------------
    @property
    def _counters_after_ncu(self) -> bool:
        """Counters are judged once: after Nsight Compute ran (the end of ``_profiled_call``)
        where it may (``in_process``), else in ``judge``."""
        return self.backend.in_process

    def judge_test(self, item: pytest.Item, prof: GpuProf) -> TestResult:
        """Judge a finished test from the trace the backend gives for it."""
        return self.judge(item.nodeid, marker_arguments(item), lambda: self._trace_here(item, prof))

    def _trace_here(self, item: pytest.Item, prof: GpuProf) -> tuple[Trace, Path | None]:
        """The test's trace from a backend that judges here (``judges_here``), which gives one."""
        found = self.backend.trace(item.nodeid, prof)
        if found is None:
            raise GpuprofError(f"{item.nodeid}: no trace to judge in this process")
        return found

    def judge(self, nodeid: str, marker_kwargs: dict[str, Any],
              load: Callable[[], tuple[Trace, Path | None]]) -> TestResult:
        """Load, measure and judge one test, and remember it; a trace or baseline that cannot
        be read makes an error result naming the file."""
        s = self.settings
        try:
            trace, kept = load()
            m = measure(trace)
            result = of_measurement(nodeid, m, s.backend, s.timeline_events)
            gpu = result.gpu or UNKNOWN_GPU  # (of_measurement names one)
            result.trace, result.machine = kept, self.machine
            result.baseline_file = baseline.baseline_file(s.baseline_dir, nodeid)
            stored = None if s.base_only else baseline.entry(result.baseline_file, nodeid, gpu)
            entry, mismatch = entry_for(stored, 1)
            if entry is None and self.sides is not None:
                entry = self._against_base(result)
            rules = self.rules_for(nodeid, marker_kwargs)
            alongside = self.sides is not None
            evaluate(result, m, entry, rules, update=s.update_baseline, strict=s.strict, alongside=alongside)
            if result.slower_machine and self._probe_again():
                result.machine = self.machine
                evaluate(result, m, entry, rules, update=s.update_baseline, strict=s.strict, alongside=alongside)
            note = (result.alongside or {}).get("note")
            if result.message and note:  # --gpuprof-strict: say why not against base
                result.message += f"; {note}"
            result.notes += [mismatch] if mismatch else []
            if not self._counters_after_ncu:  # no ncu here: its thresholds noted unchecked
                judge_counters(result, rules, s.update_baseline)
            if s.update_baseline:
                new, how = new_baseline_entry(result, entry, s.baseline_runs, keep_counters=s.process.recording)
                self._add_entry(str(result.baseline_file), nodeid, gpu, new, how)
        except GpuprofError as exc:
            result = TestResult(nodeid, "error", message=str(exc))
        self._add_result(result)
        return result

    def rank_profiling(self, item: pytest.Item) -> RankProfiling:
        """How a distributed test's ranks measure (``run.rank_processes.spawn``): each rank measures its
        own steps and is judged against nothing; under nsys each marks them in NVTX inside this
        session's capture range, opened now."""
        return self.backend.rank_profiling(item.nodeid, self._plan_args(), self.settings.timeline_events)

    def judge_ranks(self, nodeid: str, marker_kwargs: dict[str, Any],
                    load: Callable[[], dict[int, tuple[Trace, Path | None]]]) -> TestResult:
        """Judge a distributed test from its ranks' traces (``load``: each rank's trace and the
        file kept of it), each rank against its own entry and the skew against the recorded
        runs' (``compare.distributed``); one result for the test."""
        s = self.settings
        try:
            if self.sides is not None and s.base_only:  # no stored baseline may stand in: it cannot pass unjudged
                raise GpuprofError(f"{RANKS_NOT_ALONGSIDE}: --gpuprof-base-only would leave it unjudged")
            traces = load()
            measured = {rank: measure(trace) for rank, (trace, _) in traces.items()}
            file = baseline.baseline_file(s.baseline_dir, nodeid)
            rules = self.rules_for(nodeid, marker_kwargs)
            ranks = {}
            for rank, m in measured.items():
                ranks[rank] = of_measurement(nodeid, m, s.backend, s.timeline_events)
                # this process probed rank 0's GPU (the first visible): its readings explain rank 0 alone
                ranks[rank].trace, ranks[rank].machine, ranks[rank].baseline_file = (
                    traces[rank][1], self.machine if rank == 0 else None, file)
            gpu = ranks[0].gpu or UNKNOWN_GPU  # (of_measurement names one)
            stored = None if s.base_only else baseline.entry(file, nodeid, gpu)
            entry, mismatch = entry_for(stored, len(ranks))
            for rank, m in measured.items():
                evaluate(ranks[rank], m, rank_entry(entry, rank), rank_rules(rules), update=s.update_baseline,
                         strict=False)
            result = combine(nodeid, ranks, rank_skew(measured), entry, rules, s.update_baseline)
            result.notes += [mismatch] if mismatch else []
            judge_counters(result, rules, s.update_baseline)  # no ncu for ranks: its thresholds noted unchecked
            if self.sides is not None:
                result.notes.append(RANKS_NOT_ALONGSIDE)
            result = fail_unjudged(result, s.strict)
            if s.update_baseline:
                new, how = new_distributed_entry(result, stored, s.baseline_runs)
                self._add_entry(str(file), nodeid, gpu, new, how)
        except (GpuprofError, OSError, ValueError) as exc:  # a rank's file unreadable or damaged, a move refused
            result = TestResult(nodeid, "error", message=str(exc))
        self._add_result(result)
        return result

    def judge_rank_traces(self, item: pytest.Item, outcomes: list[RankOutcome]) -> TestResult:
        """``judge_ranks`` from the Kineto traces the ranks kept (``outcomes``), or replayed;
        the ranks' folder goes once they are read."""
        def load() -> dict[int, tuple[Trace, Path | None]]:
            return self.backend.rank_traces(item.nodeid, self._ranks_of(item), outcomes)

        try:
            return self.judge_ranks(item.nodeid, marker_arguments(item), load)
        finally:
            if outcomes and outcomes[0].results is not None:
                shutil.rmtree(outcomes[0].results.parent, ignore_errors=True)

    @property
    def sides(self) -> Sides | None:
        """The two checkouts of an A/B comparison (``--gpuprof-base``), or None."""
        s = self.settings
        if s.base is None or not self.backend.in_process or self.config is None:
            return None
        return Sides(self.config.rootpath, s.base.resolve(), s.base_python or sys.executable, sys.executable,
                     tuple(self._plan_args()), s.confirm_timeout, self.config.pluginmanager.has_plugin("xdist"))

    def _against_base(self, result: TestResult) -> dict[str, Any] | None:
        """The entry a test without a stored baseline (every test, ``--gpuprof-base-only``) is
        judged against: the base revision measured in a fresh process, once for every such
        test of the session (``run.sides``); None, said in ``result.alongside``, when the
        base did not measure it.  An error when nothing else may judge it: under
        ``--gpuprof-base-only``, or when no profiled test is at the base."""
        nodeid = result.nodeid or ""
        if self._base_missing:
            raise GpuprofError(self._base_missing)
        if self._base_pass is None or nodeid not in self._base_pass.ended:
            self._base_pass = self._measure_base(result.gpu or UNKNOWN_GPU, nodeid)
        problem = unusable(self._base_pass, nodeid, "base")
        note = f"not judged against the base: {problem}" if problem else ""
        if problem and self.settings.base_only:  # no stored baseline may stand in: it cannot pass unjudged
            raise GpuprofError(f"{note} (--gpuprof-base-only judges every profiled test against the base alone)")
        result.alongside = {"base": str(self.settings.base), "against": None if problem else "base", "note": note}
        if problem:
            return None
        return base_entry(self._base_pass.results[nodeid])

    def _check_base_has_tests(self) -> None:
        """A run comparing with a base (``--gpuprof-base``) none of whose profiled tests is there
        by its node id, a path from the rootdir, is a usage error saying where it looked: every
        test would be judged against nothing (a rootdir that is not the base's counterpart).  A
        pytest-xdist worker's would stop the run without its message: its tests judged against
        the base fail with it instead."""
        sides = self.sides
        if sides is None or not self._profiled:
            return
        files = sorted({file_in(sides.base, n) for n in self._profiled})
        if any(f.exists() for f in files):
            return
        self._base_missing = (f"--gpuprof-base: none of the {len(self._profiled)} profiled test(s) is in the base "
                              f"checkout {sides.base} ({files[0]} does not exist); node ids are paths from the "
                              f"rootdir, {sides.head}, and the base must be a checkout of that directory")
        if not self.worker:
            raise pytest.UsageError(self._base_missing)

    def _measure_base(self, gpu: str, nodeid: str) -> SideRun:
        """One fresh process of the base revision measuring ``nodeid`` and every profiled test
        still to come that has no stored baseline for ``gpu`` (all of them, ``--gpuprof-base-only``)."""
        s, sides, config = self.settings, self.sides, self.config
        assert sides is not None and config is not None  # (called where a base is compared, once the run began)
        todo = self._profiled[self._profiled.index(nodeid):] if nodeid in self._profiled and not self.worker \
            else [nodeid]
        if not s.base_only:
            todo = [n for n in todo if n == nodeid or not self._has_baseline(n, gpu)]
        _say(config, f"gpuprof: measuring {len(todo)} test(s) without a stored baseline for {gpu} at the base "
                     f"revision ({s.base}) in a fresh process" if not s.base_only else
             f"gpuprof: measuring {len(todo)} test(s) at the base revision ({s.base}) in a fresh process")
        run = run_side(sides, "base", todo, s.timeline_events)
        _say(config, f"gpuprof: the base revision measured {len(run.results)} of {len(todo)} test(s) in "
                          f"{run.seconds:.1f} s" + (f" ({run.problem})" if run.problem else ""))
        return run

    def _has_baseline(self, nodeid: str, gpu: str) -> bool:
        try:
            return baseline.entry(baseline.baseline_file(self.settings.baseline_dir, nodeid), nodeid, gpu) is not None
        except GpuprofError:
            return True  # judged as today: its own judgment says what is wrong with the file

    def _probe_again(self) -> bool:
        """Read the machine probes once more, keeping each one's best reading, before a
        regression is blamed on the machine (capture.probes); False when no more readings
        may be taken or no GPU is at hand."""
        if self._probed_again >= READINGS - 1:
            return False
        import torch

        if not torch.cuda.is_available():
            return False
        self.machine = best_readings(self.machine, measure_machine(torch.cuda.current_device()))
        self._probed_again += 1
        return True

    # --- what a run found; a pytest-xdist worker sends each part to the controller -----
    def _add_result(self, result: TestResult) -> None:
        self._send("result", result.to_json)
        self.results.append(result)

    def _add_entry(self, file: str, nodeid: str, gpu: str, entry: dict[str, Any], how: str) -> None:
        """A baseline entry to write at the end, and what recording it did to its runs."""
        self._send("entry", lambda: [file, nodeid, gpu, entry, how])
        self._pending.setdefault(Path(file), {}).setdefault(nodeid, {})[gpu] = entry
        self._recorded.setdefault(Path(file), []).append(how)

    def add_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test not measured, and why (a worker sends it to the controller)."""
        self._send("skipped", lambda: [nodeid, reason])
        self.skipped[nodeid] = reason

    @property
    def worker(self) -> bool:
        """A pytest-xdist worker: it sends what it finds to the controller and writes nothing."""
        return self.outbox is not None

    def _send(self, kind: str, content: Callable[[], Any]) -> None:
        if self.outbox is not None:
            self.outbox.send(kind, content)

    def receive(self, kind: str, content: Any) -> None:
        """(the controller) A part a worker sent (``xdist_relay.Inbox``)."""
        if kind == "result":
            self._add_result(TestResult.from_json(content))
        elif kind == "entry":
            self._add_entry(*content)
        else:
            self.add_skipped(*content)

    # --- pytest hooks -----------------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Finish or undo a baseline update that a killed run left midway (a pytest-xdist
        worker's controller has done so)."""
        self.config = session.config
        t = self.settings.torchrun
        if t is not None and self.backend.needs_gpu:  # each rank's tests, probes and readings on its own GPU
            import torch

            if torch.cuda.is_available():
                torch.cuda.set_device(t.local_rank)
        if self.worker:
            return
        try:
            stale = baseline.clean(self.settings.baseline_dir)
        except (GpuprofError, OSError) as exc:
            raise pytest.UsageError(f"gpuprof: {exc}") from None
        if stale:
            self.written.append(f"deleted {len(stale)} temporary file(s) an interrupted run left in "
                                f"{self.settings.baseline_dir}")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._profiled = [item.nodeid for item in session.items if is_profiled(item)]
        self.backend.expect(self._profiled)
        self._check_base_has_tests()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, saying why, a profiled test that cannot be measured here; read the machine
        probes before the first profiled test, except in one side's process of an A/B
        comparison: base and head share the machine, and the probes would add seconds to
        every process of every pair."""
        if not is_profiled(item):
            return
        reason = self._unmeasurable(item)
        if reason:
            self.add_skipped(item.nodeid, reason)
            pytest.skip(f"gpuprof: {reason}")
        if self.backend.needs_gpu and self.machine is None and not self.settings.process.measures_for_another:
            import torch

            t = self.settings.torchrun  # under torchrun: this rank's own GPU, not every rank on the first
            self.machine = measure_machine(torch.cuda.current_device() if t is None else t.local_rank)

    def _unmeasurable(self, item: pytest.Item) -> str | None:
        """Why the backend cannot measure the test here (a distributed test: by its rank 0).
        A test whose marker is wrong never gets here: it failed its set-up first (plugin.py)."""
        ranks = self._ranks_of(item)
        return self.backend.unmeasurable(item.nodeid if ranks <= 1 else rank_nodeid(item.nodeid, 0))

    def _ranks_of(self, item: pytest.Item) -> int:
        """The ranks of the test: its marker's ``world_size``, or torchrun's."""
        t = self.settings.torchrun
        return marker_arguments(item).get("world_size", 1) if t is None else t.world_size

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """A steps() loop the test left unfinished stops profiling before the next test."""
        if PROFILER in item.stash:
            item.stash[PROFILER].close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if (self.settings.torchrun is not None and report.when == "setup" and not report.passed
                and report.nodeid in self._profiled):  # the test never ran here: say so to the others
            reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
            self.share_ending(self.settings.torchrun, report.nodeid,
                              f"skipped: {reason.removeprefix('Skipped: ')}" if report.skipped
                              else "error")

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """Marker form: run the test body once per step.  Replay: do not run it at all.
        pytest-benchmark's fixture: hand it over GPU-aware (bench.GpuBenchmark)."""
        if "benchmark" in pyfuncitem.fixturenames and self._wrap_benchmark(pyfuncitem):
            return None  # pytest runs the test once, with the wrapped fixture
        if not is_profiled(pyfuncitem) or self._spawns_ranks(pyfuncitem):
            return None
        if not self.backend.runs_tests:
            return True
        if "gpuprof" in pyfuncitem.fixturenames:
            return None
        prof = _or_fail(lambda: self.profiler_of(pyfuncitem))
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        for _ in prof.steps():
            pyfuncitem.obj(**args)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        try:
            return (yield from self._profiled_call(item))
        finally:
            if BENCHMARK in item.stash and isinstance(item, pytest.Function):
                item.funcargs["benchmark"] = item.stash[BENCHMARK]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_sep("=", "gpuprof")
        t = self.settings.torchrun
        if t is not None and not t.judges:
            terminalreporter.write_line(f"rank {t.rank} of {t.world_size} under torchrun: rank 0 judged each profiled "
                                        "test from every rank's trace, and writes the baselines and reports")
            return
        for line in self.lines():
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.backend.judges_here:
            self.backend.finish(self.deferred, exitstatus, self.machine, self.skipped)
            return
        if self.worker:  # the controller writes, from what the workers sent
            return
        if not self.finish(session.config):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        t = self.settings.torchrun
        if t is not None:  # every rank ends as the worst rank does
            t.share("exit status", {"exitstatus": int(session.exitstatus)})
            try:
                statuses = [doc["exitstatus"] for doc in t.gather("exit status").values()]
            except GpuprofError as exc:
                self.written.append(str(exc))
                statuses = [int(pytest.ExitCode.TESTS_FAILED)]
            session.exitstatus = max(statuses, key=lambda s: EXIT_SEVERITY.get(s, len(EXIT_SEVERITY)))

    def pytest_unconfigure(self) -> None:
        self.backend.close()

    def _spawns_ranks(self, item: pytest.Item) -> bool:
        """A distributed test's own process, which runs its ranks (``plugin.pytest_pyfunc_call``)."""
        return _or_fail(lambda: marker_arguments(item)).get("world_size", 1) > 1 and self.settings.process.place is None

    def _profiled_call(self, item: pytest.Item):
        if not is_profiled(item):
            return (yield)
        if self.settings.torchrun is not None:
            return (yield from self._across_ranks(item, self.settings.torchrun))
        if self._spawns_ranks(item):  # its ranks ran it (plugin.pytest_pyfunc_call), each profiled
            outcome = yield
            if not self.backend.judges_here:  # judged by the outer session from each rank's process
                marker = _or_fail(lambda: marker_arguments(item))
                self.deferred.append(_or_error(lambda: nsys_ranks(item.nodeid, marker, item.stash[RANKS])))
                return outcome
            result = self.judge_rank_traces(item, item.stash[RANKS])
            item.user_properties.extend(junit_properties(result))
            if result.failed:
                pytest.fail(failure_message(result), pytrace=False)
            return outcome
        self.backend.start()
        if self.backend.runs_tests:
            with nvtx_range(item.nodeid):
                outcome = yield
        else:
            outcome = yield
        prof = _or_fail(lambda: self.profiler_of(item))
        kwargs = _or_fail(lambda: marker_arguments(item))
        if not self.backend.judges_here:  # judged by the outer session once nsys wrote the report
            self.deferred.append({"nodeid": item.nodeid, "marker": kwargs, "completed": prof.completed})
            return outcome
        result = item.stash[RESULT] if RESULT in item.stash else self.judge_test(item, prof)
        sides, process = self.sides, self.settings.process
        if sides is not None and needs_pairs(result):
            judge_pairs(result, self.rules_for(item.nodeid, kwargs), lambda side: run_side(sides, side, [item.nodeid]),
                        sides.base, self.settings.base_pairs, lambda line: _say(item.config, line))
        elif self.settings.confirm and self.backend.in_process and needs_confirmation(result) \
                and not process.confirming:
            confirm(result, self._confirm_args(), item.config.rootpath, self.settings.confirm,
                    self.settings.confirm_timeout, lambda line: _say(item.config, line))
        plan = ncu_plan(kwargs, self.settings.ncu)
        if plan is not None and self.backend.in_process and result.metrics and process.first:
            self._profile_kernels(item, result, plan)
        if result.metrics and self._counters_after_ncu and not process.measures_for_another:
            judge_counters(result, self.rules_for(item.nodeid, kwargs), self.settings.update_baseline)
        item.user_properties.extend(junit_properties(result))  # JUnit XML <properties> (docs/results.md)
        if result.status == "error" or result.failed and process.place is None:  # a rank's verdicts: its test's
            pytest.fail(failure_message(result), pytrace=False)
        return outcome

    def _across_ranks(self, item: pytest.Item, t: Torchrun):
        """Under torchrun: the test ran on this rank; each rank shares how it ended and its
        trace, rank 0 judges the test from every rank's (``judge_ranks``) and says how it
        went, and every rank passes, skips or fails the test so."""
        key = item.nodeid
        self.backend.start()
        try:
            with nvtx_range(item.nodeid) if self.backend.runs_tests else contextlib.nullcontext():
                outcome = yield
        except BaseException as exc:  # the body failed, skipped or was interrupted on this rank
            self.share_ending(t, key, _ended_as(exc), item)
            raise
        prof = _or_fail(lambda: self.profiler_of(item))
        traces = [{"nodeid": key, "trace": str(prof.trace_path) if prof.completed else None,
                   "message": "" if prof.completed else UNFINISHED_LOOP}] if self.backend.in_process \
            else []
        t.share(key, {"ended": "passed", "tests": traces})
        if t.judges:
            verdict = self._torchrun_verdict(key, t, item)
            t.share(f"verdict {key}", verdict)
        else:
            verdict = _or_error(lambda: t.verdict(f"verdict {key}"))
        if traces and not self.settings.keep_traces:  # rank 0 read it before it said how the test went
            prof.trace_path.unlink(missing_ok=True)
        if verdict.get("skipped"):
            pytest.skip(verdict["skipped"])
        if verdict["failed"]:
            pytest.fail(verdict["message"], pytrace=False)
        return outcome

    def share_ending(self, t: Torchrun, key: str, ended: str, item: pytest.Item | None = None) -> None:
        """Under torchrun: this rank's test ended without a trace to judge (it failed, skipped,
        or its set-up did); rank 0 still says how the test went for every rank."""
        t.share(key, {"ended": ended, "tests": []})
        if t.judges:
            t.share(f"verdict {key}", self._torchrun_verdict(key, t, item))

    def _torchrun_verdict(self, key: str, t: Torchrun, item: pytest.Item | None) -> dict[str, Any]:
        """(rank 0) How the test went on every rank: skipped where every rank skipped it,
        failed where one rank did not pass it (naming the first such rank), else judged from
        every rank's trace."""
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
        outcomes = [] if not self.backend.runs_tests else [
            RankOutcome(r, "passed", "", t.path(key, r)) for r in shared]
        result = self.judge_rank_traces(item, outcomes)
        item.user_properties.extend(junit_properties(result))
        return {"failed": result.failed, "message": failure_message(result) if result.failed else ""}

    def _profile_kernels(self, item: pytest.Item, result: TestResult, plan: NcuPlan) -> None:
        """The test's heaviest kernels under Nsight Compute, in a fresh process (``run.kernel_profiling``);
        what goes wrong there is a note, and the test stays judged as it was."""
        say = lambda line: _say(item.config, line)  # noqa: E731
        say(f"gpuprof: {item.nodeid}: profiling its heaviest kernels under Nsight Compute in a fresh process")
        metrics = result.metrics or {}
        try:
            steps = metrics.get("step_count") or 0
            if plan.step >= steps:
                raise GpuprofError(f"ncu's step {plan.step} is not a measured step (the test measured {steps})")
            ncu = find_ncu(self.settings.ncu_path, "--gpuprof-ncu-path")
            result.counters = profile_kernels(item.nodeid, metrics.get("kernels") or {}, plan, ncu,
                                              item.config.rootpath, self._plan_args(), self.settings.confirm_timeout,
                                              item.config.pluginmanager.has_plugin("xdist"))
        except GpuprofError as exc:
            result.notes.append(f"Nsight Compute: {exc}")
            say(f"gpuprof: {item.nodeid}: Nsight Compute: {exc}")
            return
        c = result.counters
        if self.settings.update_baseline and result.baseline_file and result.gpu:  # judge() made its entry
            self._pending[result.baseline_file][item.nodeid][result.gpu]["counters"] = c
        bandwidth = c["memory_bandwidth_utilization"]
        say(f"gpuprof: {item.nodeid}: Nsight Compute profiled {len(c['kernels'])} kernel(s) of {c['profiled']} in "
            f"{c['seconds']} s; memory_bandwidth_utilization "
            f"{'n/a' if bandwidth is None else format_number(bandwidth)}")

    def _wrap_benchmark(self, item: pytest.Function) -> bool:
        """Under --gpuprof with torch.profiler on a CUDA machine, wrap the test's ``benchmark``
        (pytest-benchmark's, an optional dependency: not a fixture of that name of the suite's own)."""
        if not self.backend.in_process or not item.config.pluginmanager.has_plugin("benchmark") \
                or self.settings.torchrun is not None:  # under torchrun rank 0 judges every rank's trace
            return False
        import torch

        if not torch.cuda.is_available():
            return False
        prof = _or_fail(lambda: self.profiler_of(item))

        def metrics_of(p: GpuProf) -> dict[str, Any]:
            """A gated test is judged here, once: _profiled_call reports that result."""
            if not is_profiled(item):
                return measure(self._trace_here(item, p)[0]).metrics
            item.stash[RESULT] = self.judge_test(item, p)
            return item.stash[RESULT].metrics or {}

        original = item.funcargs["benchmark"]
        item.stash[BENCHMARK] = original  # put back after the call: pytest-benchmark reports from it
        item.funcargs["benchmark"] = GpuBenchmark(original, prof, metrics_of)
        return True

    def _confirm_args(self) -> list[str]:
        """This run's judging options, for a re-run in a fresh process (``confirm``)."""
        s, r = self.settings, self.settings.rules
        return option_args({"": True, "baseline-dir": s.baseline_dir,
                            **{o.name: getattr(r, o.name.replace("-", "_")) for o in RULE_OPTIONS},
                            "threshold": [t.text for t in r.thresholds]}) + self._plan_args()

    def _plan_args(self) -> list[str]:
        """This run's step plan as options, for a measurement in a fresh process."""
        plan = self.settings.plan
        return option_args({"wait": plan.wait, "warmup": plan.warmup, "active": plan.active, "flush-l2": plan.flush_l2})

    # --- end of run -------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        """The results document of the run so far (report.document)."""
        s = self.settings
        return results_document(self.results, self.skipped, s.backend, s.baseline_dir, s.replay_dir,
                                self.backend.kept_traces)

    def lines(self) -> list[str]:
        """The gpuprof section of the terminal, rendered from the results document."""
        return session_lines(self.document(), (r.to_json() for r in self.results), self.written,
                             inside_nsys=not self.backend.judges_here)

    def finish(self, config: pytest.Config | None = None) -> bool:
        """End of run: write the pending baselines, all files or none, then record them again
        in fresh processes (``record_processes``), then the report files; ``written`` gets
        one line per file.  False when the baselines were refused (every file left as it
        was), when a fresh process recorded nothing, when a strict gate left profiled tests
        unmeasured, or when a report asked for could not be written."""
        refused = False
        recorded = bool(self._pending)
        try:
            if self._pending:
                baseline.update_all(self.settings.baseline_dir, self._pending)
        except (GpuprofError, OSError) as exc:
            self.written.append(f"{NOT_WRITTEN}, every file left as it was: {exc}")
            refused = True
        else:
            for file, entries in sorted(self._pending.items()):
                hows = Counter(self._recorded.get(file, ()))
                self.written.append(f"{UPDATED}{len(entries)} test(s) in {file} ("
                                    + "; ".join(how if n == len(entries) else f"{n}: {how}"
                                                for how, n in hows.items()) + ")")
            if recorded and self.settings.replay_dir is not None:
                self.written.append(replay_recorded(self.settings.replay_dir, self.settings.record_processes))
        self._pending.clear()
        if recorded and not refused and config is not None and self._records_again():
            problems = record_again(list(config.invocation_params.args), config.invocation_params.dir,
                                    self.settings.record_processes, self.settings.baseline_runs,
                                    lambda line: _say(config, line))
            self.written += [f"--gpuprof-record-processes: {p}" for p in problems]
            refused = bool(problems)
        unmeasured = self.settings.strict and bool(self.skipped)
        if unmeasured:
            self.written.append(f"--gpuprof-strict: {len(self.skipped)} of {len(self.skipped) + len(self.results)} "
                                "profiled test(s) were not measured (skipped, see above): the gate fails")
        t = self.settings.torchrun
        if not self.settings.process.recording and (t is None or t.judges):  # the first process (rank 0) writes them
            lines, reported = write_reports(self.document(), self.settings.reports)
            self.written += lines
            refused = refused or not reported
        return not (refused or unmeasured)

    def _records_again(self) -> bool:
        """An update that measured its tests records them again in fresh processes, unless it
        is one of those processes or replayed kept traces (the same traces again)."""
        s = self.settings
        return (s.update_baseline and s.record_processes > 1 and not s.process.recording and s.replay_dir is None
                and s.torchrun is None)


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


def _say(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, while a test runs (its output is being captured); printed
    where pytest has no terminal (the nsys backend's outer session)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        print(terminal_text(line), flush=True)
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(terminal_text(line))


def _ended_as(exc: BaseException) -> str:
    """How a test's body ended, from what it raised, in ``ranks.RankOutcome``'s words:
    ``skipped: REASON``, or failed."""
    return f"skipped: {exc.msg}" if isinstance(exc, pytest.skip.Exception) else "failed"


def _or_error(make: Callable[[], Any]) -> Any:
    """The value, or the test failed with gpuprof's error (a rank that never said)."""
    try:
        return make()
    except GpuprofError as exc:
        problem = str(exc)
    pytest.fail(f"gpuprof: {problem}", pytrace=False)


def _or_fail(make: Callable[[], Any]) -> Any:
    """The value, or the test failed with the message of a bad marker or option."""
    try:
        return make()
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
