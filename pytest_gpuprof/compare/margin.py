"""How far a series must move to count, and how far it could be seen to move.

Every series judged on its samples (``time_rules``) is judged with a margin: the larger of the
minimum effect a team sets (the metric's tolerance; for a time, also the time floor) and the
noise its own data measure (the baseline's recorded runs' prediction interval).  Its verdict
says the margin and where it came from, and the smallest change its steps could show: the
same numbers every report prints (docs/metrics.md, "The margin", "What a run can detect").
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple

from ..metrics.specs import MetricSpec
from ..numbers import format_number
from .rules import Rules
from .samples import Series
from .stats import smallest_p


class Margin(NamedTuple):
    """The change in the bad direction a series had to pass to count (relative for times and
    rates, absolute for ratios): the larger of the minimum effect (its tolerance, and for a
    time the time floor) and what the baseline's recorded runs say one more run's median does
    (``run_spread``); where it comes from, in words; and the smallest change of that kind this
    run's steps could show (``detectable``)."""

    value: float
    source: str
    detectable: float | None


#: How sure the detectable change is to be seen: the power of the rank test at it.
DETECTION_POWER = 0.95


def series_margin(spec: MetricSpec, before: Series, now: Series, rules: Rules, level: float,
                  interval: tuple[float, float] | None, interval_source: str) -> Margin:
    """This series' ``Margin``: the minimum effect, or the bound in the bad direction of the
    recorded runs' prediction interval (``interval``, said by ``interval_source``) where that
    is wider."""
    b = before.summary["median"]
    value, source = rules.tolerance(spec), "the minimum effect (its tolerance)"
    if spec.kind == "time" and b > 0 and rules.time_floor_us / b > value:
        value, source = rules.time_floor_us / b, f"the time floor, {format_number(rules.time_floor_us)} µs"
    if interval is not None and b > 0:
        low, high = interval
        worse = high - b if spec.better == "lower" else b - low
        noise = worse if spec.kind == "ratio" else worse / b
        if noise > value:
            value, source = noise, interval_source
    return Margin(value, source, _detectable(spec, before, now, level, value))


def _detectable(spec: MetricSpec, before: Series, now: Series, level: float, margin: float) -> float | None:
    """The smallest change in the bad direction that this run would call a regression
    ``DETECTION_POWER`` of the time: the margin, or the shift the rank test needs with these
    steps where that is larger; None where no p can get under ``level`` with these steps.
    The steps' spread is each run's interquartile range over 1.349 (a normal's standard
    deviation), pooled; the rank test's shift is the t-test's over sqrt(3/pi), its efficiency
    on normal steps: (z(1 - level/2) + z(power)) s sqrt(1/n1 + 1/n2) / sqrt(3/pi)."""
    n1, n2 = len(before.samples), len(now.samples)
    b = before.summary["median"]
    if smallest_p(n1, n2) >= level or b <= 0:
        return None
    iqr = ((before.summary["q3"] - before.summary["q1"]) ** 2 + (now.summary["q3"] - now.summary["q1"]) ** 2) / 2
    s = math.sqrt(iqr) / 1.349 / (1 if spec.kind == "ratio" else b)
    z = NormalDist().inv_cdf
    shift = (z(1 - level / 2) + z(DETECTION_POWER)) * s * math.sqrt(1 / n1 + 1 / n2) / math.sqrt(3 / math.pi)
    return round(max(margin, shift), 6)
