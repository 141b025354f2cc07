"""Measurement health: conditions that make a run's times meaningless.

A test measured while another process used the GPU, whose first measured step was still
warming up, or with most of its steps stalled or throttled (below) gets the status
"unstable": its time and ratio regressions are reported as such, not failed (counts are
still judged; they do not depend on clocks).  An SM clock that moved with no slowdown
reason (NVML's thermal, hardware-slowdown or power-brake reasons) is the GPU's own power
management under the test's load (it lowers the clock while the SMs wait on copies): it
is reported as a note, since the baseline's runs saw the same.

Host stalls are judged step by step: a step that took far longer than the others
while its GPU work was the same, the extra time being a pause of the launching
threads, is left out of the time and ratio verdicts (``stalled_steps``).  So is a step
that ran at a throttled clock: an NVML slowdown reason among its clock samples
(``throttled_steps``, ``metrics.clock``).  A slowdown reason makes the whole run
unstable only where the trace does not say its steps' clocks (recorded before they were
kept).

The clock and process readings come from the trace's metadata (``health``, written
by ``capture.nvml``), so a saved trace reproduces the verdict.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..capture.nvml import SLOWDOWN_BITS, slowdown_names

CLOCK_DROP = 0.85  # lowest SM clock under this fraction of the highest: the clock dropped (a note)
WARMUP_RATIO = 1.5  # first measured step this many times the median of the others: still warming up
STALL_EXCESS = 0.25  # a stalled step's slice of the window exceeds the median slice by this fraction of it,
STALL_GAP_SHARE = 0.5  # and a pause of the launching threads is at least this share of the excess,
STALL_KERNEL_TIME = 0.10  # while its kernel time is within this fraction of the median step's


def stalled_steps(per_step: dict[str, Any], counts: list[str]) -> list[int]:
    """Per step, 1 when the host stalled it: its slice of the window (``window_us``) is
    over ``1 + STALL_EXCESS`` times the median step's, a pause of the launching threads
    (``host_gap_us``) makes up at least ``STALL_GAP_SHARE`` of the excess, and its GPU work
    is the median step's (every series in ``counts`` equal, kernel time within
    ``STALL_KERNEL_TIME``).  ``measure`` passes its count metrics, so that a count added
    there is judged here.  A step slowed by more work, by a synchronization (time spent
    inside a CUDA call is no pause) or in every step alike is not stalled."""
    window = np.asarray(per_step["window_us"], dtype=float)
    gaps = np.asarray(per_step["host_gap_us"], dtype=float)
    if len(window) < 3:
        return [0] * len(window)
    excess = window - np.median(window)
    stalled = (excess > STALL_EXCESS * np.median(window)) & (gaps >= STALL_GAP_SHARE * excess)
    for name in counts:
        same = np.asarray(per_step[name])
        stalled &= same == np.median(same)
    kernel = np.asarray(per_step["kernel_time_us"], dtype=float)
    stalled &= np.abs(kernel - np.median(kernel)) <= STALL_KERNEL_TIME * np.median(kernel)
    return [int(s) for s in stalled]


def stall_note(per_step: dict[str, Any]) -> str | None:
    """``3 of 10 steps stalled on the host (pauses up to 25.1 ms)``, or None without stalls."""
    flags = per_step.get("stalled") or []
    if not any(flags):
        return None
    pauses = [g for g, s in zip(per_step["host_gap_us"], flags) if s]
    return (f"{sum(flags)} of {len(flags)} steps stalled on the host (pauses up to {max(pauses) / 1000:.1f} ms): "
            "left out of the time and ratio verdicts")


def throttled_steps(per_step: Mapping[str, Any]) -> list[int] | None:
    """Per step, 1 when it ran at a throttled clock: an NVML slowdown reason
    (``capture.nvml.SLOWDOWN_BITS``: hardware slowdown, thermal, power brake; not idle, the
    application clocks or the power cap) among its clock samples (``per_step["clock_events"]``);
    None where the run does not say its steps' clocks."""
    events = per_step.get("clock_events")
    if events is None:
        return None
    return [int(bool(e and e & SLOWDOWN_BITS)) for e in events]


#: The per-step lists that say which steps are left out (``left_out``).
STEP_FLAGS = ("stalled", "clock_events")


def left_out(per_step: Mapping[str, Any]) -> list[bool]:
    """Per step, whether it is left out of the time and ratio verdicts: the host stalled it
    (``stalled``) or it ran at a throttled clock (``throttled_steps``)."""
    return either(list(per_step.get("stalled") or ()), throttled_steps(per_step) or [])


def either(*flags: list[int] | list[bool]) -> list[bool]:
    """Per step, whether any of the per-step flag lists says so (a shorter list: not there)."""
    return [any(f[i] for f in flags if i < len(f)) for i in range(max(map(len, flags), default=0))]


def throttle_note(per_step: Mapping[str, Any]) -> str | None:
    """``2 of 10 steps ran at a throttled clock (hardware thermal slowdown; SM clock down to
    1410 MHz)``, or None where none did."""
    flags = throttled_steps(per_step) or []
    if not any(flags):
        return None
    events = [e for e, f in zip(per_step["clock_events"], flags) if f]
    clocks = [c for c, f in zip(per_step.get("sm_clock_mhz") or [], flags) if f and c is not None]
    low = f"; SM clock down to {min(clocks):g} MHz" if clocks else ""
    return (f"{sum(flags)} of {len(flags)} steps ran at a throttled clock "
            f"({', '.join(slowdown_names(functools.reduce(operator.or_, events)))}{low}): "
            "left out of the time and ratio verdicts")


def clock_note(readings: dict[str, Any] | None) -> str | None:
    """``SM clock ranged 1560-1980 MHz ...`` when it dropped under CLOCK_DROP of its
    highest with no slowdown reason (then ``assess`` says why the run is unstable)."""
    if not readings:
        return None
    clocks = readings.get("sm_clock_mhz")
    if not clocks or not clocks[1] or clocks[0] >= CLOCK_DROP * clocks[1] or readings.get("slowdowns"):
        return None
    return (f"SM clock ranged {clocks[0]}-{clocks[1]} MHz during the steps, with no slowdown reason "
            "from the GPU (its power management under this load)")


def assess(kernel_time_per_step: list[float], readings: dict[str, Any] | None,
           stalled: list[int] | None = None, throttled: list[int] | None = None) -> list[str]:
    """Why this run's times cannot be trusted; empty when nothing is wrong.  ``throttled``
    (``throttled_steps``): where the steps' clocks are known, a slowdown reason leaves its
    steps out, and only too many of them make the run unstable."""
    reasons = []
    out = either(stalled or [], throttled or [])  # the steps no verdict reads (left_out)
    if out and 2 * sum(out) > len(out):
        causes = [cause for cause, flags in (("stalled on the host", stalled), ("ran at a throttled clock", throttled))
                  if flags and any(flags)]
        reasons.append(f"{sum(out)} of {len(out)} steps {' or '.join(causes)}: too few steady steps to judge")
    if readings:
        if readings.get("slowdowns") and throttled is None:
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


#: The note of a test that gates ``pcie_utilization`` (a threshold, or a baseline that has one)
#: on a trace that does not say its PCIe link: the metric is null there.
NO_PCIE_LINK = ("pcie_utilization: null, the trace does not say which PCIe link it ran on (recorded before "
                "2026-11-25, or where NVML could not be loaded)")


def recording_notes(metadata: dict[str, Any]) -> list[str]:
    """How the trace was recorded, where that moves its times: torch.profiler at torch's
    default cost (``lighter_recording`` false: ``capture.profiler._lighter_recording``)."""
    if metadata.get("lighter_recording") is not False:
        return []
    return ["recorded at torch.profiler's default cost: this torch lacks "
            "_ExperimentalConfig(disable_external_correlation=...), so the profiler takes more host time per "
            "operator and launch-bound steps read slower than under a torch that has it"]
