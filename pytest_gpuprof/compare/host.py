"""The host's speed taken out of the series it moves: the window and the ratios over it.

A virtual machine's CPU changes speed by up to 2.5x within seconds, and a launch-bound
step's window follows it.  Every step carries a reading of the host's speed from its own
trace, ``launch_call_us`` (the first quartile of its kernel-launch calls' CPU durations,
``metrics.measure``).  A series is put at the baseline host's speed by scaling each step
by its reading against the baseline's, to the power ``EXPONENT``: a time is multiplied by
``(reference / reading) ** EXPONENT`` (what the step would have taken on a host that
launched at the baseline's pace), a ratio over the window by the inverse (the same window
shortened), capped at 1.
docs/metrics.md, "The host's speed", says why and what it costs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from ..metrics.health import STEP_FLAGS
from ..metrics.specs import METRICS
from ..numbers import format_time_us
from .samples import usable
from .stats import Prior, summarize

#: The judged ratios over the window: the host's pace moves them through it.
WINDOW_RATIOS = ("gpu_utilization", "sync_wait_fraction", "pcie_utilization")
#: The per-step series the host's pace moves: the window and its ratios.
HOST_SERIES = ("window_us", *WINDOW_RATIOS)
#: The per-step host-speed reading (``metrics.measure``).
READING = "launch_call_us"
#: How much more a launch-bound step's window moves than its reading, on the log scale: part
#: of a launch call's time does not follow the CPU's speed.  Fitted over 31 processes of five
#: launch-bound corpora on two H100 machines: 1.29 to 1.51 (docs/metrics.md).
EXPONENT = 1.3
#: Between-process spread of a launch-bound step's window at the baseline host's speed: the
#: standard deviation of the logarithm of one process's median (0.044 pooled over those 31
#: processes, rounded up: the exponent was fitted on them), and its degrees of freedom.  The
#: interval a run at the baseline host's speed must leave pools it with the recorded runs' own.
HOST_UNITS_SPREAD = Prior(0.05, 26)
#: A step is the host's when its baseline kept the GPU busy for at most this share of the
#: window (median ``gpu_utilization``): its window is then judged at the baseline host's speed
#: alone.  In a step whose GPU is busier the window follows the GPU, not the reading.
HOST_BOUND = 0.5


def host_bound(utilization: float | None) -> bool:
    """Whether a step whose baseline's median ``gpu_utilization`` is ``utilization`` is the
    host's (``HOST_BOUND``); a step with no utilization is not."""
    return utilization is not None and utilization <= HOST_BOUND


def speed(per_step: Mapping[str, Any] | None) -> float | None:
    """The host-speed reading of a run (or of a baseline's pooled runs): the median of the
    readings of its usable steps (``samples.usable``); None without readings."""
    if not per_step or not per_step.get(READING):
        return None
    readings = [v for v in usable(per_step, per_step[READING]) if v > 0]
    return statistics.median(readings) if readings else None


def at_speed(name: str, per_step: Mapping[str, Any], reference: float) -> list[float | None]:
    """The per-step values of ``name`` as they would be on a host launching at ``reference``
    microseconds a call; None for a step without a value or a reading."""
    readings = per_step.get(READING) or []
    out: list[float | None] = []
    for i, value in enumerate(per_step[name]):
        reading = readings[i] if i < len(readings) else None
        if value is None or not reading or reading <= 0:
            out.append(None)
        elif METRICS[name].kind == "time":
            out.append(round(value * (reference / reading) ** EXPONENT, 3))
        else:
            out.append(round(min(value * (reading / reference) ** EXPONENT, 1.0), 6))
    return out


def converted(per_step: Mapping[str, Any], reference: float) -> dict[str, Any]:
    """``per_step`` with each host series at the reference speed (the steps' flags kept)."""
    out = {name: at_speed(name, per_step, reference) for name in HOST_SERIES if per_step.get(name)}
    return out | {name: per_step[name] for name in STEP_FLAGS if name in per_step}


#: A recorded run's host-series medians at the baseline host's speed, as a results document
#: keeps them in place of the run's steps (``run_medians``).
AT_BASELINE_SPEED = "at_baseline_speed"


def run_medians(run: Mapping[str, Any], reference: float) -> dict[str, float]:
    """The median of each host series of a baseline's recorded run over its usable steps,
    each step put at the baseline host's speed (``reference``, ``converted``): what bounds
    a run's host series at that speed.  A results document's run holds them
    (``AT_BASELINE_SPEED``, ``at_reference``); a stored run is converted from its steps;
    empty for a run without host-speed readings."""
    if AT_BASELINE_SPEED in run:
        return dict(run[AT_BASELINE_SPEED] or {})
    per_step = run.get("per_step")
    if not speed(per_step):
        return {}
    steps = converted(per_step or {}, reference)
    return {name: summarize(u)["median"] for name in HOST_SERIES if (u := usable(steps, steps.get(name) or []))}


def at_reference(run: Mapping[str, Any], baseline_steps: Mapping[str, Any] | None) -> dict[str, float] | None:
    """What a results document keeps of a recorded run's steps (``AT_BASELINE_SPEED``): its
    ``run_medians`` at the speed of the baseline's pooled steps (``baseline_steps``), the
    reference every judgment of it uses; None where the baseline or the run read no speed."""
    reference = speed(baseline_steps)
    medians = run_medians(run, reference) if reference else {}
    return medians or None


def slower(now: float, before: float) -> str:
    """``the host ran 1.60x slower than the baseline's (launch calls 7.2 µs; baseline 4.5 µs)``;
    ``as fast as`` where the two agree to the factor's two decimals."""
    factor = now / before
    how = ("as fast as" if f"{max(factor, 1 / factor):.2f}" == "1.00" else f"{factor:.2f}x slower than" if factor > 1
           else f"{1 / factor:.2f}x faster than")
    return f"the host ran {how} the baseline's (launch calls {format_time_us(now)}; baseline {format_time_us(before)})"
