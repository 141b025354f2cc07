"""Machine probes: a few fixed micro-measurements taken at the start of a session, before any test.

They describe the machine rather than the code under test: a baseline keeps the
probes of each run that recorded it, every result the probes of its session, and
``compare.machine`` says when today's machine differs from the baseline's beyond
their noise (a slower PCIe link, a lower clock, a busier host), so that time
verdicts are ``unstable`` rather than ``regressed``.  Each probe is the best of
several repetitions timed with CUDA events (the launch probe with the host clock):
what the machine can do, which a passing hiccup of one repetition does not move
(medians of 7 moved a GEMM's time by up to 22% between processes of one H200).  Each
timed repetition is queued behind a spin of the GPU (``torch.cuda._sleep``), so that its
events time the GPU's work and not the host's launch of it: on an H200, a GEMM whose
kernel CUPTI timed at 174 us read 211-281 us timed from an idle GPU, 177-178 us behind
the spin.  The GEMM probe follows its warm-up's 0.2 s of products, so it reads the GEMM
at the clock the GPU holds under load (194-202 us at 1665-1890 MHz on H200s).
A session reads them again, up to ``READINGS`` times in all, when a reading slower than
the baseline's would make a regression ``unstable``, and keeps each probe's best reading
(``best_readings``): a slowdown of the whole machine persists, a passing one (a GEMM
23% slower at one session's start, at full clock, on an H200) does not, and what
happens during a test's own steps is its health's to say (``metrics.health``).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from .nvml import nvml_handle, nvml_session

#: name -> (what it is, unit, which way is better)
PROBES: dict[str, tuple[str, str, str]] = {
    "h2d_pinned_gbps": ("host-to-device bandwidth (pinned)", "GB/s", "higher"),
    "h2d_pageable_gbps": ("host-to-device bandwidth (pageable)", "GB/s", "higher"),
    "gemm_us": ("a 4096x4096x4096 bf16 GEMM's time", "us", "lower"),
    "launch_us": ("the host time of one kernel launch", "us", "lower"),
    "sm_clock_mhz": ("the SM clock under load", "MHz", "higher"),
}
COPY_BYTES = 64 << 20
REPEATS = 7
WARMUP_S = 0.2
SPIN_CYCLES = 2_000_000  # about 1 ms of GPU clock ahead of each timed repetition
READINGS = 3  # a session reads the probes at most this many times
NO_SPIN = ("gpuprof machine probes: this torch has no torch.cuda._sleep to queue ahead of the timed copies "
           "and GEMM, so those probes are left out (only launch_us and sm_clock_mhz are read)")


def best_readings(*readings: dict[str, Any] | None) -> dict[str, Any] | None:
    """Each probe's best value over several readings of one machine (None without any)."""
    known = [r for r in readings if r]
    if not known:
        return None
    best = {}
    for name, (_, _, better) in PROBES.items():
        values = [r[name] for r in known if r.get(name) is not None]
        if values:
            best[name] = (max if better == "higher" else min)(values)
    return best


def measure_machine(device: int = 0) -> dict[str, Any]:
    """Every probe of ``PROBES`` on this GPU, in its unit (about half a second).  A torch
    without ``torch.cuda._sleep`` (private) gets no copy and GEMM probes, with a warning:
    timed from an idle GPU they would time the host's launch too (``NO_SPIN``)."""
    import torch

    spin = getattr(torch.cuda, "_sleep", None)
    with torch.cuda.device(device):
        dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(COPY_BYTES, dtype=torch.uint8).pin_memory()
        pageable = torch.empty(COPY_BYTES, dtype=torch.uint8)
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        tiny = torch.zeros(1, device="cuda")
        out: dict[str, float | None] = {}
        if spin is None:
            warnings.warn(NO_SPIN, stacklevel=2)
        else:
            out["h2d_pinned_gbps"] = COPY_BYTES / 1e3 / _gpu_us(spin, lambda: dev.copy_(pinned, non_blocking=True))
            out["h2d_pageable_gbps"] = COPY_BYTES / 1e3 / _gpu_us(spin, lambda: dev.copy_(pageable))
            out["gemm_us"] = _gpu_us(spin, lambda: a @ a)
        out["launch_us"] = _launch_us(tiny)
        out["sm_clock_mhz"] = _sm_clock(device, lambda: a @ a)
    return {name: round(value, 3) for name, value in out.items() if value is not None}


def _gpu_us(spin, work) -> float:
    """Shortest GPU time of ``work`` in microseconds, after the clock has ramped up (an idle
    GPU runs its first kernels at a low clock).  A spin of the GPU (``spin``, torch.cuda._sleep)
    queued ahead of each repetition holds the start event until the host has queued ``work``."""
    import torch

    warm_until = time.perf_counter() + WARMUP_S
    while time.perf_counter() < warm_until:
        work()
        torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spin(SPIN_CYCLES)
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return min(times)


def _launch_us(tiny, launches: int = 500) -> float:
    """Shortest host time per launch of a one-element kernel, over batches of ``launches``."""
    import torch

    times = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            tiny.add_(1)
        times.append((time.perf_counter() - start) / launches * 1e6)
    torch.cuda.synchronize()
    return min(times)


def _sm_clock(device: int, work) -> float | None:
    """The highest SM clock NVML reads while the GPU works, over ``REPEATS`` readings
    (nvidia-ml-py; None without it, or where NVML does not know the GPU): under a GEMM the
    power management moves a single reading by 15% between processes of one H200."""
    with nvml_session() as pynvml:
        if pynvml is None:
            return None
        try:
            import torch

            handle = nvml_handle(pynvml, device)
            clocks = []
            for _ in range(REPEATS):
                for _ in range(20):
                    work()
                clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
                torch.cuda.synchronize()
            return float(max(clocks))
        except (pynvml.NVMLError, OSError):
            return None
