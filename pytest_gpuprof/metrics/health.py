"""Measurement health: conditions that make a run's times meaningless.

A test measured while the GPU clock dropped or throttled, while another process
used the GPU, or whose first measured step was still warming up, gets the status
"unstable": its time and ratio regressions are reported as such, not failed
(counts are still judged; they do not depend on clocks).

The clock and process readings come from the trace's metadata (``health``, written
by ``capture.nvml``), so a saved trace reproduces the verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CLOCK_DROP = 0.85  # lowest SM clock under this fraction of the highest: the clock dropped
WARMUP_RATIO = 1.5  # first measured step this many times the median of the others: still warming up


def assess(kernel_time_per_step: list[float], readings: dict[str, Any] | None) -> list[str]:
    """Why this run's times cannot be trusted; empty when nothing is wrong."""
    reasons = []
    if readings:
        clocks = readings.get("sm_clock_mhz")
        if clocks and clocks[1] and clocks[0] < CLOCK_DROP * clocks[1]:
            reasons.append(f"SM clock dropped to {clocks[0]} MHz from {clocks[1]} MHz during the steps")
        if readings.get("slowdowns"):
            reasons.append("GPU slowed down: " + ", ".join(readings["slowdowns"]))
        if readings.get("other_processes"):
            reasons.append(f"other processes used the GPU: pid {', '.join(map(str, readings['other_processes']))}")
    times = np.asarray(kernel_time_per_step, dtype=float)
    if len(times) >= 3:
        rest = float(np.median(times[1:]))
        if rest > 0 and times[0] > WARMUP_RATIO * rest:
            reasons.append(f"first measured step took {times[0] / rest:.1f}x the median of the others: "
                           "still warming up (raise warmup)")
    return reasons
