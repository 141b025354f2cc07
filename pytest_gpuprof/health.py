"""Measurement health: conditions that make a run's times meaningless.

A test measured while the GPU clock dropped or throttled, while another process
used the GPU, or whose first measured step was still warming up, gets the status
"unstable": its time and ratio regressions are reported as such, not failed
(counts are still judged; they do not depend on clocks).

Clocks and processes are read through NVML while the steps run, when
nvidia-ml-py is installed (optional); the readings go into the trace's metadata
(``health``), so a saved trace reproduces the verdict.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

#: NVML clock-event reasons that mean the GPU was slowed down.
SLOWDOWNS = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
             0x80: "hardware power brake"}
CLOCK_DROP = 0.85  # lowest SM clock under this fraction of the highest: the clock dropped
WARMUP_RATIO = 1.5  # first measured step this many times the median of the others: still warming up


class NvmlSampler:
    """Samples SM clock, slowdown reasons and other processes every ``period_s`` in a thread."""

    def __init__(self, device_index: int, period_s: float = 0.02) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        self._period = period_s
        self._stop = threading.Event()
        self._clocks: list[int] = []
        self._reasons = 0
        self._others: set[int] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @classmethod
    def start(cls, device_index: int) -> "NvmlSampler | None":
        """A running sampler, or None where NVML is not available."""
        try:
            sampler = cls(device_index)
        except Exception:
            return None
        sampler._thread.start()
        return sampler

    def _run(self) -> None:
        nvml, h = self._nvml, self._handle
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self._stop.is_set():
            try:
                self._clocks.append(int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)))
                self._reasons |= int(reasons(h))
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if proc.pid != os.getpid():
                        self._others.add(int(proc.pid))
            except nvml.NVMLError:
                pass
            self._stop.wait(self._period)

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the readings, for the trace's metadata."""
        self._stop.set()
        self._thread.join()
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass
        return {
            "sm_clock_mhz": [min(self._clocks), max(self._clocks)] if self._clocks else None,
            "slowdowns": [name for bit, name in SLOWDOWNS.items() if self._reasons & bit],
            "other_processes": sorted(self._others),
            "samples": len(self._clocks),
        }


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
