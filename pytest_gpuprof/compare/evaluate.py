"""One profiled test judged: the result object every report renders, and how it is made.

``TestResult`` is the one shape of a result: the terminal, the results document
(``to_json``) and ``gpuprof diff`` reading that document back (``from_json``) all
use it.  ``evaluate`` judges what one process measured (``Measured``) against its stored
baseline entry under its rules into a ``Judgment``, from those alone; ``TestResult.of``
assembles a test's result from what was measured and its judgment, once both are known.
A result's status is never assigned: ``status_of`` derives it from the verdicts and a few
facts recorded where they are learnt, so that the steps after judging (confirmation, the
base revision's pairs, Nsight Compute's counters) change verdicts and facts only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from ..metrics import health
from ..metrics.measure import Measurement
from ..metrics.specs import counter_spec, metric_spec
from ..metrics.timeline import sample
from . import host
from .cycles import ClockShift
from .entry import Entry
from .machine import (
    alike_sentence,
    common_shift,
    explains,
    is_difference,
    machine_differences,
    moved_alike,
    on_recorded_card,
)
from .rules import Rules, Threshold
from .samples import distribution, medians, stored_samples
from .status import BROKEN, FAILED_STATUSES, STATUSES, State, Status
from .verdict import Verdict
from .verdicts import judge


def status_of(verdicts: Iterable[Verdict], *, error: bool = False, recorded: bool = False,
              has_baseline: bool = True, strict: bool = False, unstable: bool = False,
              parts: Iterable[str] = ()) -> Status:
    """A test's one word, from its verdicts and what else was learnt about it: ``error`` when
    it could not be judged; failed on a broken verdict; ``updated`` when recording; ``no
    baseline`` with nothing to be judged against; a failure that re-measuring did not uphold
    (not sure, unconfirmed, same as base); undecided; improved; else passed, or ``unstable``
    when the measurement's health or a slower machine explains its regressions.  Of that and
    ``parts`` (a distributed test's ranks' statuses) the worst in ``STATUSES`` order; with
    ``strict`` (--gpuprof-strict) a test left with no baseline fails."""
    if error:
        return Status.ERROR
    states = {v.status for v in verdicts}
    if states & BROKEN:
        own = Status.FAILED
    elif recorded:
        own = Status.UPDATED
    elif not has_baseline:
        own = Status.NO_BASELINE
    else:
        own = next((Status(s) for s in _PASSING_STATES if s in states),
                   Status.UNSTABLE if unstable else Status.PASSED)
    worst = min([own, *map(Status, parts)], key=STATUSES.index)
    return Status.FAILED if worst == Status.NO_BASELINE and strict else worst


#: The verdict states that name a test that passes, the first found deciding its status.
_PASSING_STATES = (State.NOT_SURE, State.UNCONFIRMED, State.SAME_AS_BASE, State.UNDECIDED, State.IMPROVED)


#: The GPU of a run whose trace names none (no device properties): results and reports say so.
UNKNOWN_GPU = "unknown GPU"


@dataclass(frozen=True)
class Measured:
    """What was measured of a test, as its result keeps it and a recording stores it: one
    process's metrics, per-step samples (as stored) and their summaries over its usable steps,
    its environment and timeline sample (``Measured.of``), the trace file kept of it and the
    session's machine probes.  A distributed test measured as one (``distributed.as_one``)
    holds its ``rank_skew`` and each rank's measurement."""

    gpu: str
    backend: str | None  # "torch" or "nsys": what measured
    metrics: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)
    per_step: dict[str, Any] | None = None  # samples.stored_samples of its per-step values
    distribution: dict[str, Any] | None = None
    step_source: str | None = None  # where the steps came from (Measurement.step_source)
    timeline: dict[str, Any] | None = None  # timeline.sample of this run
    trace: Path | None = None
    machine: dict[str, Any] | None = None  # the session's probes (capture.probes), rank 0's alone
    ranks: Mapping[str, Measured] | None = None  # a distributed test's, by rank

    @classmethod
    def of(cls, m: Measurement, backend: str | None, timeline_events: int = 0, *, trace: Path | None = None,
           machine: dict[str, Any] | None = None) -> Measured:
        """One process's measurement (its trace named none: ``UNKNOWN_GPU``)."""
        gpu = m.gpu_name or UNKNOWN_GPU
        return cls(gpu, backend, m.metrics, m.metadata.get("environment", {"gpu": gpu}), stored_samples(m.per_step),
                   distribution(m.per_step), m.step_source, sample(m, timeline_events, m.runtime, m.thread_names),
                   trace, machine)


@dataclass(frozen=True)
class Judgment:
    """A measurement judged (``evaluate``): its verdicts; the entry and the metrics they were
    judged against; why its time and ratio regressions are ``unstable`` (the measurement's
    ``health``, a ``slower_machine``); what else was noted; and the facts its status follows
    from.  A distributed test's holds each rank's (``distributed.combine``)."""

    verdicts: tuple[Verdict, ...] = ()
    baseline_entry: Entry | None = None  # the whole stored entry
    baseline: dict[str, Any] | None = None  # its metrics
    health: tuple[str, ...] = ()
    slower_machine: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    recorded: bool = False  # judged as recording its baseline: the thresholds alone
    has_baseline: bool = True  # it had something to be judged against
    ranks: Mapping[str, Judgment] | None = None

    def adding(self, verdicts: Iterable[Verdict] = (), notes: Iterable[str] = ()) -> Judgment:
        """This judgment with more verdicts and notes after its own."""
        return replace(self, verdicts=(*self.verdicts, *verdicts), notes=(*self.notes, *notes))


@dataclass
class TestResult:
    """What gpuprof concluded about one profiled test (or one trace, for ``gpuprof diff``).

    Its ``status`` is derived (``status_of``) from its verdicts and the facts below, which a
    results document keeps (``to_json``'s ``facts``) so that a result read back
    (``from_json``) derives the same status."""

    __test__ = False  # not a pytest test class, despite its name

    nodeid: str | None
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
    baseline_entry: Entry | None = None  # the whole stored entry (backend, environment, timeline)
    health: list[str] = field(default_factory=list)  # health.assess: why this measurement's times cannot be trusted
    # probes slower than the baseline's that explain a regression
    slower_machine: list[str] = field(default_factory=list)
    per_step: dict[str, Any] | None = None  # this run's per-step samples as stored (verdicts.stored_samples)
    distribution: dict[str, Any] | None = None  # summaries of this run's judged series over its usable steps
    step_source: str | None = None  # where the steps came from (Measurement.step_source)
    notes: list[str] = field(default_factory=list)  # health facts that do not downgrade (host stalls left out)
    machine: dict[str, Any] | None = None  # the session's machine probes (capture.probes)
    confirmation: str = ""  # what re-measuring in fresh processes showed (--gpuprof-confirm)
    alongside: dict[str, Any] | None = None  # the base revision measured alongside (--gpuprof-base; run.sides)
    ranks: dict[str, TestResult] | None = None  # a distributed test's ranks, each judged (compare.distributed)
    counters: dict[str, Any] | None = None  # its heaviest kernels' counters (run.kernel_profiling)
    # what the status follows from besides the verdicts and ``unstable``, each set where it is learnt
    error: bool = False  # it could not be judged (a file unreadable): ``message`` says why (``of_error``)
    recorded: bool = False  # this run recorded its baseline (--gpuprof-update-baseline): thresholds alone judged
    has_baseline: bool = True  # it had something to be judged against: a stored entry, or the base revision
    strict: bool = False  # with nothing to be judged against it fails (--gpuprof-strict; ``TestResult.of``)

    @classmethod
    def of_error(cls, nodeid: str | None, message: str) -> TestResult:
        """A test that could not be judged (its trace, a rank's file or its baseline unreadable):
        ``message`` says which file and why."""
        return cls(nodeid, message=message, error=True)

    @classmethod
    def of(cls, nodeid: str | None, run: Measured, judgment: Judgment = Judgment(), *,
           baseline_file: Path | None = None, alongside: dict[str, Any] | None = None,
           strict: bool = False) -> TestResult:
        """A test's result, assembled from what was measured of it and its judgment (none: a
        measurement as an unjudged result); a distributed test's with each rank's, which
        --gpuprof-strict never fails (the test as one is).  With ``strict`` a test left with
        nothing to be judged against fails, its message saying so, and why the base revision
        measured ``alongside`` did not stand in."""
        ranks = None if judgment.ranks is None or run.ranks is None else {
            r: cls.of(nodeid, run.ranks[r], j, baseline_file=baseline_file) for r, j in judgment.ranks.items()}
        result = cls(
            nodeid, gpu=run.gpu, metrics=run.metrics, baseline=judgment.baseline, verdicts=list(judgment.verdicts),
            baseline_file=baseline_file, trace=run.trace, backend=run.backend, environment=run.environment,
            timeline=run.timeline, baseline_entry=judgment.baseline_entry, health=list(judgment.health),
            slower_machine=list(judgment.slower_machine), per_step=run.per_step, distribution=run.distribution,
            step_source=run.step_source, notes=list(judgment.notes), machine=run.machine, alongside=alongside,
            ranks=ranks, recorded=judgment.recorded, has_baseline=judgment.has_baseline, strict=strict)
        if strict and result.unjudged:
            why = (alongside or {}).get("note")
            result.message = f"no baseline for {run.gpu} in {baseline_file} (--gpuprof-strict)" + (
                f"; {why}" if why else "")
        return result

    @property
    def status(self) -> Status:
        """One of ``STATUSES``, derived (``status_of``).  A distributed test's is the worst of
        its ranks' and of its own verdicts' (the skew's, its counters'): the ranks' health and
        machines, said again in its own, are their statuses'."""
        return self._status(self.strict)

    @property
    def detects(self) -> dict[str, float]:
        """The smallest slowdown of its kernel time its measurement could detect
        (``Verdict.detectable`` of its ``kernel_time_us``; a distributed test's, each rank's):
        ``{"kernel_time_us": 0.02}``, or ``{"rank 1 kernel_time_us": ...}``; empty where it was
        not judged on samples or had too few steps."""
        return {(f"rank {v.rank} " if v.rank is not None else "") + v.metric: v.detectable
                for v in self.verdicts if v.metric == "kernel_time_us" and v.detectable is not None}

    @property
    def unjudged(self) -> bool:
        """Left with nothing to be judged against: ``no baseline`` but for --gpuprof-strict."""
        return self._status(strict=False) == Status.NO_BASELINE

    def _status(self, strict: bool) -> Status:
        own = self.verdicts if self.ranks is None else [v for v in self.verdicts if v.rank is None]
        return status_of(own, error=self.error, recorded=self.recorded, has_baseline=self.has_baseline,
                         strict=strict, unstable=self.ranks is None and bool(self.unstable),
                         parts=[t.status for t in (self.ranks or {}).values()])

    def facts(self) -> dict[str, bool]:
        """What its status follows from besides the verdicts and its health (``status_of``)."""
        return {"error": self.error, "recorded": self.recorded, "has_baseline": self.has_baseline,
                "strict": self.strict}

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    @property
    def unstable(self) -> list[str]:
        """Why this test's time and ratio regressions are ``unstable``, not failed: the
        measurement's health, then the machine's differences that explain them."""
        return self.health + self.slower_machine

    def to_json(self) -> dict[str, Any]:
        """This test in the results document (docs/results.md); with both runs' per-step
        samples and distributions, so that its time verdicts can be judged again from it, and
        of each of the baseline's recorded runs what judges it (``_run_kept``): each run a
        baseline keeps adds one median per series, not its steps."""
        entry = self.baseline_entry or {}
        stored = entry.get("per_step")
        return {
            "nodeid": self.nodeid,
            "status": str(self.status.value),
            "facts": self.facts(),
            "detects": self.detects,
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
            "baseline_runs": [_run_kept(r, stored) for r in entry.get("runs", [])] or None,
            "verdicts": [v.to_json() for v in self.verdicts],
            "unstable": self.unstable,
            "health": self.health,
            "slower_machine": self.slower_machine,
            "notes": self.notes,
            "machine": self.machine,
            "confirmation": self.confirmation,
            "alongside": self.alongside,
            "timeline": self.timeline,
            "baseline_timeline": entry.get("timeline"),
            "ranks": None if self.ranks is None else {r: t.to_json() for r, t in self.ranks.items()},
            "counters": self.counters,
            "baseline_counters": entry.get("counters"),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], backend: str | None = None) -> TestResult:
        """A test of a results document read back; ``backend`` is the document's, for tests
        that do not name their own; its ``facts`` give its status again (``migrated_facts``:
        a document of before they were kept).  A document written before ``health`` and ``slower_machine`` were told
        apart (until 2026-11-23) has only ``unstable``: its machine probes' sentences are read
        as ``slower_machine``, the rest as health."""
        entry: dict[str, Any] = {} if doc.get("ranks") is not None else {  # a distributed test's entries are its ranks'
            key: doc[f"baseline_{key}"] for key in
            ("backend", "environment", "metrics", "per_step", "distribution", "timeline", "runs", "counters")
            if doc.get(f"baseline_{key}") is not None}
        unstable = [] if "health" in doc or "slower_machine" in doc else list(doc.get("unstable") or [])
        return cls(
            nodeid=doc.get("nodeid"), gpu=doc.get("gpu"),
            metrics=doc.get("metrics"), baseline=doc.get("baseline_metrics"),
            verdicts=[_verdict(v) for v in doc.get("verdicts") or []],
            baseline_file=None if doc.get("baseline_file") is None else Path(doc["baseline_file"]),
            trace=None if doc.get("trace") is None else Path(doc["trace"]),
            message=doc.get("message") or "", backend=doc.get("backend") or backend,
            environment=doc.get("environment") or {}, timeline=doc.get("timeline"),
            baseline_entry=cast(Entry, entry) if entry else None,
            health=list(doc.get("health") or []) + [r for r in unstable if not is_difference(r)],
            slower_machine=list(doc.get("slower_machine") or []) + [r for r in unstable if is_difference(r)],
            per_step=doc.get("per_step"),
            distribution=doc.get("distribution"), notes=list(doc.get("notes") or []), machine=doc.get("machine"),
            confirmation=doc.get("confirmation") or "", alongside=doc.get("alongside"),
            ranks=None if doc.get("ranks") is None else {r: cls.from_json(t, backend)
                                                         for r, t in doc["ranks"].items()},
            counters=doc.get("counters"), **(doc.get("facts") or migrated_facts(doc)),
        )


def _run_kept(run: Mapping[str, Any], baseline_steps: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a results document keeps of one of the baseline's recorded runs: what judging
    reads of it, its summaries' medians (``samples.medians``), its probes, its environment
    and its host series' medians at the baseline host's speed (``host.at_reference``), not
    its steps.  A run kept so is kept the same again (a document read back and written)."""
    return {"distribution": medians(run.get("distribution")), "machine": run.get("machine"),
            "environment": run.get("environment"), host.AT_BASELINE_SPEED: host.at_reference(run, baseline_steps)}


def migrated_facts(doc: Mapping[str, Any]) -> dict[str, bool]:
    """The facts of a results document's test written before they were kept (until
    2026-11-28), from the status it stated: ``error`` and ``updated`` as said; ``failed``
    with no verdict broken, by --gpuprof-strict; ``no baseline``, nothing to be judged
    against; any other, judged against a baseline."""
    stated = doc.get("status") or ""
    strict = stated == Status.FAILED and not any(v.get("status") in BROKEN for v in doc.get("verdicts") or [])
    return {"error": stated == Status.ERROR, "recorded": stated == Status.UPDATED,
            "has_baseline": stated != Status.NO_BASELINE and not strict, "strict": strict}


def _verdict(doc: Mapping[str, Any]) -> Verdict:
    spec = metric_spec(doc["metric"]) or counter_spec(doc["metric"])
    threshold = doc.get("threshold")
    return Verdict(
        doc["metric"], State(doc["status"]), doc.get("baseline"), doc.get("current"), doc.get("rule", ""),
        relative=not (spec is not None and spec.kind in ("ratio", "percent")), evidence=doc.get("evidence", ""),
        threshold=None if threshold is None else Threshold(doc["metric"], threshold["op"], threshold["value"],
                                                           doc.get("rule", "")),
        rank=doc.get("rank"), p_value=doc.get("p_value"), p_level=doc.get("p_level"),
        let_through=doc.get("let_through", ""), margin=doc.get("margin"), margin_source=doc.get("margin_source", ""),
        detectable=doc.get("detectable"), provisional=bool(doc.get("provisional")),
    )


def of_measurement(nodeid: str | None, m: Measurement, backend: str | None, timeline_events: int = 0) -> TestResult:
    """A measurement as an unjudged result: its metrics, samples and environment."""
    return TestResult.of(nodeid, Measured.of(m, backend, timeline_events))


def evaluate(run: Measured, m: Measurement, entry: Entry | None, rules: Rules, *, update: bool,
             alongside: bool = False, base_process: bool = False) -> Judgment:
    """Judge one process's measurement (``run``, of ``m``) against its stored baseline entry.

    Recording (``update``) checks only the absolute thresholds.  Otherwise every metric
    is judged, the times and ratios on the usable steps (host stalls left out) against
    the samples of all the baseline's recorded runs; a run whose measurement is unhealthy
    (``metrics.health``) has its time and ratio regressions downgraded to ``unstable``, and
    so has each regression that a machine slower than the baseline's can explain
    (``machine``: ``run.machine`` against the recorded runs'); machine differences that
    explain no regression, host stalls and clock moves are notes.  With ``alongside`` (the
    base revision can be measured on this GPU: ``run.sides`` decides the time and ratio
    failures) nothing is downgraded, and the health and machine sentences are notes: what
    differs, not what decides; with ``base_process`` (the entry is the base revision's one
    fresh process) a change in the bad direction not significant is for the pairs too.
    """
    stored = entry or {}
    kept, baseline = (entry.copy(), entry["metrics"]) if entry else (None, None)
    notes = _measurement_notes(m, stored, rules)
    if update:
        verdicts = judge(run.metrics, None, rules, samples=(run.per_step, None),
                         distributions=(run.distribution, None))
        return Judgment(tuple(verdicts), kept, baseline, notes=tuple(notes), recorded=True)
    runs = stored.get("runs", [])
    same_backend = entry is None or stored.get("backend", "torch") == run.backend
    verdicts = judge(run.metrics, baseline, rules, same_backend, (run.per_step, stored.get("per_step")),
                     (run.distribution, stored.get("distribution")), runs,
                     other_card=not on_recorded_card(run.environment, runs), base_process=base_process)
    unsteady = health.assess(m.per_step["kernel_time_us"], m.metadata.get("health"), m.per_step.get("stalled"),
                             health.throttled_steps(m.per_step))
    clock = health.clock_note(m.metadata.get("health"))
    notes += [clock] if clock else []
    differences = machine_differences(run.machine, [r.get("machine") for r in runs])
    if alongside:
        notes += [f"unsteady measurement: {why}" for why in unsteady] + list(differences.values())
        return Judgment(tuple(verdicts), kept, baseline, notes=tuple(notes), has_baseline=entry is not None)
    shift = ClockShift.of(run.per_step, stored.get("per_step"))
    verdicts, explaining, shifts = _downgraded(verdicts, unsteady, differences, shift)
    slower = [differences[p] for p in differences if p in explaining] + [
        f"{v.threshold.text} {v.evidence}" for v in verdicts if v.status == State.UNSTABLE and v.threshold] + shifts
    notes += [differences[p] for p in differences if p not in explaining]
    return Judgment(tuple(verdicts), kept, baseline, tuple(unsteady), tuple(slower), tuple(notes),
                    has_baseline=entry is not None)


def _measurement_notes(m: Measurement, entry: Mapping[str, Any], rules: Rules) -> list[str]:
    """What the measurement's health says that decides nothing: host stalls and throttled steps
    left out, a trace recorded at torch's default cost, no PCIe link read where a rule or the
    entry needs it."""
    notes = [note for note in (health.stall_note(m.per_step), health.throttle_note(m.per_step)) if note]
    notes += health.recording_notes(m.metadata)
    gated = any(t.metric == "pcie_utilization" for t in rules.thresholds) or entry.get(
        "metrics", {}).get("pcie_utilization") is not None
    return notes + ([health.NO_PCIE_LINK] if gated and m.metrics.get("pcie_utilization") is None else [])


def _downgraded(verdicts: list[Verdict], unsteady: list[str], differences: Mapping[str, str],
                clock: ClockShift | None) -> tuple[list[Verdict], set[str], list[str]]:
    """The verdicts with each time or ratio regression ``unstable`` that an unhealthy
    measurement (``unsteady``), a probe slower than the baseline machine's, the SM clock (a
    kernel time that did not rise in cycles: ``cycles.ClockShift``) or the test's kernels all
    moving alike (``machine.common_shift``: the card, not the code) explains; the probes that
    explained one, and the sentences of the clock and of the kernels' shift where they did.
    Where the clock moved, each kernel-time regression's evidence says its change in cycles."""
    out, explaining, by_clock, alike = [], set(), 0, False
    shift = common_shift(verdicts)
    for v in verdicts:
        if v.status == State.REGRESSED and is_timing(v.metric):
            cycles = clock.evidence(v) if clock is not None else ""
            clocked = bool(cycles) and clock is not None and clock.explains(v)
            by = {p for p in differences if explains(p, v.metric)}
            moved = shift is not None and moved_alike(v, shift)
            v = replace(v, evidence="; ".join(part for part in (v.evidence, cycles) if part))
            if unsteady or by or moved or clocked:
                v = replace(v, status=State.UNSTABLE)
                explaining |= by
                by_clock += clocked
                alike |= moved
        out.append(v)
    sentences = [clock.sentence(by_clock)] if by_clock and clock is not None else []
    return out, explaining, sentences + ([alike_sentence(shift, verdicts)] if alike and shift is not None else [])


def fails_on_timing_alone(result: TestResult, statuses: Iterable[State] = (State.REGRESSED,)) -> bool:
    """A test that failed, with no message, on verdicts of these statuses on times, rates or
    ratios alone (a count, a byte total or a kernel change is exact: nothing re-measures it)."""
    broken = [v for v in result.verdicts if v.status in BROKEN]
    return (result.status == Status.FAILED and not result.message and bool(broken)
            and all(v.status in statuses and is_timing(v.metric) for v in broken))


def is_timing(metric: str) -> bool:
    """A verdict on a time or a ratio (a kernel name's time too): what a slow machine or an
    unsteady measurement can move, unlike counts."""
    spec = metric_spec(metric)
    return metric.endswith(".time_us") if spec is None else spec.kind in ("time", "rate", "ratio")
