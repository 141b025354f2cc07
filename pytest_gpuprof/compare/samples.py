"""Per-step samples, as runs keep them and as rules read them.

A run keeps each series' steps cut to evenly spaced ones (``stored_samples``) and a summary
of all of them (``distribution``); only the steps the host did not stall and that ran at an
unthrottled clock decide (``usable``).  The rules compare values per step (``compared_values``), or the median step
where a run kept samples (``judged_values``), and a series of this run beside the
baseline's (``Series``, ``paired_series``).  No rule lives here: the baseline files and the
results read the same summaries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..metrics.health import left_out
from ..metrics.specs import METRICS, MetricSpec
from .stats import evenly_spaced, summarize

#: (current, baseline) of a test's ``per_step`` objects, or of their ``distribution`` objects.
Sides = tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]


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
    """The values of the steps that decide verdicts: steps the host stalled or that ran at a
    throttled clock (``metrics.health.left_out``) and steps without a value are left out."""
    out = left_out(per_step)
    return [v for i, v in enumerate(values) if v is not None and not (i < len(out) and out[i])]


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
                out[name] = stored.get(name) or summarize(steps, decimals(name))
    out["kernels"] = {name: kept.get(name) or summarize(usable(per_step, values))
                      for name, values in (per_step.get("kernels") or {}).items() if usable(per_step, values)}
    return out


def medians(summaries: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A ``distribution`` with each summary cut to its ``median``, kernels' too: what a
    results document keeps of a baseline's recorded run (``paired_series`` reads no more)."""
    if summaries is None:
        return None
    out: dict[str, Any] = {name: {"median": s["median"]} for name, s in summaries.items()
                           if name != "kernels" and isinstance(s, Mapping) and "median" in s}
    return out | {"kernels": {name: {"median": s["median"]} for name, s in (summaries.get("kernels") or {}).items()
                              if isinstance(s, Mapping) and "median" in s}}


def decimals(name: str) -> int:
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


def judged_side(metrics: Mapping[str, Any], samples: Sides | None, distributions: Sides | None,
                side: int) -> dict[str, float | None]:
    """``judged_values`` of one side (0: current, 1: baseline), summarized from its samples
    and its stored distribution where it kept them."""
    per_step = samples[side] if samples else None
    stored = distributions[side] if distributions else None
    return judged_values(metrics, distribution(per_step, stored) if per_step else None)


def paired_series(samples: Sides | None, distributions: Sides | None,
                  runs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[Series, Series]]:
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
