"""The GPU's clocks, slowdown reasons and other processes, sampled through NVML while
the measured steps run (nvidia-ml-py, an optional dependency).  The readings go into
the trace's metadata (``health``), where ``metrics.health`` judges them."""

from __future__ import annotations

import os
import threading
from typing import Any

#: NVML clock-event reasons that mean the GPU was slowed down.
SLOWDOWNS = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
             0x80: "hardware power brake"}


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
