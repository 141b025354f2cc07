"""The ``gpuprof`` fixture object: its steps and its NVTX ranges.

Two capture modes.  ``torch``: torch.profiler records the steps into a Kineto
trace, and every range goes both to NVTX (domain ``gpuprof``, visible in
Nsight Systems) and to ``record_function`` (visible in the Kineto trace).
``nvtx``: the session runs under ``nsys profile``, which owns CUPTI, so only
NVTX ranges are emitted and nsys records the rest.  The ranges: the test's node
id around the whole test, ``warmup`` around the warm-up steps, ``step_N``
around each measured step, and the user's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import inspect
import json
import shutil
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import default
from .environment import gpu_environment
from .nvml import NvmlSampler, pcie_link
from .ranges import (
    L2_FLUSH_RANGE,
    METADATA_MARK,
    NVTX_DOMAIN,
    STEP_RANGE_PREFIX,
    WARMUP_RANGE,
    nvtx_process_range,
    nvtx_range,
)


@dataclass(frozen=True)
class StepPlan:
    """torch.profiler's schedule: ``wait`` steps unprofiled, ``warmup`` profiled and
    discarded, ``active`` measured (``repeat=1``: one cycle, nothing dropped).
    ``flush_l2``: before every step, overwrite a buffer twice the size of the L2
    cache, so each step starts cold (``triton.testing.do_bench`` zeroes a fixed
    256 MB buffer for the same purpose)."""

    wait: int = default("wait")
    warmup: int = default("warmup")
    active: int = default("active")
    flush_l2: bool = default("flush-l2")
    #: The run's floor on ``active`` (``--gpuprof-min-active``): a test asking fewer measured
    #: steps gets this many, so that a run can detect smaller changes than its tests' own steps
    #: would; not a marker or ``steps()`` argument.
    min_active: int = default("min-active")

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active", "min_active"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"gpuprof steps: {name} must be a non-negative integer, got {value!r}")
        if self.active < 1:
            raise ConfigError(f"gpuprof steps: active must be at least 1, got {self.active}")
        if self.active < self.min_active:
            object.__setattr__(self, "active", self.min_active)
        if not isinstance(self.flush_l2, bool):
            raise ConfigError(f"gpuprof steps: flush_l2 must be True or False, got {self.flush_l2!r}")

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active

    def with_overrides(self, **overrides: Any) -> StepPlan:
        """This plan with every override that is not None (marker or ``steps()`` arguments, as
        the user wrote them: ``__post_init__`` checks them)."""
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})


#: Marker and ``steps()`` arguments that shape the steps: the fields of StepPlan but the run's floor.
PLAN_KEYS = tuple(f.name for f in dataclasses.fields(StepPlan) if f.name != "min_active")


class GpuProf:
    """The ``gpuprof`` fixture.

    ``for _ in gpuprof.steps(warmup=3, active=10): work()`` runs the body
    ``wait + warmup + active`` times and profiles the ``active`` ones; without
    ``--gpuprof`` it is a plain loop.  ``with gpuprof.range("name"):`` marks a
    region of a step in both NVTX and the Kineto trace.
    """

    def __init__(self, plan: StepPlan, trace_path: Path | None = None, nvtx_only: bool = False,
                 process_steps: bool = False) -> None:
        self._plan = plan
        self._trace_path = trace_path  # torch mode: where the Kineto trace goes
        self._nvtx_only = nvtx_only  # nvtx mode: nsys records
        self._process_steps = process_steps  # each measured step also a process-wide range: ncu selects by it
        self._started = False
        self._steps: Generator[int, None, None] | None = None  # the steps() loop, closed at teardown
        self.completed = False

    @property
    def profiling(self) -> bool:
        return self._trace_path is not None or self._nvtx_only

    @property
    def trace_path(self) -> Path | None:
        return self._trace_path

    def steps(self, active: int | None = None, warmup: int | None = None, wait: int | None = None,
              flush_l2: bool | None = None) -> Generator[int, None, None]:
        """An iterator of the step index, ``wait + warmup + active`` long; the last ``active``
        steps are profiled.  ``flush_l2=True`` empties the L2 cache before each step (StepPlan)."""
        plan = self._plan.with_overrides(wait=wait, warmup=warmup, active=active, flush_l2=flush_l2)
        if self._started:
            raise ConfigError("gpuprof.steps() can run once per test")
        self._started = True
        self._steps = self._run_steps(plan)
        return self._steps

    def close(self) -> None:
        """End a steps() loop its test left unfinished (it raised, or held the loop in a
        variable): the profiler stops now, not whenever the loop is garbage-collected."""
        if self._steps is not None:
            self._steps.close()

    def _run_steps(self, plan: StepPlan) -> Generator[int, None, None]:
        if self._nvtx_only:
            yield from self._nvtx_steps(plan)
        elif self._trace_path is not None:
            yield from self._profiled_steps(plan, self._trace_path)
        else:
            yield from range(plan.total)
            self.completed = True

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        """A named region: an NVTX range and a torch.profiler record_function."""
        if not self.profiling:
            yield
            return
        with nvtx_range(name):
            if self._nvtx_only:
                yield
                return
            from torch.profiler import record_function

            with record_function(name):
                yield

    def _nvtx_steps(self, plan: StepPlan) -> Generator[int, None, None]:
        """Steps under nsys: NVTX ranges, and the metadata as an NVTX mark in the test's range."""
        import nvtx

        metadata = yield from self._step_loop(plan, lambda i: None)
        nvtx.mark(METADATA_MARK + json.dumps(metadata, sort_keys=True), domain=NVTX_DOMAIN)
        self.completed = True

    def _profiled_steps(self, plan: StepPlan, trace_path: Path) -> Generator[int, None, None]:
        """Steps under torch.profiler's schedule.  torch exports the trace once the last step
        ends, before the GPU has finished it; the metadata (the health readings of the whole
        GPU work among it) is added to the trace's header afterwards (``_with_metadata``)."""
        from torch.profiler import ProfilerActivity, profile, schedule

        raw = trace_path.with_name(trace_path.name + ".raw.json")
        # repeat=1 is a single cycle, so keeping events across cycles changes nothing;
        # asking for it (torch >= 2.4) silences torch's "clears events" warning.
        extra: dict[str, Any] = {"acc_events": True} if "acc_events" in inspect.signature(profile).parameters else {}
        lighter = _lighter_recording()
        extra.update(lighter)
        prof = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=plan.wait, warmup=plan.warmup, active=plan.active, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
            **extra,
        )
        prof.start()
        try:
            try:
                metadata = yield from self._step_loop(plan, lambda i: prof.step())
            finally:
                prof.stop()
            metadata["lighter_recording"] = bool(lighter)
            _with_metadata(raw, trace_path, metadata)
            self.completed = True
        finally:
            raw.unlink(missing_ok=True)

    def _step_loop(self, plan: StepPlan, after_step: Callable[[int], None]) -> Generator[int, None, dict[str, Any]]:
        """The steps with their NVTX ranges; ``after_step(i)`` ends each one.  Returns the
        trace metadata: peak memory over the measured steps, environment, and the NVML
        readings from the first measured step until the GPU finished the last one, with the
        host's clock at each measured step's start (``NvmlSampler.anchor``)."""
        import torch

        device = torch.cuda.current_device()
        environment = gpu_environment(device)
        sampler: NvmlSampler | None = None

        first_measured = plan.wait + plan.warmup
        flush = _l2_flush_buffer(device) if plan.flush_l2 else None
        flush_bytes = 0 if flush is None else flush.numel() * flush.element_size()

        warmup = contextlib.ExitStack()
        try:
            for i in range(plan.total):
                if i == plan.wait and plan.warmup:
                    warmup.enter_context(nvtx_range(WARMUP_RANGE))
                if i == first_measured:
                    warmup.close()
                    torch.cuda.reset_peak_memory_stats(device)
                    sampler = NvmlSampler.start(device)
                if flush is not None:
                    with self.range(L2_FLUSH_RANGE):  # the metrics leave out what runs in this range
                        flush.zero_()
                if i >= first_measured:
                    name = f"{STEP_RANGE_PREFIX}{i - first_measured}"
                    process_range = nvtx_process_range(name) if self._process_steps else contextlib.nullcontext()
                    with self.range(name), process_range:
                        if sampler is not None:
                            sampler.anchor()  # the host's clock at this range's start (metrics.clock)
                        yield i
                else:
                    yield i
                if i == plan.total - 1 and sampler is not None:
                    done = torch.cuda.Event()  # the GPU's end of the last step
                    done.record()
                    sampler.stop_when(functools.partial(_finished, done, device))
                after_step(i)
            health = sampler.stop() if sampler is not None else None
        finally:
            warmup.close()
            if sampler is not None:
                sampler.stop()
        # the flush buffer stays allocated through the measured steps: not the test's memory
        peak = int(torch.cuda.max_memory_allocated(device)) - flush_bytes
        return _metadata(plan, peak, environment, health, pcie_link(device))


def _lighter_recording() -> dict[str, Any]:
    """torch.profiler options that cut its CPU-side cost per operator without losing an event
    the metrics read: the links from GPU work back to the CPU operators that launched it
    (``External id``) are not used (kernels are tied to their launch by CUPTI's correlation
    id), and recording them is a large part of the profiler's cost on launch-bound steps
    (benchmarks/observer_effect.py, docs/benchmarks.md "The observer effect").  Empty where
    this torch lacks the option: the trace's metadata says so (``lighter_recording``), and
    ``metrics.health.recording_notes`` makes it a note of the result."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        # unused-ignore: the stubs of torch >= 2.4 have the keyword; older ones raise TypeError, below
        return {"experimental_config": _ExperimentalConfig(disable_external_correlation=True)}  # type: ignore[call-arg, unused-ignore]
    except (ImportError, TypeError):  # a torch without the option records them
        return {}


def _finished(event, device: int) -> bool:
    """Whether the GPU has run past ``event`` (asked from the NVML sampler's thread)."""
    import torch

    with torch.cuda.device(device):
        return event.query()


def _with_metadata(raw: Path, trace: Path, metadata: dict) -> None:
    """Write ``trace`` (gzipped) as the exported ``raw`` trace with a ``gpuprof`` member
    holding the metadata first in its top-level object, where loaders read the header."""
    member = b'\n  "gpuprof": ' + json.dumps(metadata).encode() + b","
    with open(raw, "rb") as src, gzip.open(trace, "wb", compresslevel=6) as out:
        head = src.read(1 << 16)
        at = head.index(b"{") + 1
        out.write(head[:at] + member + head[at:])
        shutil.copyfileobj(src, out, 1 << 20)


def _l2_flush_buffer(device: int):
    """A buffer twice the L2 cache's size (256 MiB where torch does not say): writing it
    evicts whatever the previous step left in L2."""
    import torch

    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return torch.empty(2 * l2 if l2 > 0 else 256 << 20, dtype=torch.int8, device=torch.device("cuda", device))


def _metadata(plan: StepPlan, peak_memory: int, environment: dict, health: dict | None,
              link: dict | None) -> dict:
    """What a trace carries beside its events, so that it reproduces every number."""
    out = {
        "peak_memory_allocated_bytes": peak_memory,
        "pcie_link": link,  # capture.nvml.pcie_link: pcie_utilization's peak
        "environment": environment,
        "plan": {"wait": plan.wait, "warmup": plan.warmup, "active": plan.active, "flush_l2": plan.flush_l2},
    }
    if health is not None:
        out["health"] = health  # NVML readings of the measured steps (health.assess)
    return out
