"""Verdicts: a measurement against its baseline and its absolute thresholds.

``judge`` makes every verdict of one test, in one order: thresholds, then each metric of
``metrics.METRICS``, each collective, each kernel name's time, then each kernel name's
count.  It composes the rule families, one module each:

* counts and bytes (``exact_rules``): per step, must match exactly; so must each kernel
  name's count (a new or vanished kernel is a change) and each collective's calls and bytes.
* times, rates and ratios where both runs kept per-step samples (``time_rules``): the
  medians beyond the tolerance, and steps that differ by a Mann-Whitney U test at the
  test's Bonferroni-corrected level, outside what the baseline's recorded runs show; the
  window at the baseline host's speed too.  Too few steps to tell is "undecided", never a
  failure.
* the same without samples, and thresholds (``threshold_rules``): times within a relative
  tolerance and past an absolute floor, rates within a relative one, ratios within an
  absolute one in the bad direction; a threshold on this run's value whatever the baseline.

A change in the good direction beyond the tolerance is reported as "improved" (update the
baseline), never as a failure.  The ``Verdict`` they make, and how its values are said:
``verdict``; the samples they read: ``samples``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..metrics.specs import METRICS, RECORDED_SINCE, MetricSpec, counter_spec
from .exact_rules import collective_verdicts, exact_verdict, kernel_count_verdicts, same_program
from .rules import Rules
from .samples import Sides, compared_values, judged_series, judged_side, paired_series
from .status import State
from .threshold_rules import RATE_UNJUDGED, check_threshold, latency_bound, tolerance_verdict
from .time_rules import Timing, timing
from .verdict import NOT_COMPARED, Verdict


def judge(
    current: Mapping[str, Any], baseline: Mapping[str, Any] | None, rules: Rules, same_backend: bool = True,
    samples: Sides | None = None, distributions: Sides | None = None, runs: Sequence[Mapping[str, Any]] | None = None,
    other_card: bool = False, base_process: bool = False,
) -> list[Verdict]:
    """Every verdict for one test: thresholds first, then each metric against the baseline.

    ``samples`` are the (current, baseline) ``per_step`` objects and ``distributions``
    their ``distribution`` objects: series found in both ``per_step`` are judged on them
    (``time_rules``); a side without a distribution is summarized from its samples.
    ``runs`` are the baseline's recorded runs (each with its ``distribution`` and, where
    kept, its ``per_step``): a change must also lie outside what their medians show.  The
    window is judged at the baseline host's speed too (``host``), when both sides read it
    and do the same GPU work, and the ratios over it follow its verdict.  Thresholds apply
    to the medians per step where the run kept samples.  A baseline recorded with the
    other backend is compared on counts and bytes only: times differ between profilers,
    and so do the spellings of kernel names.  ``other_card``: this run measured a card none
    of the recorded runs did (``machine.on_recorded_card``), and kernel times get the spread
    between cards too (``time_rules.BETWEEN_CARDS``).  ``base_process``: the baseline is the
    base revision's one fresh process (``pairs.base_entry``), and a kernel time worse beyond
    its tolerance whose steps do not differ is a ``provisional`` regression for its pairs."""
    judged_now = judged_side(current, samples, distributions, 0)
    timed = _timing(current, baseline, rules, same_backend, samples, distributions, runs or [], other_card,
                    base_process)
    verdicts = _thresholds(rules, judged_now, timed)
    if baseline is None:
        return verdicts
    now = compared_values(current)  # the values shown where a series is not compared
    before = compared_values(baseline)
    values = Values(before, now, judged_side(baseline, samples, distributions, 1), judged_now)
    verdicts += _metric_verdicts(values, rules, same_backend, timed, bool(samples and samples[1]))
    verdicts += collective_verdicts(before, now, "collectives" in baseline and "collectives" in current)
    if not same_backend:  # collectives too: both backends count every call (nsys reads no sizes)
        return verdicts
    return verdicts + timed.kernel_verdicts(before, rules) + kernel_count_verdicts(before, now)


class Values(NamedTuple):
    """The values a metric's rule reads, the baseline's and this run's: per step
    (``samples.compared_values``), and at the median step where the run kept samples
    (``samples.judged_values``)."""

    before: Mapping[str, float | None]
    now: Mapping[str, float | None]
    judged_before: Mapping[str, float | None]
    judged_now: Mapping[str, float | None]


def _timing(current: Mapping[str, Any], baseline: Mapping[str, Any] | None, rules: Rules, same_backend: bool,
            samples: Sides | None, distributions: Sides | None, runs: Sequence[Mapping[str, Any]],
            other_card: bool, base_process: bool = False) -> Timing:
    """The sample judgement's ``Timing``: the series both runs kept, against a baseline of
    the same backend only; the host's speed taken out where they did the same GPU work."""
    if baseline is None or not same_backend:
        return timing({}, samples, runs, False, rules)
    return timing(paired_series(samples, distributions, runs), samples, runs, same_program(current, baseline), rules,
                  other_card, base_process)


def _thresholds(rules: Rules, judged_now: Mapping[str, float | None], timed: Timing) -> list[Verdict]:
    """Each threshold on this run's value (counters': ``compare.counter_verdicts``); a ratio
    over the window at the baseline host's speed too where only the host's speed moved it."""
    return [check_threshold(t, judged_now.get(t.metric),
                            timed.at_baseline_speed.get(t.metric) if timed.by_host else None, timed.speeds)
            for t in rules.thresholds if counter_spec(t.metric) is None]


def _metric_verdicts(values: Values, rules: Rules, same_backend: bool, timed: Timing,
                     baseline_kept: bool) -> list[Verdict]:
    """Each metric of ``METRICS`` that a rule judges, in its order: against a baseline of the
    other backend its counts and bytes only.  ``baseline_kept``: the baseline kept per-step
    samples."""
    out = []
    for name, spec in METRICS.items():
        if spec.kind == "info" or (spec.kind == "ratio" and spec.better is None):
            continue
        if not same_backend and spec.kind not in ("count", "bytes"):
            continue
        out.append(_metric_verdict(name, spec, values, rules, timed, baseline_kept))
    return out


def _metric_verdict(name: str, spec: MetricSpec, values: Values, rules: Rules, timed: Timing,
                    baseline_kept: bool) -> Verdict:
    """One metric against the baseline: the window's verdict; not compared where the
    baseline's runs did not all keep its steps; a copy bandwidth of too short copies not
    judged; on its samples where both runs kept them; else by its kind's rule."""
    if name == "window_us" and timed.window is not None:
        return timed.window
    if name in RECORDED_SINCE and name not in timed.paired and judged_series(spec) and baseline_kept:
        # a baseline whose recorded runs did not all keep it (recorded before it existed)
        return Verdict(name, State.OK, values.judged_before.get(name), values.judged_now.get(name),
                       f"{NOT_COMPARED}: the baseline's recorded runs do not all hold its steps")
    if name.endswith("_gbps") and latency_bound(name, values.before, rules):
        return Verdict(name, State.OK, values.judged_before.get(name), values.judged_now.get(name), RATE_UNJUDGED)
    if name in timed.paired:
        return timed.verdict(spec, rules)
    return compare_value(spec, values.before.get(name), values.now.get(name), rules)


def compare_value(spec: MetricSpec, b: float | None, c: float | None, rules: Rules) -> Verdict:
    """One value against the baseline's by its kind's rule (no samples): counts and bytes exact
    (``exact_rules``), times and rates relative, ratios absolute (``threshold_rules``)."""
    if b is None or c is None:
        # e.g. overlap_efficiency is null without memcpys; the memcpy counts judge that change
        return Verdict(spec.name, State.OK, b, c, f"{NOT_COMPARED}: no value in one of the runs")
    if spec.kind in ("count", "bytes"):
        return exact_verdict(spec, b, c)
    return tolerance_verdict(spec, b, c, rules)
