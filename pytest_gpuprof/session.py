"""One pytest run's gpuprof state: settings, per-test evaluation, baseline updates."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import baseline, health, timeline
from .capture import PLAN_KEYS, GpuProf, StepPlan
from .compare import (
    Rules,
    Threshold,
    Verdict,
    distribution,
    judge,
    parse_threshold,
    stored_samples,
    test_status,
)
from .errors import BaselineError, ConfigError, GpuprofError
from .kineto import load_kineto
from .metrics import METRICS, measure
from .trace import Trace

BACKENDS = ("torch", "nsys")
BACKEND_NAMES = {"torch": "torch.profiler", "nsys": "Nsight Systems"}  # as reports name them


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
    backend: str = "torch"  # "torch" or "nsys"
    nsys_path: str | None = None
    nsys_inner: Path | None = None  # set inside the session nsys re-executes: where its results go
    timeline_events: int = 600  # events of the timeline sample kept with results and baselines
    reports: dict[str, Path | None] = field(default_factory=dict)  # report kind -> path (results.REPORTS)


@dataclass
class TestResult:
    """What gpuprof concluded about one profiled test."""

    nodeid: str
    status: str  # passed | improved | undecided | unstable | failed | no baseline | updated | error
    gpu: str | None = None
    metrics: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    baseline_file: Path | None = None
    trace: Path | None = None
    message: str = ""
    backend: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    timeline: dict[str, Any] | None = None  # timeline.sample of this run
    baseline_entry: dict[str, Any] | None = None  # the whole stored entry (backend, environment, timeline)
    unstable: list[str] = field(default_factory=list)  # health.assess: why the times cannot be trusted
    per_step: dict[str, Any] | None = None  # this run's per-step samples as stored (compare.stored_samples)
    distribution: dict[str, Any] | None = None  # summaries of this run's time series over all steps

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")


def trace_name(nodeid: str) -> str:
    """File name of a test's trace: the node id with every unsafe character replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_") + ".pt.trace.json.gz"


class GpuprofSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.results: list[TestResult] = []
        self.skipped: dict[str, str] = {}  # nodeid -> reason
        self._pending: dict[Path, dict[str, dict[str, Any]]] = {}
        self.written: list[str] = []  # lines about the files written at the end (baselines, reports)
        self.nsys_tests: list[dict[str, Any]] = []  # inside nsys: profiled tests, judged outside
        self._capturing = False
        self._tmp = tempfile.TemporaryDirectory(prefix="gpuprof-")

    # --- capture ---------------------------------------------------------
    def new_profiler(self, nodeid: str, marker_kwargs: dict[str, Any]) -> GpuProf:
        plan = self.settings.plan.with_overrides(
            **{k: marker_kwargs.get(k) for k in PLAN_KEYS}
        )
        if self.settings.replay_dir is not None:
            return GpuProf(plan)
        if self.settings.nsys_inner is not None:
            return GpuProf(plan, nvtx_only=True)
        folder = self.settings.output_dir / "traces" if self.settings.keep_traces else Path(self._tmp.name)
        folder.mkdir(parents=True, exist_ok=True)
        return GpuProf(plan, folder / trace_name(nodeid))

    def rules_for(self, nodeid: str, marker_kwargs: dict[str, Any]) -> Rules:
        """Global rules with the marker's thresholds and tolerances on top."""
        origin = f"@pytest.mark.gpuprof on {nodeid}"
        own = marker_kwargs.get("thresholds") or ()
        if isinstance(own, str):
            own = (own,)
        mine: list[Threshold] = [parse_threshold(t, origin) for t in own]
        overridden = {t.metric for t in mine}
        thresholds = tuple(t for t in self.settings.rules.thresholds if t.metric not in overridden) + tuple(mine)
        tolerances = dict(self.settings.rules.tolerances)
        for metric, value in (marker_kwargs.get("tolerances") or {}).items():
            if metric not in METRICS:
                raise ConfigError(f"{origin}: tolerances names unknown metric {metric!r}")
            tolerances[metric] = float(value)
        return dataclasses.replace(self.settings.rules, tolerances=tolerances, thresholds=thresholds)

    # --- evaluation ------------------------------------------------------
    def evaluate(self, nodeid: str, prof: GpuProf, marker_kwargs: dict[str, Any]) -> TestResult:
        """Load a finished test's Kineto trace (captured or replayed) and judge it."""
        s = self.settings

        def load() -> tuple[Trace, Path | None]:
            if s.replay_dir is not None:
                return load_kineto(s.replay_dir / trace_name(nodeid)), s.replay_dir / trace_name(nodeid)
            if not prof.completed:
                raise GpuprofError(
                    "the test uses the gpuprof fixture but did not run its "
                    "`for _ in gpuprof.steps(...)` loop to the end; nothing was measured"
                )
            try:
                return load_kineto(prof.trace_path), prof.trace_path if s.keep_traces else None
            finally:
                if not s.keep_traces:
                    prof.trace_path.unlink(missing_ok=True)

        return self._record(nodeid, marker_kwargs, load)

    def evaluate_trace(self, nodeid: str, trace: Trace, kept: Path, marker_kwargs: dict[str, Any]) -> TestResult:
        """Judge a test whose trace is already loaded (cut from an nsys session report)."""
        return self._record(nodeid, marker_kwargs, lambda: (trace, kept))

    def _record(self, nodeid: str, marker_kwargs: dict[str, Any], load) -> TestResult:
        """Judge and remember; errors about the trace or the baseline become an error result."""
        try:
            trace, kept = load()
            result = self._judge(nodeid, trace, kept, marker_kwargs)
        except GpuprofError as exc:
            result = TestResult(nodeid, "error", message=str(exc))
        self.results.append(result)
        return result

    def _judge(self, nodeid: str, trace: Trace, kept: Path | None, marker_kwargs: dict[str, Any]) -> TestResult:
        s = self.settings
        measurement = measure(trace)
        sample = timeline.sample(measurement, s.timeline_events)
        gpu = measurement.gpu_name or "unknown GPU"
        environment = trace.metadata.get("environment", {"gpu": gpu})
        file = baseline.baseline_file(s.baseline_dir, nodeid)
        doc = baseline.read(file)
        entry = baseline.lookup(doc, nodeid, gpu)
        rules = self.rules_for(nodeid, marker_kwargs)
        old = entry["metrics"] if entry else None
        result = TestResult(nodeid, "", gpu, measurement.metrics, old, [], file, kept, "", s.backend, environment,
                            sample, entry, per_step=stored_samples(measurement.per_step),
                            distribution=distribution(measurement.per_step))
        if s.update_baseline:
            result.verdicts = judge(measurement.metrics, None, rules)
            new_entry = {
                "backend": s.backend,
                "environment": environment,
                "metrics": measurement.metrics,
                "per_step": result.per_step,
                "distribution": result.distribution,
                "step_source": measurement.step_source,
            }
            if sample is not None:
                new_entry["timeline"] = sample
            self._pending.setdefault(file, {}).setdefault(nodeid, {})[gpu] = new_entry
            result.status = "failed" if any(v.failed for v in result.verdicts) else "updated"
        else:
            same_backend = entry is None or entry.get("backend", "torch") == s.backend
            stored = entry or {}
            result.verdicts = judge(measurement.metrics, old, rules, same_backend,
                                    (result.per_step, stored.get("per_step")),
                                    (result.distribution, stored.get("distribution")))
            result.status = test_status(result.verdicts, entry is not None)
            result.unstable = health.assess(measurement.per_step["kernel_time_us"], trace.metadata.get("health"))
            if result.unstable:
                for v in result.verdicts:
                    if v.status == "regressed" and METRICS.get(v.metric) and METRICS[v.metric].kind in ("time", "ratio"):
                        v.status = "unstable"
                if result.status != "no baseline":
                    result.status = test_status(result.verdicts, True)
                    if result.status == "passed":
                        result.status = "unstable"
            if result.status == "no baseline" and s.strict:
                result.status = "failed"
                result.message = f"no baseline for {gpu} in {file} (--gpuprof-strict)"
        return result

    # --- inside nsys -----------------------------------------------------
    def start_nsys_capture(self) -> None:
        """Open nsys's capture range (cudaProfilerStart) before the first profiled test."""
        if not self._capturing:
            import torch

            torch.cuda.profiler.start()
            self._capturing = True

    def finish_nsys_session(self, exitstatus: int) -> None:
        """Close the capture range and tell the outer session which profiled tests passed."""
        from .nsys_session import write_inner_results

        if self._capturing:
            import torch

            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        write_inner_results(self.settings.nsys_inner, self.nsys_tests, exitstatus)

    # --- end of run ------------------------------------------------------
    def finish(self) -> bool:
        """End of run: write the pending baselines, then the report files; ``written`` gets
        one line per file.  False when a baseline file was refused (left as it was)."""
        from .results import write_reports

        refused = False
        for file, entries in sorted(self._pending.items()):
            try:
                baseline.update(file, entries)
            except BaselineError as exc:
                self.written.append(f"not written, file left as it was: {exc}")
                refused = True
                continue
            self.written.append(f"updated {len(entries)} test(s) in {file}")
        self._pending.clear()
        self.written += write_reports(self)
        return not refused

    def close(self) -> None:
        self._tmp.cleanup()
