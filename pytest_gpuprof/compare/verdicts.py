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

from dataclasses import dataclass, replace
from typing import Any, Mapping, NamedTuple

from ..metrics.measure import METRICS, MetricSpec
from ..numbers import format_change, format_number
from .rules import Rules, Threshold, beyond_time_rule, same
from .stats import evenly_spaced, mann_whitney_u, smallest_p, steps_for, summarize

FAILING = ("regressed", "changed", "threshold")
BROKEN = (*FAILING, "new", "vanished")  # statuses that fail a test (a new or vanished kernel too)

@dataclass
class Verdict:
    """One metric's outcome.  Values are per step for per-step metrics."""

    metric: str
    status: str  # ok | improved | regressed | changed | threshold | new | vanished
    baseline: float | None
    current: float | None
    rule: str
    relative: bool = True  # change shown in percent (False: ratios, shown as a difference)
    evidence: str = ""  # time metrics judged on samples: medians and spreads, the test and its p-value
    threshold: Threshold | None = None  # the absolute requirement this verdict checked, as data

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def change(self) -> str:
        """Change from baseline to current, relative where that means something."""
        if self.baseline is None or self.current is None:
            return ""
        return format_change(self.current, self.baseline, self.relative)

    def to_json(self) -> dict[str, Any]:
        out = {
            "metric": self.metric, "status": self.status, "baseline": self.baseline,
            "current": self.current, "change": self.change(), "rule": self.rule, "evidence": self.evidence,
        }
        if self.threshold is not None:
            out["threshold"] = {"op": self.threshold.op, "value": self.threshold.value}
        return out


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
    return out


def stored_samples(per_step: Mapping[str, Any]) -> dict[str, Any]:
    """``per_step`` as baselines and results keep it: every list cut to the same evenly
    spaced steps (``stats.evenly_spaced``), so the lists stay aligned step by step."""
    return {k: stored_samples(v) if isinstance(v, Mapping) else evenly_spaced(v) for k, v in per_step.items()}


def distribution(per_step: Mapping[str, Any], stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary (``stats.summarize``) of each per-step time series: every time metric
    of ``per_step`` and, under ``kernels``, each kernel name.  Summaries found in
    ``stored`` (a baseline's or a result's ``distribution``, made from all steps before
    the samples were cut) are taken as they are; the others are made from the samples
    (baselines written before distributions were stored)."""
    stored = stored or {}
    kept = stored.get("kernels") or {}
    out: dict[str, Any] = {name: stored.get(name) or summarize(values) for name, values in per_step.items()
                           if name in METRICS and METRICS[name].kind == "time"}
    out["kernels"] = {name: kept.get(name) or summarize(values)
                      for name, values in (per_step.get("kernels") or {}).items()}
    return out


class Series(NamedTuple):
    """One per-step time series of a run: the samples kept and the summary of all steps."""

    samples: list[float]
    summary: Mapping[str, Any]


def judge(
    current: Mapping[str, Any], baseline: Mapping[str, Any] | None, rules: Rules, same_backend: bool = True,
    samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None = None,
    distributions: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None = None,
) -> list[Verdict]:
    """Every verdict for one test: thresholds first, then each metric against the baseline.

    ``samples`` are the (current, baseline) ``per_step`` objects and ``distributions``
    their ``distribution`` objects: time series found in both ``per_step`` are judged
    on them (see ``_compare_samples``); a side without a distribution is summarized
    from its samples.  A baseline recorded with the other backend is compared on
    counts and bytes only: times differ between profilers, and so do the spellings of
    kernel names."""
    now = compared_values(current)
    verdicts = [_check_threshold(t, now.get(t.metric)) for t in rules.thresholds]
    if baseline is None:
        return verdicts
    before = compared_values(baseline)
    paired = _paired_series(samples, distributions) if same_backend else {}
    family = len(paired)  # the time series judged on samples: the Bonferroni correction's m
    for name, spec in METRICS.items():
        if spec.kind == "info" or (spec.kind == "ratio" and spec.better is None):
            continue
        if not same_backend and spec.kind not in ("count", "bytes"):
            continue
        if spec.kind == "time" and name in paired:
            verdicts.append(_compare_samples(spec, *paired[name], rules, family))
        else:
            verdicts.append(_compare(spec, before.get(name), now.get(name), rules))
    if not same_backend:
        return verdicts
    kernel_time = MetricSpec("kernel time", "time", "lower", True, "us")
    verdicts += [_compare_samples(replace(kernel_time, name=key), *pair, rules, family)
                 for key, pair in paired.items() if key.startswith("kernels[")]
    kernels = sorted(
        {k for k in list(now) + list(before) if k.startswith("kernels[")},
    )
    for key in kernels:
        b, c = before.get(key), now.get(key)
        if b is None:
            verdicts.append(Verdict(key, "new", None, c, "kernel absent from the baseline"))
        elif c is None:
            verdicts.append(Verdict(key, "vanished", b, None, "kernel in the baseline, absent now"))
        elif not same(b, c):
            verdicts.append(Verdict(key, "changed", b, c, "count per step must match exactly"))
    return verdicts


def test_status(verdicts: list[Verdict], has_baseline: bool) -> str:
    """One word for the test: failed, improved, passed or no baseline (undecided time
    verdicts and unstable measurements are reported beside it, not failed)."""
    if any(v.status in BROKEN for v in verdicts):
        return "failed"
    if not has_baseline:
        return "no baseline"
    if any(v.status == "undecided" for v in verdicts):
        return "undecided"
    if any(v.status == "improved" for v in verdicts):
        return "improved"
    return "passed"


def _check_threshold(t: Threshold, value: float | None) -> Verdict:
    if value is None:
        return Verdict(t.metric, "ok", None, None, f"{t.text} (not applicable: no value)", threshold=t)
    return Verdict(t.metric, "ok" if t.holds(value) else "threshold", None, value, t.text, threshold=t)


def _compare(spec: MetricSpec, b: float | None, c: float | None, rules: Rules) -> Verdict:
    per = " per step" if spec.per_step else ""
    if b is None or c is None:
        # e.g. overlap_efficiency is null without memcpys; the memcpy counts judge that change
        return Verdict(spec.name, "ok", b, c, "not compared: no value in one of the runs")
    if spec.kind in ("count", "bytes"):
        rule = f"must match exactly{per}"
        if same(b, c):
            return Verdict(spec.name, "ok", b, c, rule)
        if spec.better == "lower":
            return Verdict(spec.name, "improved" if c < b else "regressed", b, c, rule + " (lower is better)")
        return Verdict(spec.name, "changed", b, c, rule)
    tol = rules.tolerance(spec)
    relative = spec.kind == "time"
    if relative:
        floor_us = rules.time_floor_us
        rule = f"within ±{tol:.0%}{per} (changes under {format_number(floor_us)} us ignored)"
        delta = c - b
        beyond = beyond_time_rule(delta, b, tol, floor_us)
    else:
        rule = f"must not {'drop' if spec.better == 'higher' else 'rise'} by more than {format_number(tol)}"
        delta = c - b
        beyond = abs(delta) > tol + 1e-12
    if not beyond:
        return Verdict(spec.name, "ok", b, c, rule, relative)
    worse = delta > 0 if spec.better == "lower" else delta < 0
    return Verdict(spec.name, "regressed" if worse else "improved", b, c, rule, relative)


def _paired_series(
    samples: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
    distributions: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None,
) -> dict[str, tuple[Series, Series]]:
    """(baseline, current) of every time series both runs kept, by the name its verdict
    takes: the time metrics, then ``kernels[NAME].time_us`` by kernel name."""
    if not samples or not samples[0] or not samples[1]:
        return {}
    now, before = samples
    now_d, before_d = (distribution(p, d) for p, d in zip(samples, distributions or (None, None)))
    out = {name: (Series(before[name], before_d[name]), Series(now[name], now_d[name]))
           for name in now_d if name != "kernels" and name in before_d}
    for name in sorted(set(now_d["kernels"]) & set(before_d["kernels"])):
        out[f"kernels[{name}].time_us"] = (Series(before["kernels"][name], before_d["kernels"][name]),
                                           Series(now["kernels"][name], now_d["kernels"][name]))
    return out


def _compare_samples(spec: MetricSpec, before: Series, now: Series, rules: Rules, family: int) -> Verdict:
    """A time metric on per-step samples: medians of all steps beyond the tolerance and
    floor, and a Mann-Whitney U test on the samples kept that says the steps differ at
    the test's corrected level, alpha / family."""
    b, c = before.summary["median"], now.summary["median"]
    tol = rules.tolerance(spec)
    level = rules.alpha / max(family, 1)
    rule = (f"median per step within ±{tol:.0%} (changes under {format_number(rules.time_floor_us)} us ignored) "
            f"unless the steps differ (Mann-Whitney p < {format_number(rules.alpha)} / {family} time series "
            f"= {level:.2g})")
    delta = c - b
    if not beyond_time_rule(delta, b, tol, rules.time_floor_us):
        return Verdict(spec.name, "ok", b, c, rule)
    spreads = f"{_spread('median', now.summary)} vs {_spread('baseline', before.summary)}"
    sizes = f"n={len(now.samples)}/{len(before.samples)}"
    if smallest_p(len(before.samples), len(now.samples)) >= level:
        return Verdict(spec.name, "undecided", b, c, rule, evidence=(
            f"{spreads}; too few steps to tell a change from noise ({sizes}): no p-value can get under "
            f"{level:.2g}; measure at least {steps_for(level)} steps"))
    _, p = mann_whitney_u(before.samples, now.samples)
    evidence = f"{spreads}; Mann-Whitney U p={p:.2g} ({sizes})"
    if p >= level:
        return Verdict(spec.name, "ok", b, c, rule, evidence=evidence + ": within noise")
    worse = delta > 0 if spec.better == "lower" else delta < 0
    return Verdict(spec.name, "regressed" if worse else "improved", b, c, rule, evidence=evidence)


def _spread(label: str, summary: Mapping[str, Any]) -> str:
    """``LABEL M us (IQR Q1–Q3, n=N)``: one run's median and interquartile range."""
    return (f"{label} {format_number(summary['median'])} us "
            f"(IQR {format_number(summary['q1'])}–{format_number(summary['q3'])}, n={summary['n']})")


