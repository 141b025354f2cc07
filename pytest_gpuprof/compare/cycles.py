"""Kernel times in cycles: a kernel that took longer because the SM clock ran lower than the
baseline's is the clock's doing, not the code's.

Each step carries its SM clock (``metrics.clock``), and a kernel's cycles in a step are its
time there times that clock (microseconds x MHz).  Where the median clock of this run's usable
steps differs from the baseline's (``ClockShift``), a kernel-time regression (the total's or a
kernel name's) is judged in cycles too: whose median cycles per step lie within the verdict's
margin of the baseline's is ``unstable``, its evidence and the test's sentence saying the
clock (NVBench likewise confirms a slowdown in cycles before calling it).  A kernel bound by
memory does not slow down with the SM clock, so its time may rise with a change of the code
while its cycles do not: the clock is then named, and the run is ``unstable``, not passed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .samples import usable
from .verdict import Verdict

#: The per-step SM clock (``metrics.clock``).
CLOCK = "sm_clock_mhz"


def run_clock(per_step: Mapping[str, Any] | None) -> float | None:
    """The SM clock of a run (or of a baseline's pooled runs): the median of its usable
    steps' (``samples.usable``); None where it kept none."""
    clocks = usable(per_step, per_step.get(CLOCK) or []) if per_step else []
    return statistics.median(clocks) if clocks else None


def _series(per_step: Mapping[str, Any], metric: str) -> list[float | None] | None:
    """A kernel series' per-step times: ``kernel_time_us``'s, or a ``kernels[NAME].time_us``'s."""
    if metric == "kernel_time_us":
        return per_step.get(metric)
    if metric.startswith("kernels[") and metric.endswith("].time_us"):
        return (per_step.get("kernels") or {}).get(metric[len("kernels["):-len("].time_us")])
    return None


def median_cycles(per_step: Mapping[str, Any], metric: str) -> float | None:
    """The median over the usable steps of a kernel series' cycles per step: its time times
    the step's SM clock; None where the run kept neither for any usable step."""
    times, clocks = _series(per_step, metric), per_step.get(CLOCK)
    if not times or not clocks:
        return None
    products = [t * c if t is not None and c is not None else None for t, c in zip(times, clocks)]
    kept = usable(per_step, products)
    return statistics.median(kept) if kept else None


@dataclass(frozen=True)
class ClockShift:
    """This run's and the baseline's SM clocks (``run_clock``) where they differ, with both
    runs' per-step samples: what judges a kernel time in cycles."""

    now: float
    before: float
    now_steps: Mapping[str, Any]
    before_steps: Mapping[str, Any]

    @classmethod
    def of(cls, now_steps: Mapping[str, Any] | None, before_steps: Mapping[str, Any] | None) -> ClockShift | None:
        """The shift between the two runs' clocks; None where either kept none or they agree."""
        now, before = run_clock(now_steps), run_clock(before_steps)
        if now is None or before is None or now == before or not now_steps or not before_steps:
            return None
        return cls(now, before, now_steps, before_steps)

    def cycles_change(self, metric: str) -> float | None:
        """Relative change of a kernel series' median cycles per step; None for another
        series or where either run lacks its cycles."""
        now, before = median_cycles(self.now_steps, metric), median_cycles(self.before_steps, metric)
        return now / before - 1 if now is not None and before else None

    def explains(self, v: Verdict) -> bool:
        """A kernel-time regression whose cycles lie within its margin of the baseline's."""
        change = self.cycles_change(v.metric)
        return change is not None and v.margin is not None and math.log1p(change) <= math.log1p(v.margin)

    def evidence(self, v: Verdict) -> str:
        """``in cycles (time x SM clock) +0.1%, within the margin: the clock, not the code``, or
        ``... +4.1%: regressed at the baseline's clock too``; empty where unknown."""
        change = self.cycles_change(v.metric)
        if change is None:
            return ""
        said = f"in cycles (time x SM clock) {change:+.1%}"
        return (f"{said}, within the margin: the SM clock, not the code ({self.clocks()})" if self.explains(v)
                else f"{said}: slower at the baseline's clock too ({self.clocks()})")

    def clocks(self) -> str:
        """``SM clock 1900.8 MHz, 4.0% lower than the baseline's 1980 MHz``."""
        change = self.now / self.before - 1
        return (f"SM clock {self.now:g} MHz, {abs(change):.1%} {'lower' if change < 0 else 'higher'} "
                f"than the baseline's {self.before:g} MHz")

    def sentence(self, explained: int) -> str:
        """Why kernel-time regressions are ``unstable``: the test's sentence."""
        return (f"the {self.clocks()}: {explained} kernel time(s) rose but not in cycles (time x SM clock), "
                "the clock's doing, not the code's")
