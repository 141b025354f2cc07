"""Verdicts: a measurement against its baseline and its absolute thresholds.

Default rules, by metric kind (``metrics.METRICS``):

* count, bytes: per step, must match exactly; for a metric where lower is better
  (``sync_count``) a drop is an improvement.
* time: per step, within a relative tolerance and more than an absolute floor
  away before it counts.  Kernel times (``kernel_time_us`` and each kernel name's
  time) have their own tolerance; copy times and the window, which move more from
  run to run (PCIe, host-side launch gaps), a wider one (defaults: ``options``).  When both runs
  kept per-step samples, the medians of all steps (their ``distribution``
  summaries) are compared and a change beyond the tolerance counts only if a
  Mann-Whitney U test on the samples kept says the steps differ: p < alpha / m
  (alpha 0.01, m the number of time series the test judges: a Bonferroni
  correction, so 0.01 bounds the chance of any false alarm in the test, not in
  each of its 20-odd series).  With too few steps for any p to get under that
  level the verdict is "undecided", never a failure.
* ratio: within an absolute tolerance (``--gpuprof-ratio-tolerance``) in the bad direction.
* per kernel name: the count per step must match exactly; a new or vanished
  kernel is a change.

A change in the good direction beyond the tolerance is reported as
"improved" (update the baseline), never as a failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..metrics.specs import METRICS, RECORDED_SINCE, TEST_METRICS, MetricSpec, counter_spec
from ..numbers import format_change, format_number, format_quantity, format_ratio, format_time_us
from . import host
from .rules import Rules, Threshold, beyond_time_rule, same
from .stats import Prior, evenly_spaced, mann_whitney_u, pooled_squares, smallest_p, steps_for, summarize, t_quantile
from .status import FAILING, State

#: Why an ``ok`` verdict let a median that moved beyond its tolerance through (``Verdict.let_through``):
#: the Mann-Whitney p not under the corrected level; the median inside the prediction interval
#: of the baseline's recorded runs; the host's speed (changed as measured, not at the baseline host's).
NOT_SIGNIFICANT, WITHIN_RUNS, HOST_SPEED = "not significant", "within the baseline's runs", "host speed"
#: How the rule of an ``ok`` verdict that compared nothing starts (no value in one of the runs).
NOT_COMPARED = "not compared"

@dataclass
class Verdict:
    """One metric's outcome.  Values are per step for per-step metrics."""

    metric: str
    status: State
    baseline: float | None
    current: float | None
    rule: str
    relative: bool = True  # change shown in percent (False: ratios and percentages, in percentage points)
    evidence: str = ""  # time metrics judged on samples: medians and spreads, the test and its p-value
    threshold: Threshold | None = None  # the absolute requirement this verdict checked, as data
    by_host: bool = False  # changed as measured, not at the baseline host's speed (the window: ``host``)
    rank: int | None = None  # the rank of a distributed test whose metric this is (``compare.distributed``)
    p_value: float | None = None  # the Mann-Whitney U test's p on the samples, where it ran
    p_level: float | None = None  # what p had to get under: alpha / the series judged (Bonferroni)
    let_through: str = ""  # an ok whose median moved beyond the tolerance: why (NOT_SIGNIFICANT, ...)

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def change(self) -> str:
        """Change from baseline to current, relative where that means something."""
        if self.baseline is None or self.current is None:
            return ""
        return format_change(self.current, self.baseline, *shown_as(self.metric), self.relative)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric, "status": self.status, "baseline": self.baseline,
            "current": self.current, "change": self.change(), "rule": self.rule, "evidence": self.evidence,
        }
        if self.threshold is not None:
            out["threshold"] = {"op": self.threshold.op, "value": self.threshold.value}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.p_level is not None:
            out["p_level"] = self.p_level
        if self.p_value is not None:
            out["p_value"] = self.p_value
        if self.let_through:
            out["let_through"] = self.let_through
        return out


def shown_as(metric: str) -> tuple[str, str]:
    """(kind, unit) a metric's values are shown in (``numbers.format_quantity``): its spec's; a
    kernel's time (``kernels[NAME].time_us``) a time, a collective's bytes bytes, other
    per-name values (``kernels[NAME].count``) counts."""
    spec = METRICS.get(metric) or TEST_METRICS.get(metric) or counter_spec(metric)
    if spec is not None:
        return spec.kind, spec.unit
    if metric.endswith(".time_us"):
        return "time", "us"
    return ("bytes", "B") if metric.endswith(".bytes") else ("count", "")


def shown_value(metric: str, value: float | None, signed: bool = False) -> str:
    """A metric's value in its unit, as every verdict and report says it (``shown_as``)."""
    return format_quantity(value, *shown_as(metric), signed=signed)


def compared_values(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """The values rules look at: per-step metrics divided by the step count."""
    steps = metrics.get("step_count") or 1
    out: dict[str, float | None] = {}
    for name, spec in METRICS.items():
        value = metrics.get(name)
        if value is None or spec.kind == "info":
            out[name] = value
        else:
            out[name] = value / steps if spec.per_step else value
    for kernel, row in (metrics.get("kernels") or {}).items():
        out[f"kernels[{kernel}].count"] = row["count"] / steps
    for name, row in (metrics.get("collectives") or {}).items():
        out[f"collectives[{name}].count"] = row["count"] / steps
        out[f"collectives[{name}].bytes"] = None if row["bytes"] is None else row["bytes"] / steps
    return out


def stored_samples(per_step: Mapping[str, Any]) -> dict[str, Any]:
    """``per_step`` as baselines and results keep it: every list cut to the same evenly
    spaced steps (``stats.evenly_spaced``), so the lists stay aligned step by step."""
    return {k: stored_samples(v) if isinstance(v, Mapping) else evenly_spaced(v) for k, v in per_step.items()}


def judged_series(spec: MetricSpec) -> bool:
    """Metrics judged on their per-step samples: times, rates, and ratios with a better direction."""
    return spec.kind in ("time", "rate") or (spec.kind == "ratio" and spec.better is not None)


def usable(per_step: Mapping[str, Any], values: list) -> list[float]:
    """The values of the steps that decide verdicts: steps the host stalled
    (``per_step["stalled"]``, metrics.health) and steps without a value are left out."""
    stalled = per_step.get("stalled") or ()
    return [v for i, v in enumerate(values) if v is not None and not (i < len(stalled) and stalled[i])]


def distribution(per_step: Mapping[str, Any], stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary (``stats.summarize``) of each judged per-step series over its usable
    steps: every time and ratio metric of ``per_step`` and, under ``kernels``, each kernel
    name.  Summaries found in ``stored`` (a baseline's or a result's ``distribution``, made
    from all steps before the samples were cut) are taken as they are; the others are made
    from the samples (baselines written before distributions were stored)."""
    stored = stored or {}
    kept = stored.get("kernels") or {}
    out: dict[str, Any] = {}
    for name, values in per_step.items():
        if name in METRICS and judged_series(METRICS[name]):
            steps = usable(per_step, values)
            if stored.get(name) or steps:
                out[name] = stored.get(name) or summarize(steps, _decimals(name))
    out["kernels"] = {name: kept.get(name) or summarize(usable(per_step, values))
                      for name, values in (per_step.get("kernels") or {}).items() if usable(per_step, values)}
    return out


def _decimals(name: str) -> int:
    """Decimals a series' summaries keep: 3 for microseconds (1 ns), 6 for ratios and rates."""
    return 3 if METRICS[name].kind == "time" else 6


def pooled(runs: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The per-step samples of several runs as one: each list is the runs' lists one after
    the other, so the lists stay aligned step by step, then cut like any stored samples.
    A kernel name absent from some run's heaviest has unknown steps there: it is left out."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        if name == "kernels":
            common = set.intersection(*(set(r.get("kernels") or {}) for r in runs))
            out["kernels"] = {k: [v for r in runs for v in r["kernels"][k]] for k in sorted(common)}
        elif all(name in r for r in runs):
            out[name] = [v for r in runs for v in r[name]]
    return stored_samples(out)


class Series(NamedTuple):
    """One per-step series of a run: the usable samples kept, the summary of all its usable
    steps, and for a baseline the medians of its recorded runs."""

    samples: list[float]
    summary: Mapping[str, Any]
    run_medians: tuple[float, ...] = ()


def judged_values(metrics: Mapping[str, Any], summaries: Mapping[str, Any] | None) -> dict[str, float | None]:
    """``compared_values``, with every judged series at its median per step where the run
    kept per-step samples: what thresholds and the summary tables hold."""
    out = compared_values(metrics)
    for name, summary in (summaries or {}).items():
        if name in METRICS:
            out[name] = summary["median"]
    return out


def _judged_side(metrics: Mapping[str, Any], samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
                 distributions: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
                 side: int) -> dict[str, float | None]:
    """``judged_values`` of one side (0: current, 1: baseline), summarized from its samples
    and its stored distribution where it kept them."""
    per_step = samples[side] if samples else None
    stored = distributions[side] if distributions else None
    return judged_values(metrics, distribution(per_step, stored) if per_step else None)


def judge(
    current: Mapping[str, Any], baseline: Mapping[str, Any] | None, rules: Rules, same_backend: bool = True,
    samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None = None,
    distributions: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None = None,
    runs: Sequence[Mapping[str, Any]] | None = None,
) -> list[Verdict]:
    """Every verdict for one test: thresholds first, then each metric against the baseline.

    ``samples`` are the (current, baseline) ``per_step`` objects and ``distributions``
    their ``distribution`` objects: series found in both ``per_step`` are judged on them
    (see ``_compare_samples``); a side without a distribution is summarized from its
    samples.  ``runs`` are the baseline's recorded runs (each with its ``distribution``
    and, where kept, its ``per_step``): a change must also lie outside what their
    medians show.  The window is judged at the baseline host's speed too (``host``), when
    both sides read it and do the same GPU work, and the ratios over it follow its
    verdict.  Thresholds apply to the medians per step where the run kept samples.  A
    baseline recorded with the other backend is compared on counts and bytes only: times
    differ between profilers, and so do the spellings of kernel names."""
    now = _judged_side(current, samples, distributions, 0)
    paired = _paired_series(samples, distributions, runs or []) if same_backend and baseline is not None else {}
    family = len(paired)  # the series judged on samples: the Bonferroni correction's m
    # the host's speed is taken out only of a step that does the baseline's GPU work and
    # synchronizations: a new .item() makes the host wait and launch slower, and then the
    # reading measures the change, not the host
    speeds = _speeds(samples, baseline is not None and same_backend and same_program(current, baseline))
    at_baseline_speed = _at_baseline_speed(samples, runs or [], speeds)
    window = None
    if "window_us" in paired:
        utilization = paired["gpu_utilization"][0].summary["median"] if "gpu_utilization" in paired else None
        host_pair = (HostPair(*at_baseline_speed["window_us"], speeds, host.host_bound(utilization))
                     if "window_us" in at_baseline_speed and speeds else None)
        window = _compare_samples(METRICS["window_us"], *paired["window_us"], rules, family, None, host_pair)
    by_host = _moved_by_the_host(window, speeds)
    verdicts = [check_threshold(t, now.get(t.metric), at_baseline_speed.get(t.metric) if by_host else None, speeds)
                for t in rules.thresholds if counter_spec(t.metric) is None]  # counters': compare.counter_verdicts
    if baseline is None:
        return verdicts
    judged_now, now = now, compared_values(current)  # the medians shown where a series is not compared
    before = compared_values(baseline)
    judged_before = _judged_side(baseline, samples, distributions, 1)  # the same medians of the baseline
    shared = pooled_log_spread([before.run_medians for key, (before, _) in paired.items() if kernel_series(key)])
    for name, spec in METRICS.items():
        if spec.kind == "info" or (spec.kind == "ratio" and spec.better is None):
            continue
        if not same_backend and spec.kind not in ("count", "bytes"):
            continue
        if name == "window_us" and window is not None:
            verdicts.append(window)
        elif name in RECORDED_SINCE and name not in paired and judged_series(spec) and samples and samples[1]:
            # a baseline whose recorded runs did not all keep it (recorded before it existed)
            verdicts.append(Verdict(name, State.OK, judged_before.get(name), judged_now.get(name),
                                    f"{NOT_COMPARED}: the baseline's recorded runs do not all hold its steps"))
        elif name.endswith("_gbps") and _latency_bound(name, before, rules):
            verdicts.append(Verdict(name, State.OK, judged_before.get(name), judged_now.get(name), RATE_UNJUDGED))
        elif name in paired:
            verdict = _compare_samples(spec, *paired[name], rules, family,
                                       _spread_of(name, shared, len(paired[name][0].run_medians)))
            verdicts.append(_with_the_window(verdict, window, speeds) if by_host and name in host.WINDOW_RATIOS
                            else verdict)
        else:
            verdicts.append(compare_value(spec, before.get(name), now.get(name), rules))
    verdicts += _collective_verdicts(before, now, "collectives" in baseline and "collectives" in current)
    if not same_backend:  # collectives too: both backends count every call (nsys reads no sizes)
        return verdicts
    kernel_time = MetricSpec("kernel time", "time", "lower", True, "us")
    for key, pair in paired.items():
        if key.startswith("kernels["):
            per_launch = _per_launch(pair[0], before.get(key.removesuffix("time_us") + "count"))
            verdicts.append(_compare_samples(replace(kernel_time, name=key), *pair, rules, family,
                                             _kernel_spread(shared, per_launch)))
    kernels = sorted(
        {k for k in list(now) + list(before) if k.startswith("kernels[")},
    )
    for key in kernels:
        b, c = before.get(key), now.get(key)
        if b is None:
            verdicts.append(Verdict(key, State.NEW, None, c, "kernel absent from the baseline"))
        elif c is None:
            verdicts.append(Verdict(key, State.VANISHED, b, None, "kernel in the baseline, absent now"))
        elif not same(b, c):
            verdicts.append(Verdict(key, State.CHANGED, b, c, "count per step must match exactly"))
    return verdicts


def _collective_verdicts(before: Mapping[str, Any], now: Mapping[str, Any], both: bool) -> list[Verdict]:
    """Each collective's calls and bytes per step, exact (a collective new or gone is a count
    from or to 0); bytes only where both runs record them.  None where either run's metrics
    predate ``collectives``."""
    if not both:
        return []
    out = []
    for key in sorted({k for k in list(now) + list(before) if k.startswith("collectives[")}):
        b, c = before.get(key), now.get(key)
        if key.endswith(".count"):
            b, c = b or 0.0, c or 0.0
        elif b is None or c is None:
            continue
        if not same(b, c):
            out.append(Verdict(key, State.CHANGED, b, c, f"{key.rsplit('.', 1)[1]} per step must match exactly"))
    return out


#: Copies too short for their bandwidth to be judged: the baseline's copies of the kind take
#: under this many time floors a step (10 x 5 us by default), and then a copy's duration is
#: its latency, and a 4-byte copy 0.2 us slower reads 13% less bandwidth.
RATE_FLOORS = 10
RATE_UNJUDGED = (f"not judged: the baseline's copies of this kind take under {RATE_FLOORS} time floors a step "
                 "(--gpuprof-time-floor-us), where a copy's duration is its latency, not its bandwidth")


def _latency_bound(name: str, before: Mapping[str, float | None], rules: Rules) -> bool:
    """Whether the baseline's copies of a bandwidth metric's kind are too short to judge it (``RATE_FLOORS``)."""
    kind = name.removeprefix("memcpy_").removesuffix("_gbps")
    return (before.get(f"memcpy_{kind}_time_us") or 0) < RATE_FLOORS * rules.time_floor_us


def _moved_by_the_host(window: Verdict | None, speeds: tuple[float, float] | None) -> bool:
    """Whether the window's change is the host's: it changed as measured but not at the
    baseline host's speed (``by_host``), or this run's host was slower than the baseline's
    and the window at the baseline host's speed did not regress."""
    if window is None or not speeds:
        return False
    return window.by_host or speeds[0] > speeds[1] and window.status != State.REGRESSED


def _with_the_window(verdict: Verdict, window: Verdict | None, speeds: tuple[float, float] | None) -> Verdict:
    """A ratio over the window that changed while the host's speed moved the window
    (``_moved_by_the_host``, which needs both): ``ok``, and its evidence says so."""
    if window is None or speeds is None or verdict.status not in (State.REGRESSED, State.IMPROVED):
        return verdict
    return replace(verdict, status=State.OK, by_host=True, let_through=HOST_SPEED, evidence="; ".join(part for part in (
        verdict.evidence, "moved with the window, which the host's speed explains "
        f"(window_us {window.change()} as measured, not a regression at the baseline host's speed: "
        f"{host.slower(*speeds)})") if part))


def _speeds(samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
            compared: bool) -> tuple[float, float] | None:
    """(this run's, the baseline's) host-speed readings (``host.speed``), when both have one."""
    if not compared or not samples or not samples[0] or not samples[1]:
        return None
    now, before = host.speed(samples[0]), host.speed(samples[1])
    return (now, before) if now and before else None


def _at_baseline_speed(samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
                       runs: Sequence[Mapping[str, Any]],
                       speeds: tuple[float, float] | None) -> dict[str, tuple[Series, Series]]:
    """(baseline, current) of each host series (``host.HOST_SERIES``) at the baseline host's
    speed: both runs' steps scaled by their readings against the baseline's, and the
    medians of the baseline's recorded runs likewise (runs that kept no readings left out).
    Empty without both runs' steps and host-speed readings (``_speeds``)."""
    if not speeds or not samples or not samples[0] or not samples[1]:
        return {}
    now, before = host.converted(samples[0], speeds[1]), host.converted(samples[1], speeds[1])
    kept = [host.converted(r["per_step"], speeds[1]) for r in runs if host.speed(r.get("per_step"))]
    out = {}
    for name in host.HOST_SERIES:
        b, c = usable(before, before.get(name) or []), usable(now, now.get(name) or [])
        if not b or not c:
            continue
        medians = tuple(summarize(u)["median"] for u in (usable(r, r.get(name) or []) for r in kept) if u)
        out[name] = (Series(b, summarize(b, _decimals(name)), medians), Series(c, summarize(c, _decimals(name))))
    return out


def same_program(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The two runs did the same GPU work per step: every count and byte total, and each
    kernel name's count, equal."""
    va, vb = compared_values(a), compared_values(b)
    counted = [n for n, s in METRICS.items() if s.kind in ("count", "bytes")
               and not (n in RECORDED_SINCE and (va.get(n) is None or vb.get(n) is None))]  # an older run lacks it
    kernels = {k for k in list(va) + list(vb) if k.startswith("kernels[")}
    pairs = [(va.get(k), vb.get(k)) for k in [*counted, *kernels]]
    return all(a == b or (a is not None and b is not None and same(a, b)) for a, b in pairs)


def check_threshold(t: Threshold, value: float | None, pair: tuple[Series, Series] | None = None,
                     speeds: tuple[float, float] | None = None) -> Verdict:
    """A threshold on this run's value.  One on a ratio over the window (``pair``: its series
    at the baseline host's speed, given when only the host's speed moved the window) that
    is broken only because the host ran slower than the baseline's, and holds at the
    baseline host's speed, is ``unstable``, not broken."""
    if value is None:
        return Verdict(t.metric, State.OK, None, None, f"{t.text} (not applicable: no value)", threshold=t)
    if t.holds(value):
        return Verdict(t.metric, State.OK, None, value, t.text, threshold=t)
    if pair is not None and speeds is not None and speeds[0] > speeds[1] and t.holds(pair[1].summary["median"]):
        return Verdict(t.metric, State.UNSTABLE, None, value, t.text, threshold=t, evidence=(
            f"broken only because {host.slower(*speeds)}: {shown_value(t.metric, pair[1].summary['median'])} "
            "at the baseline host's speed"))
    return Verdict(t.metric, State.THRESHOLD, None, value, t.text, threshold=t)


def compare_value(spec: MetricSpec, b: float | None, c: float | None, rules: Rules) -> Verdict:
    """One value against the baseline's by its kind's rule (no samples): counts and bytes exact,
    times and rates relative, ratios absolute."""
    per = " per step" if spec.per_step else ""
    if b is None or c is None:
        # e.g. overlap_efficiency is null without memcpys; the memcpy counts judge that change
        return Verdict(spec.name, State.OK, b, c, f"{NOT_COMPARED}: no value in one of the runs")
    if spec.kind in ("count", "bytes"):
        rule = f"must match exactly{per}"
        if same(b, c):
            return Verdict(spec.name, State.OK, b, c, rule)
        if spec.better == "lower":
            return Verdict(spec.name, State.IMPROVED if c < b else State.REGRESSED, b, c, rule + " (lower is better)")
        return Verdict(spec.name, State.CHANGED, b, c, rule)
    relative = spec.kind != "ratio"
    rule = _within(spec, rules, per)
    if not _beyond(spec, c - b, b, rules):
        return Verdict(spec.name, State.OK, b, c, rule, relative)
    return Verdict(spec.name, _direction(spec, c - b), b, c, rule, relative)


def _within(spec: MetricSpec, rules: Rules, per: str = "") -> str:
    """What a time, rate or ratio must stay within, in words: a time's relative tolerance
    and floor, a rate's relative tolerance, a ratio's absolute one in its bad direction."""
    tol = rules.tolerance(spec)
    if spec.kind == "time":
        return f"within ±{tol:.0%}{per} (changes under {format_time_us(rules.time_floor_us)} ignored)"
    if spec.kind == "rate":
        return f"within ±{tol:.0%}{per}"
    return f"must not {'drop' if spec.better == 'higher' else 'rise'} by more than {format_number(tol)}"


def _beyond(spec: MetricSpec, delta: float, before: float, rules: Rules) -> bool:
    """A change beyond the metric's tolerance: relative and past the floor for times,
    relative for rates, absolute for ratios."""
    if spec.kind == "time":
        return beyond_time_rule(delta, before, rules.tolerance(spec), rules.time_floor_us)
    if spec.kind == "rate":
        return abs(delta) > rules.tolerance(spec) * abs(before)
    return abs(delta) > rules.tolerance(spec) + 1e-12


def _direction(spec: MetricSpec, delta: float) -> State:
    worse = delta > 0 if spec.better == "lower" else delta < 0
    return State.REGRESSED if worse else State.IMPROVED


def _paired_series(
    samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
    distributions: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
    runs: Sequence[Mapping[str, Any]],
) -> dict[str, tuple[Series, Series]]:
    """(baseline, current) of every judged series both runs kept, by the name its verdict
    takes: the time and ratio metrics, then ``kernels[NAME].time_us`` by kernel name."""
    if not samples or not samples[0] or not samples[1]:
        return {}
    now, before = samples[0], samples[1]
    now_stored, before_stored = distributions or (None, None)
    now_d, before_d = distribution(now, now_stored), distribution(before, before_stored)

    summaries = [r["distribution"] for r in runs if r.get("distribution")]

    def medians(name: str, kernel: bool = False) -> tuple[float, ...]:
        found = [(r.get("kernels") or {}).get(name) if kernel else r.get(name) for r in summaries]
        return tuple(s["median"] for s in found if s)

    out = {name: (Series(usable(before, before[name]), before_d[name], medians(name)),
                  Series(usable(now, now[name]), now_d[name]))
           for name in now_d if name != "kernels" and name in before_d}
    for name in sorted(set(now_d["kernels"]) & set(before_d["kernels"])):
        out[f"kernels[{name}].time_us"] = (
            Series(usable(before, before["kernels"][name]), before_d["kernels"][name], medians(name, kernel=True)),
            Series(usable(now, now["kernels"][name]), now_d["kernels"][name]))
    return out


#: Level of the prediction interval that the baseline's recorded runs give a run's median.
RUNS_LEVEL = 0.01


def kernel_series(name: str) -> bool:
    """The series of GPU kernel time (the total and each kernel name's): they move together
    between processes (clocks, memory placement), unlike copy times and the window, which
    move with the host and the PCIe link, each in its own way."""
    return name == "kernel_time_us" or name.startswith("kernels[")


def pooled_log_spread(series: list[tuple[float, ...]]) -> tuple[float, int] | None:
    """How much a test's kernel times move between processes, learnt from all its kernel
    series at once: the pooled standard deviation of the logarithms of each series' run
    medians (sum of squared deviations over sum of R - 1), and its degrees of freedom.
    Three runs give one series 2 degrees of freedom, too few to bound a fourth; a test's
    10 to 25 kernel series together give 20 to 50.  None without a series of two or more
    positive medians."""
    squares, freedom = pooled_squares([math.log(m) for m in medians] for medians in series
                                      if len(medians) >= 2 and min(medians) > 0)
    return (math.sqrt(squares / freedom), freedom) if freedom else None


def run_spread(medians: tuple[float, ...], shared: tuple[float, int] | None = None) -> tuple[float, float] | None:
    """The two-sided 1 - RUNS_LEVEL prediction interval of one more run's median, from the
    medians of the R recorded runs; None with none, or with one and no ``shared`` spread.

    With ``shared`` (a log spread and its degrees of freedom: ``pooled_log_spread`` for
    kernel series, or an assumed spread, ``ONE_RUN_SPREAD``) the series is bounded on the
    log scale: mean ± t(1 - RUNS_LEVEL/2, its df) · max(s, shared s) · sqrt(1 + 1/R), s the
    series' own standard deviation of log medians (0 for one run), so a series that moves
    more keeps its own wider spread.  A ``stats.Prior`` (``host.HOST_UNITS_SPREAD``) is
    pooled with the own instead: sqrt(((R-1) s² + df p²) / (R-1 + df)), on R-1 + df degrees
    of freedom.  Otherwise (copy times, the window, ratios of two or more runs):
    mean ± t(1 - RUNS_LEVEL/2, R-1) · s · sqrt(1 + 1/R) on the values themselves."""
    r = len(medians)
    if r == 0 or (r < 2 and shared is None):
        return None
    if shared is not None and min(medians) > 0:
        spread, freedom = shared
        logs = [math.log(m) for m in medians]
        mean = sum(logs) / r
        squares = sum((x - mean) ** 2 for x in logs)
        if isinstance(shared, Prior):
            spread, freedom = math.sqrt((squares + freedom * spread ** 2) / (r - 1 + freedom)), r - 1 + freedom
        elif r > 1:
            spread = max(spread, math.sqrt(squares / (r - 1)))
        half = t_quantile(1 - RUNS_LEVEL / 2, freedom) * spread * math.sqrt(1 + 1 / r)
        return math.exp(mean - half), math.exp(mean + half)
    if r < 2:
        return None
    mean = sum(medians) / r
    s = math.sqrt(sum((m - mean) ** 2 for m in medians) / (r - 1))
    half = t_quantile(1 - RUNS_LEVEL / 2, r - 1) * s * math.sqrt(1 + 1 / r)
    return mean - half, mean + half


#: The between-process spread assumed for a GPU-side time when the baseline recorded one
#: run (log-scale standard deviation, degrees of freedom): with one run nothing is known
#: of how the series moves between processes.  On H100s one kernel moved 7.5% between
#: machines and weight streaming's kernels 6.5% between processes; host-to-device copies
#: 46% (docs/metrics.md): one run's interval is ±10% for kernel times, ±40% for copies.
ONE_RUN_SPREAD = {"kernel": (0.025, 20), "copy": (0.10, 20)}


#: A kernel whose launches take under this many microseconds each (its median time per step
#: over its count per step, in the baseline), and the log spread between processes it is
#: bounded with at least: a launch of a few microseconds moves with where the process's
#: work lands.  On an H100 the decode test's GEMV (3.1 us a launch) ran 293 or 316 us a step
#: by process, 10.4% apart over 10 processes (sd of the log 0.028), while no kernel of
#: 5 us a launch or more moved over 7.4% (docs/metrics.md).
SHORT_KERNEL = (10.0, 0.03)


def _per_launch(baseline: Series, count_per_step: float | None) -> float | None:
    """A kernel name's time per launch in the baseline: its median time per step over its
    count per step; None without a count."""
    return baseline.summary["median"] / count_per_step if count_per_step else None


def _kernel_spread(pooled: tuple[float, int] | None, per_launch_us: float | None = None) -> tuple[float, int]:
    """The shared spread of a kernel series: the test's pooled one (or, with one recorded
    run, the assumed one), at least ``SHORT_KERNEL``'s for a kernel of short launches."""
    spread, freedom = pooled or ONE_RUN_SPREAD["kernel"]
    if per_launch_us is not None and per_launch_us < SHORT_KERNEL[0]:
        spread = max(spread, SHORT_KERNEL[1])
    return spread, freedom


def _spread_of(name: str, pooled: tuple[float, int] | None, recorded: int) -> tuple[float, int] | None:
    """The shared spread of a series' prediction interval (``run_spread``) when the baseline
    recorded ``recorded`` runs: the kernel series' pooled one; with fewer than two runs,
    the one assumed for a GPU-side time (``ONE_RUN_SPREAD``); else none (its own)."""
    if kernel_series(name):
        return _kernel_spread(pooled)
    if name.startswith("memcpy_") and recorded < 2:
        return ONE_RUN_SPREAD["copy"]
    return None


class Finding(NamedTuple):
    """One scale's outcome for a series: ok, undecided, regressed or improved, and why; the
    Mann-Whitney p where the test ran, and why an ok let a change beyond the tolerance through."""

    status: State
    evidence: str = ""
    p: float | None = None
    let_through: str = ""


def _on_one_scale(spec: MetricSpec, before: Series, now: Series, rules: Rules, level: float,
                  shared: tuple[float, int] | None, bounded: bool = True) -> Finding:
    """The decisions on one scale, in order: the medians beyond the tolerance (and, for
    times, the floor); enough steps for a p-value under ``level``; a Mann-Whitney U test
    that says the steps differ; with ``bounded``, the median outside the prediction interval
    of the baseline's runs (``run_spread``)."""
    b, c = before.summary["median"], now.summary["median"]
    if not _beyond(spec, c - b, b, rules):
        return Finding(State.OK)
    spreads = f"{_spread(spec, 'median', now.summary)} vs {_spread(spec, 'baseline', before.summary)}"
    sizes = f"n={len(now.samples)}/{len(before.samples)}"
    if smallest_p(len(before.samples), len(now.samples)) >= level:
        return Finding(State.UNDECIDED, f"{spreads}; too few steps to tell a change from noise ({sizes}): no p-value "
                                    f"can get under {level:.2g}; measure at least {steps_for(level)} steps")
    _, p = mann_whitney_u(before.samples, now.samples)
    evidence = f"{spreads}; Mann-Whitney U p={p:.2g} ({sizes})"
    if p >= level:
        return Finding(State.OK, evidence + ": within noise", p, NOT_SIGNIFICANT)
    interval = run_spread(before.run_medians, shared) if bounded else None
    if interval is not None:
        spread = (f"{len(before.run_medians)} recorded run(s)' medians "
                  f"{_range(spec, min(before.run_medians), max(before.run_medians))}, "
                  f"{1 - RUNS_LEVEL:.0%} prediction interval {_range(spec, *interval)}")
        if interval[0] <= c <= interval[1]:
            return Finding(State.OK, f"{evidence}; within what the baseline's runs show ({spread})", p, WITHIN_RUNS)
        evidence += f"; outside what the baseline's runs show ({spread})"
    return Finding(_direction(spec, c - b), evidence, p)


class HostPair(NamedTuple):
    """The window of the baseline and of this run at the baseline host's speed, (this run's,
    the baseline's) readings, and whether the step is the host's (``host.host_bound``)."""

    before: Series
    now: Series
    speeds: tuple[float, float]
    host_bound: bool


def _compare_samples(spec: MetricSpec, before: Series, now: Series, rules: Rules, family: int,
                     shared: tuple[float, int] | None = None, host_pair: HostPair | None = None) -> Verdict:
    """A time or ratio metric on per-step samples, judged ``_on_one_scale`` at the test's
    corrected level, alpha / family.  The window (``host_pair``) is judged at the baseline
    host's speed too (tolerance, steps and the baseline's runs, their spread pooled with
    ``host.HOST_UNITS_SPREAD``): in a step that is the host's (``host.host_bound``) that
    decides alone, so that a slower or faster host passes and more host-side work per step
    fails whatever the host's speed; in a busier step, whose window follows the GPU, it
    changes only when it changes both as measured and at that speed."""
    b, c = before.summary["median"], now.summary["median"]
    level = rules.alpha / max(family, 1)
    rule = (f"median per step {_within(spec, rules)} unless the steps differ "
            f"(Mann-Whitney p < {format_number(rules.alpha)} / {family} series = {level:.2g})")
    relative = spec.kind != "ratio"
    if host_pair is not None:
        at_speed = (f"at the baseline host's speed, where the median must also lie outside the "
                    f"{1 - RUNS_LEVEL:.0%} prediction interval of the baseline's runs")
        rule += (f", judged {at_speed} (the step is the host's: the baseline's GPU busy "
                 f"{format_ratio(host.HOST_BOUND)} of the window or less)" if host_pair.host_bound
                 else f", and so {at_speed}")
        raw = _on_one_scale(spec, before, now, rules, level, None, bounded=False)
        moved = raw.status in (State.REGRESSED, State.IMPROVED)
        if not moved and not host_pair.host_bound:
            return Verdict(spec.name, raw.status, b, c, rule, relative, evidence=raw.evidence, p_value=raw.p,
                           p_level=level, let_through=raw.let_through)
        at = _on_one_scale(spec, host_pair.before, host_pair.now, rules, level, host.HOST_UNITS_SPREAD)
        status = at.status if host_pair.host_bound else raw.status if at.status == raw.status else State.OK
        decided = at if host_pair.host_bound else raw
        let_through = "" if status != State.OK else HOST_SPEED if moved else decided.let_through
        change = format_change(host_pair.now.summary["median"], host_pair.before.summary["median"], spec.kind,
                               spec.unit)
        evidence = "; ".join(part for part in (
            raw.evidence, f"{format_change(c, b, spec.kind, spec.unit)} as measured, {change} at the baseline "
            f"host's speed ({at.evidence or 'within the tolerance'}): {host.slower(*host_pair.speeds)}") if part)
        # the host explains the change as measured: not when this run regressed at its speed
        return Verdict(spec.name, status, b, c, rule, relative, evidence=evidence,
                       by_host=moved and status not in (raw.status, State.REGRESSED), p_value=decided.p, p_level=level,
                       let_through=let_through)
    if run_spread(before.run_medians, shared) is not None:
        rule += f" and the median lies outside the {1 - RUNS_LEVEL:.0%} prediction interval of the baseline's runs"
    found = _on_one_scale(spec, before, now, rules, level, shared)
    return Verdict(spec.name, found.status, b, c, rule, relative, evidence=found.evidence, p_value=found.p,
                   p_level=level, let_through=found.let_through)


def _spread(spec: MetricSpec, label: str, summary: Mapping[str, Any]) -> str:
    """``LABEL 14.82 ms (IQR 14.8–14.85 ms, n=N)``: one run's median and interquartile range."""
    return (f"{label} {shown_value(spec.name, summary['median'])} "
            f"(IQR {_range(spec, summary['q1'], summary['q3'])}, n={summary['n']})")


def _range(spec: MetricSpec, low: float, high: float) -> str:
    """``14.8–14.85 ms``: two values of a metric, the unit said once where both share it."""
    first, second = shown_value(spec.name, low), shown_value(spec.name, high)
    unit = first.partition(" ")[2]
    return f"{first.partition(' ')[0]}–{second}" if unit and unit == second.partition(" ")[2] else f"{first}–{second}"
