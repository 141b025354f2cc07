"""One profiled test judged: the result object every report renders, and how it is made.

``TestResult`` is the one shape of a result: the terminal, the results document
(``to_json``) and ``gpuprof diff`` reading that document back (``from_json``) all
use it.  ``evaluate`` turns a measurement and its stored baseline entry into one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..metrics import health
from ..metrics.measure import METRICS, Measurement
from ..metrics.timeline import sample
from .rules import Rules, Threshold
from .verdicts import Verdict, distribution, judge, stored_samples, test_status

#: Statuses a test can end with, in the order reports list them (what needs a reviewer
#: first); ``failed`` and ``error`` fail the test.
STATUSES = ("error", "failed", "unstable", "undecided", "improved", "no baseline", "updated", "passed")


@dataclass
class TestResult:
    """What gpuprof concluded about one profiled test (or one trace, for ``gpuprof diff``)."""

    __test__ = False  # not a pytest test class, despite its name

    nodeid: str | None
    status: str  # one of STATUSES
    gpu: str | None = None
    metrics: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None  # the baseline's metrics
    verdicts: list[Verdict] = field(default_factory=list)
    baseline_file: Path | None = None
    trace: Path | None = None
    message: str = ""
    backend: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    timeline: dict[str, Any] | None = None  # timeline.sample of this run
    baseline_entry: dict[str, Any] | None = None  # the whole stored entry (backend, environment, timeline)
    unstable: list[str] = field(default_factory=list)  # health.assess: why the times cannot be trusted
    per_step: dict[str, Any] | None = None  # this run's per-step samples as stored (verdicts.stored_samples)
    distribution: dict[str, Any] | None = None  # summaries of this run's time series over all steps
    step_source: str | None = None  # where the steps came from (Measurement.step_source)

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")

    def new_baseline_entry(self) -> dict[str, Any]:
        """What ``--gpuprof-update-baseline`` stores for this run."""
        entry = {
            "backend": self.backend,
            "environment": self.environment,
            "metrics": self.metrics,
            "per_step": self.per_step,
            "distribution": self.distribution,
            "step_source": self.step_source,
        }
        if self.timeline is not None:
            entry["timeline"] = self.timeline
        return entry

    def to_json(self) -> dict[str, Any]:
        """This test in the results document (docs/results.md); with both runs' per-step
        samples and distributions, so that its time verdicts can be judged again from it."""
        entry = self.baseline_entry or {}
        stored = entry.get("per_step")
        return {
            "nodeid": self.nodeid,
            "status": self.status,
            "message": self.message,
            "gpu": self.gpu,
            "backend": self.backend,
            "environment": self.environment,
            "trace": None if self.trace is None else str(self.trace),
            "baseline_file": None if self.baseline_file is None else str(self.baseline_file),
            "baseline_backend": entry.get("backend"),
            "baseline_environment": entry.get("environment"),
            "metrics": self.metrics,
            "baseline_metrics": self.baseline,
            "per_step": self.per_step,
            "distribution": self.distribution,
            "baseline_per_step": stored,
            "baseline_distribution": distribution(stored, entry.get("distribution")) if stored else None,
            "verdicts": [v.to_json() for v in self.verdicts],
            "unstable": self.unstable,
            "timeline": self.timeline,
            "baseline_timeline": entry.get("timeline"),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], backend: str | None = None) -> "TestResult":
        """A test of a results document read back; ``backend`` is the document's, for tests
        that do not name their own."""
        entry = {key: doc.get(f"baseline_{key}") for key in
                 ("backend", "environment", "metrics", "per_step", "distribution", "timeline")}
        return cls(
            nodeid=doc.get("nodeid"), status=doc.get("status") or "", gpu=doc.get("gpu"),
            metrics=doc.get("metrics"), baseline=doc.get("baseline_metrics"),
            verdicts=[_verdict(v) for v in doc.get("verdicts") or []],
            baseline_file=None if doc.get("baseline_file") is None else Path(doc["baseline_file"]),
            trace=None if doc.get("trace") is None else Path(doc["trace"]),
            message=doc.get("message") or "", backend=doc.get("backend") or backend,
            environment=doc.get("environment") or {}, timeline=doc.get("timeline"),
            baseline_entry=entry if any(v is not None for v in entry.values()) else None,
            unstable=list(doc.get("unstable") or []), per_step=doc.get("per_step"),
            distribution=doc.get("distribution"),
        )


def _verdict(doc: Mapping[str, Any]) -> Verdict:
    spec = METRICS.get(doc["metric"])
    threshold = doc.get("threshold")
    return Verdict(
        doc["metric"], doc["status"], doc.get("baseline"), doc.get("current"), doc.get("rule", ""),
        relative=not (spec is not None and spec.kind == "ratio"), evidence=doc.get("evidence", ""),
        threshold=None if threshold is None else Threshold(doc["metric"], threshold["op"], threshold["value"],
                                                           doc.get("rule", "")),
    )


def of_measurement(nodeid: str | None, m: Measurement, backend: str | None, timeline_events: int = 0) -> TestResult:
    """A measurement as an unjudged result: its metrics, samples and environment."""
    gpu = m.gpu_name or "unknown GPU"
    return TestResult(
        nodeid, "", gpu, m.metrics, backend=backend, environment=m.metadata.get("environment", {"gpu": gpu}),
        timeline=sample(m, timeline_events), per_step=stored_samples(m.per_step),
        distribution=distribution(m.per_step), step_source=m.step_source,
    )


def evaluate(result: TestResult, m: Measurement, entry: Mapping[str, Any] | None, rules: Rules, *,
             update: bool, strict: bool) -> TestResult:
    """Judge an unjudged result (``of_measurement``) against its stored baseline entry.

    Recording (``update``) checks only the absolute thresholds.  Otherwise every metric
    is judged; a run whose measurement is unhealthy (``metrics.health``) has its time and
    ratio regressions downgraded to ``unstable``; with ``strict`` a missing baseline fails.
    """
    result.baseline_entry = dict(entry) if entry else None
    result.baseline = entry["metrics"] if entry else None
    if update:
        result.verdicts = judge(result.metrics, None, rules)
        result.status = "failed" if any(v.failed for v in result.verdicts) else "updated"
        return result
    same_backend = entry is None or entry.get("backend", "torch") == result.backend
    stored = entry or {}
    result.verdicts = judge(result.metrics, result.baseline, rules, same_backend,
                            (result.per_step, stored.get("per_step")),
                            (result.distribution, stored.get("distribution")))
    result.status = test_status(result.verdicts, entry is not None)
    result.unstable = health.assess(m.per_step["kernel_time_us"], m.metadata.get("health"))
    if result.unstable:
        for v in result.verdicts:
            if v.status == "regressed" and METRICS.get(v.metric) and METRICS[v.metric].kind in ("time", "ratio"):
                v.status = "unstable"
        if result.status != "no baseline":
            result.status = test_status(result.verdicts, True)
            if result.status == "passed":
                result.status = "unstable"
    if result.status == "no baseline" and strict:
        result.status = "failed"
        result.message = f"no baseline for {result.gpu} in {result.baseline_file} (--gpuprof-strict)"
    return result
