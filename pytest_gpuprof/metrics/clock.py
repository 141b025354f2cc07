"""Each measured step's SM clock and NVML clock-event reasons, from the samples the capture
kept in the trace's metadata (``health``: ``capture.nvml.NvmlSampler``), so that a replayed
trace gives every step the same clock.

The sampler reads NVML on the host every 20 ms and stamps each sample with the host's wall
clock (``time.time_ns()``); the steps live on the trace's timeline.  The two are put on one
clock through anchors on the host's side: at the start of each measured step the capture
reads ``time.time_ns()`` just after the step's range opened (``NvmlSampler.anchor``), and the
trace holds that range's start (``step_N``).  The offset from the host's clock to the trace's
is the median over the steps of anchor minus range start.  This needs no more than what every
metric already relies on: that a trace puts its CPU ranges and its GPU work on one clock
(Kineto aligns CUPTI's GPU timestamps with its CPU events, and Nsight Systems likewise).  It
asks nothing of the trace's epoch, which differs between the backends (Kineto's
``baseTimeNanoseconds`` plus ``ts``; Nsight Systems' nanoseconds since its session began),
and it adds no synchronization to the measured steps.  On an H200 the anchors minus their
ranges' starts spread over 27 us, and a synchronized step's last kernel ended 26 to 77 us
before the host's reading after the synchronize (docs/metrics.md, "The SM clock of each
step"): far below the sampling period.

A step's span is that of its own GPU work (first start to last end).  Its samples are those
taken in the span; a step shorter than the sampling period may hold none, and then its
samples are the nearest on either side (the last one before the span and the first one
after it, whichever exist).  Its clock is their mean, its reasons the union of theirs.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..capture.ranges import STEP_RANGE_PREFIX

_STEP = re.compile(rf"^{STEP_RANGE_PREFIX}(\d+)$")


def host_to_trace_ns(anchors: list[int], ranges: pd.DataFrame) -> int | None:
    """The host's wall clock minus the trace's clock: the median (the lower of the middle two),
    over the measured steps, of the host's clock at each step's start (``anchors[i]``) minus
    the start of the trace's range ``step_i``; None where no step's range is found."""
    starts: dict[int, int] = {}
    for name, start in zip(ranges["name"].astype(str), ranges["start"].to_numpy(np.int64)):
        found = _STEP.match(name)
        if found and int(found[1]) < len(anchors):
            starts.setdefault(int(found[1]), int(start))
    if not starts:
        return None
    return statistics.median_low(anchors[i] - start for i, start in starts.items())  # exact in integers


def step_clocks(health: Mapping[str, Any] | None, ranges: pd.DataFrame, first: np.ndarray,
                last: np.ndarray) -> dict[str, list] | None:
    """``{"sm_clock_mhz": [...], "clock_events": [...]}``, one value per step: the mean SM clock
    of the step's samples (MHz, to 0.1) and the union of their NVML clock-event reasons (a
    bit mask); None for a step without GPU work (``first`` -1) or samples.  ``first`` and
    ``last`` bound each step's own GPU work on the trace's clock.  None where the trace holds
    no samples or no anchors (recorded before they were kept, or without NVML)."""
    samples = (health or {}).get("clock_samples")
    anchors = (health or {}).get("step_anchors_ns")
    if not samples or not anchors:
        return None
    offset = host_to_trace_ns(anchors, ranges)
    if offset is None:
        return None
    table = np.asarray(samples, dtype=np.int64)
    order = np.argsort(table[:, 0], kind="stable")
    at, mhz, reasons = table[order, 0] - offset, table[order, 1], table[order, 2]
    clocks: list[float | None] = []
    events: list[int | None] = []
    for lo, hi in zip(first.tolist(), last.tolist()):
        picked = _step_samples(at, lo, hi) if lo >= 0 else []
        clocks.append(round(float(np.mean(mhz[picked])), 1) if len(picked) else None)
        events.append(int(np.bitwise_or.reduce(reasons[picked])) if len(picked) else None)
    return {"sm_clock_mhz": clocks, "clock_events": events}


def _step_samples(at: np.ndarray, lo: int, hi: int) -> list[int]:
    """The indices of the samples (times ``at``, sorted) of a step spanning [lo, hi]: those
    inside, else the last before and the first after, whichever exist."""
    inside_from, inside_to = int(np.searchsorted(at, lo, "left")), int(np.searchsorted(at, hi, "right"))
    if inside_to > inside_from:
        return list(range(inside_from, inside_to))
    return [i for i in (inside_from - 1, inside_from) if 0 <= i < len(at)]
