"""The GPU's clocks, slowdown reasons and other processes, sampled through NVML while
the measured steps run (nvidia-ml-py; none where NVML cannot be loaded).  The readings go into
the trace's metadata (``health``), where ``metrics.health`` judges them and ``metrics.clock``
gives each measured step its SM clock and clock-event reasons."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import operator
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

#: NVML clock-event reasons that mean the GPU was slowed down.
SLOWDOWNS = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
             0x80: "hardware power brake"}
#: The same reasons as one bit mask.
SLOWDOWN_BITS = sum(SLOWDOWNS)


def slowdown_names(events: int) -> list[str]:
    """The slowdown reasons (``SLOWDOWNS``) a clock-event bit mask holds."""
    return [name for bit, name in SLOWDOWNS.items() if events & bit]


def lineage() -> set[int]:
    """This process and those that started it: a pytest that re-runs a test in a fresh
    process to confirm it (or runs gpuprof's own tests) holds a CUDA context while it
    waits, and NVML lists it; it is not another workload on the GPU."""
    pids = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                pid = int(fh.read().rpartition(")")[2].split()[1])  # the field after the state
        except (OSError, ValueError, IndexError):
            break
    return pids


def device_uuid(device: int) -> str:
    """The UUID of torch's CUDA device ``device`` as NVML spells it (``GPU-`` and 8-4-4-4-12
    hex digits): from torch's device properties (torch >= 2.4), else from the CUDA driver."""
    import torch

    # getattr: torch's stubs call it a str; it is a _CUuuid, and torch < 2.4 has none
    torch_uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    raw = bytes(torch_uuid.bytes) if torch_uuid is not None else _driver_uuid(device)
    return f"GPU-{uuid.UUID(bytes=raw)}"


def _driver_uuid(device: int) -> bytes:
    """cuDeviceGetUuid of CUDA device ``device`` (the runtime's device numbers, which torch
    uses, are the driver's: both count only the devices CUDA_VISIBLE_DEVICES shows)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    handle, raw = ctypes.c_int(), ctypes.create_string_buffer(16)
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(handle), device) or cuda.cuDeviceGetUuid(raw, handle):
        raise OSError(f"the CUDA driver gave no UUID for device {device}")
    return raw.raw


def nvml_handle(nvml, device: int):
    """NVML's handle of torch's CUDA device ``device``, looked up by the GPU's UUID: NVML
    numbers every GPU of the machine, CUDA only those CUDA_VISIBLE_DEVICES shows, so under
    ``CUDA_VISIBLE_DEVICES=1`` torch's device 0 is NVML's device 1."""
    return nvml.nvmlDeviceGetHandleByUUID(device_uuid(device))


@contextlib.contextmanager
def nvml_session() -> Iterator[Any]:
    """pynvml, initialized for the block and shut down after it; None where nvidia-ml-py or
    NVML itself is not there."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def pcie_link(device: int) -> dict[str, int] | None:
    """The PCIe link of torch's CUDA device ``device``: ``{"generation", "width"}``, NVML's
    maximum for this device in this machine (what the link trained to at best; an idle link
    drops to a lower generation, the current reading would say that).  None without NVML."""
    with nvml_session() as nvml:
        if nvml is None:
            return None
        try:
            handle = nvml_handle(nvml, device)
            link = {"generation": int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
                    "width": int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle))}
        except (nvml.NVMLError, OSError):
            return None
        # a value the trace loader would refuse (trace.model.first_problem) is no reading
        return link if all(0 < v <= 64 for v in link.values()) else None


class NvmlSampler:
    """Samples SM clock, clock-event reasons and other processes every ``period_s`` in a
    thread, from the first measured step until the GPU has finished the last one
    (``stop_when``).  Each sample is kept with the host's wall clock (``time.time_ns()``) at
    its reading, and ``anchor`` keeps that clock at the start of each measured step:
    ``metrics.clock`` puts the samples on the trace's timeline through those anchors."""

    def __init__(self, device_index: int, period_s: float = 0.02) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = nvml_handle(pynvml, device_index)
        self._period = period_s
        self._stop = threading.Event()
        self._finished: Callable[[], bool] | None = None
        self._samples: list[list[int]] = []  # [time.time_ns(), SM clock in MHz, clock-event reasons]
        self._anchors: list[int] = []  # time.time_ns() as each measured step's range opened
        self._others: set[int] = set()
        self._ours = lineage()
        self._readings: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @classmethod
    def start(cls, device_index: int) -> NvmlSampler | None:
        """A running sampler, or None where NVML is not available."""
        try:
            sampler = cls(device_index)
        except Exception:
            return None
        sampler._thread.start()
        return sampler

    def stop_when(self, finished: Callable[[], bool]) -> None:
        """Sample on until ``finished()`` says the GPU has done the measured work (the CPU
        queues the last step long before the GPU runs it)."""
        self._finished = finished

    def anchor(self) -> None:
        """Keep the host's wall clock now, just after a measured step's range opened: the
        range's start in the trace is the same moment on the trace's clock."""
        self._anchors.append(time.time_ns())

    def _run(self) -> None:
        nvml, h = self._nvml, self._handle
        while not self._stop.is_set():
            if self._finished is not None and self._finished():
                return  # an idle GPU lowers its clock: no sample after the work
            try:
                at = time.time_ns()
                clock = int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
                try:
                    reasons = int(nvml.nvmlDeviceGetCurrentClocksEventReasons(h))
                except nvml.NVMLError:  # not supported (some vGPUs): the clock is still a reading
                    reasons = 0
                self._samples.append([at, clock, reasons])
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if proc.pid not in self._ours:
                        self._others.add(int(proc.pid))
            except nvml.NVMLError:
                pass
            self._stop.wait(self._period)

    def stop(self, timeout_s: float = 600.0) -> dict[str, Any]:
        """The readings, for the trace's metadata: after the GPU finished when ``stop_when``
        was given (waiting up to ``timeout_s``), else now."""
        if self._readings is None:
            if self._finished is not None:
                self._thread.join(timeout_s)
            self._stop.set()
            self._thread.join()
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass
            clocks = [clock for _, clock, _ in self._samples]
            reasons = functools.reduce(operator.or_, (r for _, _, r in self._samples), 0)
            self._readings = {
                "sm_clock_mhz": [min(clocks), max(clocks)] if clocks else None,
                "slowdowns": slowdown_names(reasons),
                "other_processes": sorted(self._others),
                "samples": len(clocks),
                "clock_samples": self._samples,  # metrics.clock: each step's clock
                "step_anchors_ns": self._anchors,
            }
        return self._readings
