"""gpuprof's steps after a test is judged in the process that measured it, each a small plugin
implementing ``hookspec.pytest_gpuprof_judged``, registered by ``plugin.py`` where it applies
(the base revision's pairs are the A/B head's: ``run.base_revision``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..capture.nsight_compute import find_ncu
from ..compare.confirmation import needs_confirmation
from ..compare.evaluate import TestResult
from ..errors import GpuprofError
from ..numbers import format_ratio
from .confirm import confirm
from .kernel_profiling import ncu_plan, profile_kernels
from .outcomes import Outcomes, say


class Confirmation:
    """``--gpuprof-confirm N``: a test failed on time or ratio regressions alone is re-run in
    N fresh processes, judged as this run judges (``args``), and keeps the failures they
    reproduce (``run.confirm``).  Not in a re-run itself, nor where the base revision decides."""

    def __init__(self, count: int, args: list[str], timeout_s: float) -> None:
        self.count = count
        self.args = args
        self.timeout_s = timeout_s

    def pytest_gpuprof_judged(self, item: pytest.Item, result: TestResult, arguments: dict[str, Any]) -> None:
        if needs_confirmation(result):
            confirm(result, self.args, item.config.rootpath, self.count, self.timeout_s,
                    lambda line: say(item.config, line))


class KernelCounters:
    """Nsight Compute on a test's heaviest kernels (``ncu=`` on its marker, or ``--gpuprof-ncu``
    for every test), in a fresh process (``run.kernel_profiling``); what goes wrong there is a
    note, and the test stays judged as it was.  A recording stores the counters with its entry."""

    def __init__(self, every: bool, ncu_path: str | None, plan_args: list[str], timeout_s: float,
                 outcomes: Outcomes) -> None:
        self.every = every  # --gpuprof-ncu
        self.ncu_path = ncu_path
        self.plan_args = plan_args  # the run's steps, for the process under ncu
        self.timeout_s = timeout_s
        self.outcomes = outcomes

    @pytest.hookimpl(trylast=True)  # once the test's verdicts are settled
    def pytest_gpuprof_judged(self, item: pytest.Item, result: TestResult, arguments: dict[str, Any]) -> None:
        plan = ncu_plan(arguments, self.every)
        if plan is None or not result.metrics:
            return
        config = item.config
        say(config, f"gpuprof: {item.nodeid}: profiling its heaviest kernels under Nsight Compute in a fresh process")
        metrics = result.metrics
        try:
            steps = metrics.get("step_count") or 0
            if plan.step >= steps:
                raise GpuprofError(f"ncu's step {plan.step} is not a measured step (the test measured {steps})")
            ncu = find_ncu(self.ncu_path, "--gpuprof-ncu-path")
            result.counters = profile_kernels(item.nodeid, metrics.get("kernels") or {}, plan, ncu,
                                              Path(config.rootpath), self.plan_args, self.timeout_s,
                                              config.pluginmanager.has_plugin("xdist"))
        except GpuprofError as exc:
            result.notes.append(f"Nsight Compute: {exc}")
            say(config, f"gpuprof: {item.nodeid}: Nsight Compute: {exc}")
            return
        c = result.counters
        self.outcomes.add_counters(result)
        bandwidth = c["memory_bandwidth_utilization"]
        say(config, f"gpuprof: {item.nodeid}: Nsight Compute profiled {len(c['kernels'])} kernel(s) of "
                    f"{c['profiled']} in {c['seconds']} s; memory_bandwidth_utilization "
                    f"{'n/a' if bandwidth is None else format_ratio(bandwidth)}")
