"""Times, rates and ratios judged on their per-step samples: the noise-aware time gate.

When both runs kept per-step samples, the medians of all steps (their ``distribution``
summaries) are compared, and a change beyond the tolerance (``threshold_rules.beyond``)
counts only if:

* a Mann-Whitney U test on the samples kept says the steps differ: p < alpha / m (alpha
  0.01, m the number of time series the test judges: a Bonferroni correction, so 0.01
  bounds the chance of any false alarm in the test, not in each of its 20-odd series).
  With too few steps for any p to get under that level the verdict is "undecided", never
  a failure;
* and, where the baseline's recorded runs give one, the median lies outside the prediction
  interval of a run's median (``run_spread``): kernel series share a spread pooled over
  the test's kernels (``pooled_log_spread``; at least ``SHORT_KERNEL``'s for a kernel of
  short launches), and with one recorded run kernel and copy times an assumed one
  (``ONE_RUN_SPREAD``);
* the window (``window_us``) is judged at the baseline host's speed too (``host``,
  ``HostPair``) when both runs read it and did the same GPU work, and the ratios over it
  follow its verdict.

A change in the good direction beyond the tolerance is "improved" (update the baseline),
never a failure; an ``ok`` that let a change through says why (``Verdict.let_through``).
Against the base revision's one fresh process (``base_process``: ``pairs.base_entry``) a
kernel time worse beyond its tolerance whose steps do not differ is not let through: it is a
``provisional`` regression, for the base revision's pairs to decide (``compare.pairs``).  The
window and the ratios over it move with the host between processes (a launch-bound step's by
several percent): on the device, sending them too sent half the unchanged transformer runs
to the pairs, which then found nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..metrics.specs import METRICS, MetricSpec
from ..numbers import format_change, format_number, format_ratio
from . import host
from .margin import Margin, series_margin
from .rules import Rules
from .samples import Series, Sides, decimals, usable
from .stats import Prior, mann_whitney_u, pooled_squares, smallest_p, steps_for, summarize, t_quantile
from .status import State
from .threshold_rules import beyond, direction, within
from .verdict import FOR_THE_PAIRS, HOST_SPEED, NOT_SIGNIFICANT, WITHIN_RUNS, Verdict, shown_value

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


#: How much a kernel's median time moves between cards of one GPU model beyond what it moves
#: between processes on one card (log-scale standard deviation, degrees of freedom): added
#: to a kernel series' spread when the run measured a card none of the baseline's recorded
#: runs did (``machine.on_recorded_card``).  On two machines of four H200s, the kernel series'
#: means of three processes per card differed between the cards by 0.89% and 1.28% (pooled
#: over the example suite's 414 series, docs/benchmarks.md), while within a card the
#: compute-bound tests' GEMMs kept to 0.2-0.8%: a baseline judged on another card fails
#: its GEMMs 2-3% slower unless this is allowed for.
BETWEEN_CARDS = (0.011, 200)


def _kernel_spread(pooled: tuple[float, int] | None, per_launch_us: float | None = None,
                   other_card: bool = False) -> tuple[float, int]:
    """The shared spread of a kernel series: the test's pooled one (or, with one recorded
    run, the assumed one), at least ``SHORT_KERNEL``'s for a kernel of short launches; on
    another card than the recorded runs', with ``BETWEEN_CARDS`` added in quadrature."""
    spread, freedom = pooled or ONE_RUN_SPREAD["kernel"]
    if per_launch_us is not None and per_launch_us < SHORT_KERNEL[0]:
        spread = max(spread, SHORT_KERNEL[1])
    if other_card:
        spread, freedom = math.hypot(spread, BETWEEN_CARDS[0]), min(freedom, BETWEEN_CARDS[1])
    return spread, freedom


def _spread_of(name: str, pooled: tuple[float, int] | None, recorded: int,
               other_card: bool = False) -> tuple[float, int] | None:
    """The shared spread of a series' prediction interval (``run_spread``) when the baseline
    recorded ``recorded`` runs: the kernel series' pooled one (``_kernel_spread``); with fewer
    than two runs, the one assumed for a GPU-side time (``ONE_RUN_SPREAD``); else none (its own)."""
    if kernel_series(name):
        return _kernel_spread(pooled, other_card=other_card)
    if name.startswith("memcpy_") and recorded < 2:
        return ONE_RUN_SPREAD["copy"]
    return None


def _spread_source(shared: tuple[float, int] | None, pooled: tuple[float, int] | None,
                   per_launch_us: float | None = None, other_card: bool = False) -> str:
    """Where a series' spread between processes comes from (``_spread_of``, ``_kernel_spread``),
    in words: an assumed one, the test's kernel series pooled, a short kernel's floor, its own;
    and, on another card than the recorded runs', the spread between cards added."""
    if shared is None:
        return "its medians' own spread"
    short = per_launch_us is not None and per_launch_us < SHORT_KERNEL[0]
    if short and (pooled is None or pooled[0] < SHORT_KERNEL[1]):
        own = f"at least {SHORT_KERNEL[1]:.0%} for launches under {format_number(SHORT_KERNEL[0])} µs"
    elif pooled is not None:
        own = f"the test's kernel series pooled, {pooled[1]} degrees of freedom"
    else:
        own = f"{ONE_RUN_SPREAD['kernel'][0]:.1%} assumed: the baseline recorded one run"
    return own + (f", and {BETWEEN_CARDS[0]:.1%} between cards: another card than the recorded runs'"
                  if other_card else "")


class Finding(NamedTuple):
    """One scale's outcome for a series: ok, undecided, regressed or improved, and why; the
    Mann-Whitney p where the test ran, why an ok let a change beyond the tolerance through,
    and whether a regression is ``Verdict.provisional``."""

    status: State
    evidence: str = ""
    p: float | None = None
    let_through: str = ""
    margin: Margin | None = None
    provisional: bool = False


def _on_one_scale(spec: MetricSpec, before: Series, now: Series, rules: Rules, level: float,
                  shared: tuple[float, int] | None, bounded: bool = True, spread_from: str = "",
                  base_process: bool = False) -> Finding:
    """The decisions on one scale, in order: the medians beyond the tolerance (and, for
    times, the floor); enough steps for a p-value under ``level``; a Mann-Whitney U test
    that says the steps differ (with ``base_process``, steps that do not differ in the bad
    direction: a ``provisional`` regression); with ``bounded``, the median outside the
    prediction interval of the baseline's runs (``run_spread``; ``spread_from`` says where
    its spread comes from).  Each finding carries the series' ``Margin``."""
    b, c = before.summary["median"], now.summary["median"]
    interval = run_spread(before.run_medians, shared) if bounded else None
    margin = series_margin(spec, before, now, rules, level, interval,
                           f"the baseline's {len(before.run_medians)} recorded run(s): "
                           f"{1 - RUNS_LEVEL:.0%} prediction interval, spread from {spread_from}")
    if not beyond(spec, c - b, b, rules):
        return Finding(State.OK, margin=margin)
    spreads = f"{_spread(spec, 'median', now.summary)} vs {_spread(spec, 'baseline', before.summary)}"
    sizes = f"n={len(now.samples)}/{len(before.samples)}"
    if smallest_p(len(before.samples), len(now.samples)) >= level:
        return Finding(State.UNDECIDED, f"{spreads}; too few steps to tell a change from noise ({sizes}): no p-value "
                                        f"can get under {level:.2g}; measure at least {steps_for(level)} steps",
                       margin=margin)
    _, p = mann_whitney_u(before.samples, now.samples)
    evidence = f"{spreads}; Mann-Whitney U p={p:.2g} ({sizes})"
    if p >= level and base_process and direction(spec, c - b) == State.REGRESSED:
        return Finding(State.REGRESSED, f"{evidence}: {FOR_THE_PAIRS}", p, margin=margin, provisional=True)
    if p >= level:
        return Finding(State.OK, evidence + ": within noise", p, NOT_SIGNIFICANT, margin)
    if interval is not None:
        spread = (f"{len(before.run_medians)} recorded run(s)' medians "
                  f"{_range(spec, min(before.run_medians), max(before.run_medians))}, "
                  f"{1 - RUNS_LEVEL:.0%} prediction interval {_range(spec, *interval)}")
        if interval[0] <= c <= interval[1]:
            return Finding(State.OK, f"{evidence}; within what the baseline's runs show ({spread})", p, WITHIN_RUNS,
                           margin)
        evidence += f"; outside what the baseline's runs show ({spread})"
    return Finding(direction(spec, c - b), evidence, p, margin=margin)


class HostPair(NamedTuple):
    """The window of the baseline and of this run at the baseline host's speed, (this run's,
    the baseline's) readings, and whether the step is the host's (``host.host_bound``)."""

    before: Series
    now: Series
    speeds: tuple[float, float]
    host_bound: bool


def _compare_samples(spec: MetricSpec, before: Series, now: Series, rules: Rules, family: int,
                     shared: tuple[float, int] | None = None, host_pair: HostPair | None = None,
                     spread_from: str = "its medians' own spread", base_process: bool = False) -> Verdict:
    """A time or ratio metric on per-step samples, judged ``_on_one_scale`` at the test's
    corrected level, alpha / family (``base_process``: against the base revision's one fresh
    process).  The window (``host_pair``) is judged at the baseline host's speed too
    (tolerance, steps and the baseline's runs, their spread pooled with
    ``host.HOST_UNITS_SPREAD``): in a step that is the host's (``host.host_bound``) that
    decides alone, so that a slower or faster host passes and more host-side work per step
    fails whatever the host's speed; in a busier step, whose window follows the GPU, it
    changes only when it changes both as measured and at that speed."""
    b, c = before.summary["median"], now.summary["median"]
    level = rules.alpha / max(family, 1)
    rule = (f"median per step {within(spec, rules)} unless the steps differ "
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
            return _with_margin(Verdict(spec.name, raw.status, b, c, rule, relative, evidence=raw.evidence,
                                        p_value=raw.p, p_level=level, let_through=raw.let_through), raw.margin)
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
        return _with_margin(Verdict(spec.name, status, b, c, rule, relative, evidence=evidence,
                                    by_host=moved and status not in (raw.status, State.REGRESSED), p_value=decided.p,
                                    p_level=level, let_through=let_through), decided.margin)
    if run_spread(before.run_medians, shared) is not None:
        rule += f" and the median lies outside the {1 - RUNS_LEVEL:.0%} prediction interval of the baseline's runs"
    found = _on_one_scale(spec, before, now, rules, level, shared, spread_from=spread_from, base_process=base_process)
    return _with_margin(Verdict(spec.name, found.status, b, c, rule, relative, evidence=found.evidence,
                                p_value=found.p, p_level=level, let_through=found.let_through,
                                provisional=found.provisional), found.margin)


def _with_margin(verdict: Verdict, margin: Margin | None) -> Verdict:
    """The verdict saying the margin it was judged with (``Margin``)."""
    if margin is None:
        return verdict
    return replace(verdict, margin=round(margin.value, 6), margin_source=margin.source, detectable=margin.detectable)


def _spread(spec: MetricSpec, label: str, summary: Mapping[str, Any]) -> str:
    """``LABEL 14.82 ms (IQR 14.8–14.85 ms, n=N)``: one run's median and interquartile range."""
    return (f"{label} {shown_value(spec.name, summary['median'])} "
            f"(IQR {_range(spec, summary['q1'], summary['q3'])}, n={summary['n']})")


def _range(spec: MetricSpec, low: float, high: float) -> str:
    """``14.8–14.85 ms``: two values of a metric, the unit said once where both share it."""
    first, second = shown_value(spec.name, low), shown_value(spec.name, high)
    unit = first.partition(" ")[2]
    return f"{first.partition(' ')[0]}–{second}" if unit and unit == second.partition(" ")[2] else f"{first}–{second}"


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


def _speeds(samples: Sides | None, compared: bool) -> tuple[float, float] | None:
    """(this run's, the baseline's) host-speed readings (``host.speed``), when both have one."""
    if not compared or not samples or not samples[0] or not samples[1]:
        return None
    now, before = host.speed(samples[0]), host.speed(samples[1])
    return (now, before) if now and before else None


def _at_baseline_speed(samples: Sides | None, runs: Sequence[Mapping[str, Any]],
                       speeds: tuple[float, float] | None) -> dict[str, tuple[Series, Series]]:
    """(baseline, current) of each host series (``host.HOST_SERIES``) at the baseline host's
    speed: both runs' steps scaled by their readings against the baseline's, and the
    medians of the baseline's recorded runs likewise (``host.run_medians``; runs that kept
    no readings left out).
    Empty without both runs' steps and host-speed readings (``_speeds``)."""
    if not speeds or not samples or not samples[0] or not samples[1]:
        return {}
    now, before = host.converted(samples[0], speeds[1]), host.converted(samples[1], speeds[1])
    kept = [host.run_medians(r, speeds[1]) for r in runs]
    out = {}
    for name in host.HOST_SERIES:
        b, c = usable(before, before.get(name) or []), usable(now, now.get(name) or [])
        if not b or not c:
            continue
        medians = tuple(m[name] for m in kept if name in m)
        out[name] = (Series(b, summarize(b, decimals(name)), medians), Series(c, summarize(c, decimals(name))))
    return out


#: The spec each kernel name's time per step is judged by (``Timing.kernel_verdicts``).
_KERNEL_TIME = MetricSpec("kernel time", "time", "lower", True, "us")


class Timing(NamedTuple):
    """What the sample judgement of one test shares between its series (``timing``): the
    (baseline, current) series both runs kept (``samples.paired_series``), the host-speed
    readings (this run's, the baseline's: ``_speeds``), the host series at the baseline host's
    speed (``_at_baseline_speed``), the window's verdict, whether the host's speed moved the
    window (``_moved_by_the_host``), the kernel series' pooled spread (``pooled_log_spread``),
    and whether the baseline is the base revision's one fresh process (``base_process``: its
    kernel series' changes that are not significant are ``provisional``).
    Empty without a baseline of the same backend."""

    paired: Mapping[str, tuple[Series, Series]]
    speeds: tuple[float, float] | None
    at_baseline_speed: Mapping[str, tuple[Series, Series]]
    window: Verdict | None
    by_host: bool
    shared: tuple[float, int] | None
    other_card: bool = False  # measured on a card none of the recorded runs did (``BETWEEN_CARDS``)
    base_process: bool = False  # the baseline is the base revision's one fresh process (``pairs.base_entry``)

    @property
    def family(self) -> int:
        """The series judged on samples: the Bonferroni correction's m."""
        return len(self.paired)

    def verdict(self, spec: MetricSpec, rules: Rules) -> Verdict:
        """A metric of ``paired`` judged on its samples (``_compare_samples``) within the spread
        its series shares (``_spread_of``); a ratio over the window follows the window where
        the host's speed moved it (``_with_the_window``)."""
        name = spec.name
        shared = _spread_of(name, self.shared, len(self.paired[name][0].run_medians), self.other_card)
        other_card = self.other_card and kernel_series(name)
        verdict = _compare_samples(spec, *self.paired[name], rules, self.family, shared,
                                   spread_from=_spread_source(shared, self.shared, other_card=other_card),
                                   base_process=self.base_process and kernel_series(name))
        return (_with_the_window(verdict, self.window, self.speeds) if self.by_host and name in host.WINDOW_RATIOS
                else verdict)

    def kernel_verdicts(self, before: Mapping[str, float | None], rules: Rules) -> list[Verdict]:
        """Each kernel name's time per step, where both runs kept its samples, within the kernel
        series' spread (``_kernel_spread``: wider for a kernel of short launches, its count
        per step read from ``before``, the baseline's ``compared_values``)."""
        out = []
        for key, pair in self.paired.items():
            if key.startswith("kernels["):
                per_launch = _per_launch(pair[0], before.get(key.removesuffix("time_us") + "count"))
                shared = _kernel_spread(self.shared, per_launch, self.other_card)
                out.append(_compare_samples(replace(_KERNEL_TIME, name=key), *pair, rules, self.family, shared,
                                            spread_from=_spread_source(shared, self.shared, per_launch,
                                                                       self.other_card),
                                            base_process=self.base_process))
        return out


def timing(paired: Mapping[str, tuple[Series, Series]], samples: Sides | None, runs: Sequence[Mapping[str, Any]],
           same_work: bool, rules: Rules, other_card: bool = False, base_process: bool = False) -> Timing:
    """One test's ``Timing`` from its ``paired`` series, its (current, baseline) ``per_step``
    objects (``samples``) and the baseline's recorded ``runs``; ``same_work``: both runs did
    the same GPU work (``exact_rules.same_program``); ``other_card``: the run measured a card
    none of the recorded runs did; ``base_process``: the baseline is the base revision's one
    fresh process."""
    # the host's speed is taken out only of a step that does the baseline's GPU work and
    # synchronizations: a new .item() makes the host wait and launch slower, and then the
    # reading measures the change, not the host
    speeds = _speeds(samples, same_work)
    at_baseline_speed = _at_baseline_speed(samples, runs, speeds)
    window = _window(paired, at_baseline_speed, speeds, rules)
    shared = pooled_log_spread([before.run_medians for key, (before, _) in paired.items() if kernel_series(key)])
    return Timing(paired, speeds, at_baseline_speed, window, _moved_by_the_host(window, speeds), shared, other_card,
                  base_process)


def _window(paired: Mapping[str, tuple[Series, Series]], at_baseline_speed: Mapping[str, tuple[Series, Series]],
            speeds: tuple[float, float] | None, rules: Rules) -> Verdict | None:
    """The window's verdict on its samples (None where the runs did not both keep it), judged
    at the baseline host's speed too where both runs read it (``HostPair``)."""
    if "window_us" not in paired:
        return None
    utilization = paired["gpu_utilization"][0].summary["median"] if "gpu_utilization" in paired else None
    host_pair = (HostPair(*at_baseline_speed["window_us"], speeds, host.host_bound(utilization))
                 if "window_us" in at_baseline_speed and speeds else None)
    return _compare_samples(METRICS["window_us"], *paired["window_us"], rules, len(paired), None, host_pair)
