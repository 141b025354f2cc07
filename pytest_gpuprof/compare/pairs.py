"""Head against the base revision measured alongside: interleaved pairs of fresh processes.

A stored baseline was measured on another machine, at another time; a change of times
or ratios against it can be the machine (a neighbour on the PCIe switch, another driver).
With ``--gpuprof-base`` the revision a change is compared with is measured here and now,
base, head, then head, base, ... (ABBA) each in a fresh process: each pair gives one difference per
metric, and ``decide`` says from the pairs whether head is worse than base beyond the
tolerance (``worse``), within it (``same``), or that the pairs cannot tell yet
(``not sure``).  docs/metrics.md, "Against the base revision measured alongside", gives
the statistic and its error levels.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..metrics.specs import METRICS, MetricSpec
from ..numbers import format_points
from . import host
from .entry import Entry
from .evaluate import TestResult, fails_on_timing_alone
from .recording import new_baseline_entry
from .rules import Rules
from .samples import compared_values, usable
from .stats import Prior, pooled_squares, t_quantile
from .status import BROKEN, State
from .time_rules import kernel_series
from .verdict import NOT_SIGNIFICANT, Verdict, shown_value

#: What the pairs can say of one metric ("not sure" is also the status of its verdict).
WORSE, SAME, NOT_SURE = "worse", "same", State.NOT_SURE.value
#: The chance that a test whose head is no worse than its base fails: split over the metrics
#: the pairs judge and over the looks (one after each pair).
ALPHA = 0.01
#: The chance that a metric worse by exactly its tolerance is called the same: split over the looks.
BETA = 0.10
#: How much one process's median moves between fresh processes before the pairs show their
#: own (log scale; absolute for ratios), with the weight of its degrees of freedom; a pair's
#: difference moves sqrt(2) times as much.  From 30 unchanged processes on three H100s
#: (docs/metrics.md): kernels 0.2% at the median, 4.2% at most; copies up to 5%; the
#: window of a launch-bound step at the host's speed 3-4%; ratios up to 0.03.
PROCESS_SPREAD = {"kernel": Prior(0.025, 8), "copy": Prior(0.10, 8), "window": Prior(0.05, 8),
                  "ratio": Prior(0.025, 8)}
#: The two scales a host series is judged on (``host``).
AS_MEASURED, AT_SPEED = "as measured", "at the base host's speed"


class Decision(NamedTuple):
    """What the pairs say of one metric: the outcome, the medians of each side's process
    values, the mean difference in the bad direction (log for times and rates, absolute
    for ratios) with its one-sided bounds, and the pairs it stands on."""

    metric: str
    outcome: str  # WORSE | SAME | NOT_SURE
    base: float | None
    head: float | None
    pairs: int
    mean: float | None
    low: float | None  # the mean minus its ALPHA margin: above 0, head is worse
    high: float | None  # the mean plus its BETA margin: at most the tolerance, the same
    scale: str = AS_MEASURED

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def family(metric: str) -> str:
    """Which ``PROCESS_SPREAD`` a metric's process values move with."""
    if kernel_series(metric):
        return "kernel"
    if metric == "window_us":
        return "window"
    return "ratio" if spec_of(metric).kind == "ratio" else "copy"


def worse_by(metric: str, head: float | None, base: float | None) -> float | None:
    """How much worse head is than base on one pair, in the bad direction: log(head / base)
    for a time, log(base / head) for a rate, the difference for a ratio (signed so that
    worse is positive); None without both values, or a time or rate of 0."""
    if head is None or base is None:
        return None
    spec = spec_of(metric)
    if spec.kind == "ratio":
        return head - base if spec.better == "lower" else base - head
    if head <= 0 or base <= 0:
        return None
    return math.log(base / head) if spec.kind == "rate" else math.log(head / base)


def spec_of(metric: str) -> MetricSpec:
    """A metric's spec; a kernel name's time (``kernels[NAME].time_us``) is a time."""
    return METRICS.get(metric) or MetricSpec(metric, "time", "lower", True, "us")


def tolerance(metric: str, rules: Rules) -> float:
    """The tolerance on ``worse_by``'s scale: log(1 + relative tolerance), or the ratio's own."""
    spec = spec_of(metric)
    allowed = rules.tolerance(spec)
    return allowed if spec.kind == "ratio" else math.log1p(allowed)


def kernel_pool(bases: list[Mapping[str, Any]], heads: list[Mapping[str, Any]]) -> tuple[float, int] | None:
    """How much a test's kernels move between the pairs, learnt from all its kernel series at
    once (``bases[i]``, ``heads[i]``: pair i's ``distribution`` summaries): the sum of squared
    deviations of each series' pair differences from their mean, and its degrees of freedom,
    sum of n - 1 over the series every process ran.  One kernel's own pairs give n - 1
    degrees of freedom; a test's 10 to 25 kernel series give ten times that, as the stored
    baselines' pooled spread does (``time_rules.pooled_log_spread``).  None before two pairs."""
    names = set.intersection(*(set((d or {}).get("kernels") or {}) for d in [*bases, *heads])) if bases else set()
    differences = ([worse_by("kernel_time_us", h["kernels"][name]["median"], b["kernels"][name]["median"])
                    for b, h in zip(bases, heads)] for name in names)
    squares, freedom = pooled_squares(d for d in differences if None not in d)
    return (squares, freedom) if freedom else None


def decide(metric: str, bases: list[float | None], heads: list[float | None], rules: Rules, *,
           looks: int, judged: int, scale: str = AS_MEASURED, pool: tuple[float, int] | None = None) -> Decision:
    """The outcome for one metric after the pairs so far (``bases[i]``, ``heads[i]``: pair i's
    process values).

    With d_i = ``worse_by`` of pair i, n pairs, mean d and the pairs' own variance pooled
    with the prior's (``PROCESS_SPREAD``, doubled for a difference): s^2 = ((n-1) s_own^2 +
    f 2 p^2) / (n-1+f) on n-1+f degrees of freedom (a kernel series takes its test's
    ``pool`` of squares and degrees of freedom, ``kernel_pool``, for its own), and the
    tolerance T:
    worse when d > T and d - t(1 - ALPHA / (judged * looks)) s / sqrt(n) > 0 (and, for a
    time, base's median times exp(d) - 1 exceeds the time floor); same when
    d + t(1 - BETA / looks) s / sqrt(n) <= T, or that upper bound, in microseconds over
    base's median, is within the floor; not sure otherwise."""
    kept = [(b, h, d) for b, h in zip(bases, heads)
            if b is not None and h is not None and (d := worse_by(metric, h, b)) is not None]
    if not kept:
        return Decision(metric, NOT_SURE, None, None, 0, None, None, None, scale)
    n = len(kept)
    base = statistics.median(b for b, _, _ in kept)
    head = statistics.median(h for _, h, _ in kept)
    diffs = [d for _, _, d in kept]
    mean = sum(diffs) / n
    own, own_freedom = pool if pool is not None else (sum((d - mean) ** 2 for d in diffs), n - 1)
    prior = PROCESS_SPREAD[family(metric)]
    freedom = own_freedom + prior.freedom
    spread = math.sqrt((own + prior.freedom * 2 * prior.spread ** 2) / freedom)
    low = mean - t_quantile(1 - ALPHA / (max(judged, 1) * looks), freedom) * spread / math.sqrt(n)
    high = mean + t_quantile(1 - BETA / looks, freedom) * spread / math.sqrt(n)
    allowed = tolerance(metric, rules)
    floored = spec_of(metric).kind == "time" and scale == AS_MEASURED  # the floor is in microseconds as measured
    if mean > allowed and low > 0 and not (floored and base * math.expm1(mean) <= rules.time_floor_us):
        outcome = WORSE
    elif high <= allowed or (floored and base * math.expm1(high) <= rules.time_floor_us):
        outcome = SAME
    else:
        outcome = NOT_SURE
    return Decision(metric, outcome, round(base, 6), round(head, 6), n, mean, low, high, scale)


def process_value(metric: str, metrics: Mapping[str, Any], per_step: Mapping[str, Any] | None,
                  summaries: Mapping[str, Any] | None, reference: float | None = None) -> float | None:
    """One process's value of a judged metric: the median of its usable steps (a kernel
    name's time too), a count per step otherwise.  With ``reference`` (a host speed,
    ``host.speed``) a host series is taken at that speed (``host.at_speed``)."""
    if reference is not None and metric in host.HOST_SERIES:
        if not per_step or not per_step.get(metric) or not per_step.get(host.READING):
            return None
        values = usable(per_step, host.at_speed(metric, per_step, reference))
        return statistics.median(values) if values else None
    summaries = summaries or {}
    if metric.startswith("kernels[") and metric.endswith("].time_us"):
        found = (summaries.get("kernels") or {}).get(metric[len("kernels["):-len("].time_us")])
        return None if found is None else found["median"]
    if metric in summaries:
        return summaries[metric]["median"]
    return compared_values(metrics).get(metric)


def base_entry(base: TestResult) -> Entry:
    """The entry a test without a stored baseline is judged against: the base revision's
    fresh process as a baseline of one run whose median bounds nothing, judged with
    ``base_process`` (``compare.judge``).  A time or ratio beyond its tolerance whose steps
    differ (Mann-Whitney) is then a failure to be decided by the pairs, which bound it between
    processes: the prediction interval one run gives (a kernel's +-10%, the window's +-20%)
    would let a 10% slowdown pass unmeasured.  So is a kernel time worse beyond its
    tolerance whose steps do not differ (``Verdict.provisional``): one process's steps cannot tell a change
    of a few percent from that process's own offset, and the pairs can."""
    entry = new_baseline_entry(base, None, 1)[0]
    for run in entry["runs"]:  # (made for this entry alone)
        del run["distribution"]
    return entry


def scale_of(metric: str, host_bound: bool) -> str:
    """A host series of a launch-bound step is judged at the base host's speed; everything
    else as measured (in a busier step the window follows the GPU, and the reading is noise)."""
    return AT_SPEED if host_bound and metric in host.HOST_SERIES else AS_MEASURED


#: How the pairs' outcome for a metric is said (``compare.pairs`` outcomes).
PAIR_OUTCOMES = {"worse": "a regression", "same": "not a regression", "not sure": "not sure (never fails)"}


def pair_change(d: Mapping[str, Any]) -> str:
    """A pairs' decision's (``compare.pairs.Decision``) mean worse-direction difference:
    +4.1% (worse) or +0.02 for a ratio."""
    if d["mean"] is None:
        return "n/a"
    if spec_of(d["metric"]).kind == "ratio":
        return format_points(d["mean"])
    return f"{math.expm1(d['mean']):+.1%}"


def paired_ratio(d: Mapping[str, Any]) -> str:
    """A pairs' decision as head against base with the bounds it was decided on: ``head/base
    1.031 [1.026, 1.036]`` for a time or a rate (exp of the mean pair difference and of its
    two bounds, ``Decision.low`` and ``high``, turned the metric's way), ``head-base +2.0 pp
    [+1.0 pp, +3.0 pp]`` for a ratio; ``n/a`` before a pair gave a difference.  The bound on
    head's better side is the ALPHA one (worse when it is past no change), the one on its
    worse side the BETA one (the same when it is within the tolerance)."""
    if d["mean"] is None:
        return "n/a"
    spec = spec_of(d["metric"])
    sign = 1 if spec.better == "lower" else -1  # worse_by's sign, undone
    mean, bounds = sign * d["mean"], sorted(sign * d[k] for k in ("low", "high"))
    if spec.kind == "ratio":
        return f"head-base {format_points(mean)} [{format_points(bounds[0])}, {format_points(bounds[1])}]"
    return f"head/base {math.exp(mean):.3f} [{math.exp(bounds[0]):.3f}, {math.exp(bounds[1]):.3f}]"


def pair_values(d: Mapping[str, Any]) -> str:
    """``head 12.1 µs, base 12 µs over 3 pair(s) (head worse by +0.8%; head/base 1.008 [0.999,
    1.017])``."""
    where = "" if d["scale"] == AS_MEASURED else f" {d['scale']}"
    return (f"head {shown_value(d['metric'], d['head'])}, base {shown_value(d['metric'], d['base'])}{where} over "
            f"{d['pairs']} pair(s) (head worse by {pair_change(d)}; {paired_ratio(d)})")


def pair_evidence(values: str, outcome: str, threshold: str | None = None) -> str:
    """What the pairs add to a verdict's evidence: ``against the base revision measured
    alongside: head 12.1 us, base 12 us over 3 pair(s) (head worse by +0.8%): not a
    regression``; for a broken threshold, whether the base holds it on this machine."""
    if threshold is not None:
        said = (f"the base holds {threshold} on this machine: a regression" if outcome == "worse"
                else f"the base breaks {threshold} on this machine too: not a regression")
    else:
        said = PAIR_OUTCOMES[outcome]
    return f"against the base revision measured alongside: {values}: {said}"


def needs_pairs(result: TestResult) -> bool:
    """A test that would fail on times or ratios alone: each broken verdict a time, rate or
    ratio regression or threshold (counts, bytes, kernel names and count thresholds are exact)."""
    return fails_on_timing_alone(result, (State.REGRESSED, State.THRESHOLD))


#: Why a test's provisional regressions were not measured in pairs (``judge_without_pairs``).
NOT_PAIRED = "the test fails on what the pairs do not re-measure (a count, bytes, a kernel name or a count threshold)"


def let_through(verdict: Verdict, why: str) -> Verdict:
    """A ``provisional`` regression no pair decided, as it is without the pairs: ``ok``, let
    through as not significant, its evidence saying why no pair decided it; any other verdict as it is."""
    if not verdict.provisional:
        return verdict
    return replace(verdict, status=State.OK, let_through=NOT_SIGNIFICANT, provisional=False,
                   evidence=f"{verdict.evidence}; no pair decided it ({why}): let through as not significant")


def judge_without_pairs(result: TestResult) -> None:
    """A test that does not go to the pairs (``needs_pairs`` false): its provisional
    regressions let through (``let_through``), since the test fails, if at all, on what no
    pair re-measures."""
    result.verdicts = [let_through(v, NOT_PAIRED) for v in result.verdicts]


def decide_all(metrics: Sequence[str], bases: Sequence[TestResult], heads: Sequence[TestResult], rules: Rules,
               cap: int) -> dict[str, Decision]:
    """Each metric decided from the pairs so far (``bases[i]``, ``heads[i]``: pair i's
    processes, each judged against nothing): a host series of a launch-bound step (the first
    base process's median utilization, ``host.HOST_BOUND``) at the first base process's host
    speed, everything else as measured."""
    first = bases[0]
    utilization = _value(first, "gpu_utilization", None)
    reference = host.speed(first.per_step)
    pool = kernel_pool([b.distribution or {} for b in bases], [h.distribution or {} for h in heads])
    out = {}
    for metric in metrics:
        scale = scale_of(metric, host.host_bound(utilization) and reference is not None)
        at = None if scale == AS_MEASURED else reference
        out[metric] = decide(metric, [_value(b, metric, at) for b in bases], [_value(h, metric, at) for h in heads],
                             rules, looks=cap, judged=len(metrics), scale=scale,
                             pool=pool if kernel_series(metric) else None)
    return out


def _value(result: TestResult, metric: str, reference: float | None) -> float | None:
    return process_value(metric, result.metrics or {}, result.per_step, result.distribution, reference)


def upheld_by_pairs(verdicts: Sequence[Verdict], decisions: Mapping[str, Decision], problem: str) -> list[Verdict]:
    """The verdicts once the pairs are weighed: the failures the pairs uphold stay, the others
    become ``same as base`` or ``not sure`` (both pass).  A regression is upheld when head is
    worse; a broken threshold when the base's processes hold it on this machine (base
    breaking it too says the machine, not the change).  A metric no pair gave a value for, and
    a "not sure" of pairs that stopped on a ``problem``, uphold the failure, unless it is
    ``provisional`` (not significant against one base process): then it is let through
    (``let_through``), or ``not sure``.  Each verdict's evidence says what the pairs showed."""
    out = []
    for v in verdicts:
        d = decisions.get(v.metric)
        if v.provisional and (d is None or d.pairs == 0):
            out.append(let_through(v, problem or ("no pair ran" if d is None else "no pair gave it a value")))
        elif d is None or v.status not in BROKEN or d.pairs == 0:
            out.append(v)
        elif v.status == State.THRESHOLD and v.threshold is not None:
            holds = d.base is None or v.threshold.holds(d.base)  # no base value: the failure stands
            said = pair_evidence(pair_values(d.to_json()), WORSE if holds else SAME, v.threshold.text)
            out.append(replace(v, status=v.status if holds else State.SAME_AS_BASE, evidence=f"{v.evidence}; {said}"))
        else:
            status = (State.SAME_AS_BASE if d.outcome == SAME
                      else State.NOT_SURE if d.outcome == NOT_SURE and (not problem or v.provisional) else v.status)
            said = pair_evidence(pair_values(d.to_json()), d.outcome)
            out.append(replace(v, status=status, evidence=f"{v.evidence}; {said}", provisional=False))
    return out


def judge_pairs(result: TestResult, decisions: Mapping[str, Decision], base: str, seconds: float,
                problem: str) -> None:
    """The result judged again with the base revision's pairs (``upheld_by_pairs``): its
    verdicts, and ``alongside`` saying what the pairs showed; a test the pairs judged was
    judged against the base (``has_baseline``)."""
    result.verdicts = upheld_by_pairs(result.verdicts, decisions, problem)
    pairs = max((d.pairs for d in decisions.values()), default=0)
    result.alongside = (result.alongside or {}) | {
        "base": base, "pairs": pairs, "seconds": round(seconds, 1),
        "decisions": [d.to_json() for d in decisions.values()], "problem": problem,
    }
    result.has_baseline = result.has_baseline or pairs > 0
