"""Capture with torch.profiler: the ``gpuprof`` fixture object and its NVTX ranges.

Every range the plugin emits goes both to NVTX (domain ``gpuprof``, visible in
Nsight Systems) and to torch.profiler's ``record_function`` (visible in the
Kineto trace): the test's node id around the whole test, ``warmup`` around the
warm-up steps, ``step_N`` around each measured step, and the user's own ranges.
"""

from __future__ import annotations

import contextlib
import json
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import ConfigError

NVTX_DOMAIN = "gpuprof"


@dataclass(frozen=True)
class StepPlan:
    """torch.profiler's schedule: ``wait`` steps unprofiled, ``warmup`` profiled and
    discarded, ``active`` measured (``repeat=1``: one cycle, nothing dropped)."""

    wait: int = 0
    warmup: int = 3
    active: int = 10

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"gpuprof steps: {name} must be a non-negative integer, got {value!r}")
        if self.active < 1:
            raise ConfigError(f"gpuprof steps: active must be at least 1, got {self.active}")

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active

    def with_overrides(self, wait: int | None, warmup: int | None, active: int | None) -> "StepPlan":
        return StepPlan(
            self.wait if wait is None else wait,
            self.warmup if warmup is None else warmup,
            self.active if active is None else active,
        )


class GpuProf:
    """The ``gpuprof`` fixture.

    ``for _ in gpuprof.steps(warmup=3, active=10): work()`` runs the body
    ``wait + warmup + active`` times and profiles the ``active`` ones; without
    ``--gpuprof`` it is a plain loop.  ``with gpuprof.range("name"):`` marks a
    region of a step in both NVTX and the Kineto trace.
    """

    def __init__(self, plan: StepPlan, trace_path: Path | None = None) -> None:
        self._plan = plan
        self._trace_path = trace_path  # None: not profiling
        self._started = False
        self.completed = False

    @property
    def profiling(self) -> bool:
        return self._trace_path is not None

    @property
    def trace_path(self) -> Path | None:
        return self._trace_path

    def steps(self, active: int | None = None, warmup: int | None = None, wait: int | None = None) -> Iterator[int]:
        """Yield the step index ``wait + warmup + active`` times; profile the last ``active``."""
        plan = self._plan.with_overrides(wait, warmup, active)
        if self._started:
            raise ConfigError("gpuprof.steps() can run once per test")
        self._started = True
        if not self.profiling:
            yield from range(plan.total)
            self.completed = True
            return
        yield from self._profiled_steps(plan)

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        """A named region: an NVTX range and a torch.profiler record_function."""
        if not self.profiling:
            yield
            return
        with nvtx_range(name):
            from torch.profiler import record_function

            with record_function(name):
                yield

    def _profiled_steps(self, plan: StepPlan) -> Iterator[int]:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        from .environment import gpu_environment

        device = torch.cuda.current_device()
        environment = gpu_environment(device)
        # repeat=1 is a single cycle, so keeping events across cycles changes nothing;
        # asking for it (torch >= 2.4) silences torch's "clears events" warning.
        extra = {"acc_events": True} if "acc_events" in inspect.signature(profile).parameters else {}
        prof = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=plan.wait, warmup=plan.warmup, active=plan.active, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(self._trace_path)),
            **extra,
        )
        first_measured = plan.wait + plan.warmup
        warmup = contextlib.ExitStack()
        prof.start()
        try:
            for i in range(plan.total):
                if i == plan.wait and plan.warmup:
                    warmup.enter_context(nvtx_range("warmup"))
                if i == first_measured:
                    warmup.close()
                    torch.cuda.reset_peak_memory_stats(device)
                if i >= first_measured:
                    with self.range(f"step_{i - first_measured}"):
                        yield i
                else:
                    yield i
                if i == plan.total - 1:
                    metadata = {
                        "peak_memory_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
                        "environment": environment,
                        "plan": {"wait": plan.wait, "warmup": plan.warmup, "active": plan.active},
                    }
                    prof.add_metadata_json("gpuprof", json.dumps(metadata))
                prof.step()
            self.completed = True
        finally:
            warmup.close()
            prof.stop()


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX push/pop range in the ``gpuprof`` domain."""
    import nvtx

    nvtx.push_range(name, domain=NVTX_DOMAIN)
    try:
        yield
    finally:
        nvtx.pop_range(domain=NVTX_DOMAIN)
