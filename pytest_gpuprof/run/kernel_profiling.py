"""Nsight Compute on a test's heaviest kernels: the test runs again in a fresh pytest
process under ``ncu``, as a session inside a profiler (NVTX ranges only: ncu owns CUPTI, as
nsys does), and ncu profiles the launches of its first measured step whose function is one
of the test's heaviest; the report's counters are read back (``trace.ncu_report``,
``metrics.counters``).

ncu replays each profiled kernel once per pass its metrics need, so a profiled kernel costs
far more than its run time: the plan is small by default (the 3 heaviest kernel names of one
step).  The card's clocks are never changed (``--clock-control none``).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..capture.nsight_compute import export_csv
from ..capture.ranges import NVTX_DOMAIN, STEP_RANGE_PREFIX
from ..compare.counter_verdicts import asks_ncu
from ..errors import GpuprofError
from ..metrics.counters import ncu_counters, needs_lines, not_computed
from ..numbers import format_number
from ..options import option_args
from ..report.names import function_name
from ..trace.ncu_report import METRICS, read_ncu_csv
from .fresh import child_pytest
from .role import INSIDE_NSYS, NCU_SIDE, SIDE

#: What ncu prints when the driver lets only administrators read the GPU's counters.
NO_PERMISSION = "ERR_NVGPUCTRPERM"
#: The fix for it, in NVIDIA's words' place.
PERMISSION_FIX = ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run the tests as root, or "
                  "let every user read them (the NVIDIA driver's option NVreg_RestrictProfilingToAdminUsers=0, "
                  "https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


@dataclass(frozen=True)
class NcuPlan:
    """Which launches ncu profiles: those of the measured step ``step`` whose function is one
    of the ``top`` functions of the test's heaviest kernels (by time a step; kernels of one
    function, template instances, count once), or matches ``kernels`` (a regular expression
    on function names) when given; the first ``launches`` of them."""

    top: int = 3
    kernels: str | None = None
    step: int = 0
    launches: int = 50  # at most this many launches profiled (ncu --launch-count): a kernel of every layer adds up


def ncu_plan(marker: dict[str, Any], every: bool) -> NcuPlan | None:
    """The test's plan: its marker's ``ncu`` (True, or a dict of ``NcuPlan``'s fields; False
    leaves it out), else the default plan under ``--gpuprof-ncu`` (``every``); None: no ncu."""
    if not asks_ncu(marker, every):
        return None
    asked = marker.get("ncu")
    return NcuPlan(**asked) if isinstance(asked, dict) else NcuPlan()


def kernel_filter(plan: NcuPlan, kernels: Mapping[str, Mapping[str, Any]]) -> str:
    """ncu's ``-k`` argument: the plan's expression, or the function names of the test's
    ``kernels`` (its metrics' ``kernels``: per name its ``time_us``), the heaviest first, up
    to the plan's ``top``."""
    if plan.kernels:
        return f"regex:{plan.kernels}"
    heaviest = sorted(kernels, key=lambda name: -kernels[name]["time_us"])
    names = list(dict.fromkeys(function_name(k) for k in heaviest))[:plan.top]
    if not names:
        raise GpuprofError("no kernel to profile under ncu: the test's steps ran none")
    return "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"


def ncu_command(ncu: Path, report: Path, plan: NcuPlan, kernels: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``ncu`` profiling the plan's launches of the command that follows it, writing ``report``."""
    return [str(ncu), "--clock-control", "none", "--nvtx", "--nvtx-include",
            f"{NVTX_DOMAIN}@{STEP_RANGE_PREFIX}{plan.step}", "-k", kernel_filter(plan, kernels),
            "--launch-count", str(plan.launches), "--metrics", METRICS, "-f", "-o", str(report.with_suffix(""))]


def profile_kernels(nodeid: str, kernels: Mapping[str, Mapping[str, Any]], plan: NcuPlan, ncu: Path, rootdir: Path,
                    options: list[str], timeout_s: float, xdist: bool = False) -> dict[str, Any]:
    """Run the test under ncu (``ncu_command``) in a fresh pytest process (``run.fresh``) from ``rootdir`` with
    gpuprof's ``options`` (its steps), and read its counters (``metrics.counters.ncu_counters``),
    every one of them (a report without a metric ncu was asked for is an error naming it),
    what was profiled and how long it took.  The process keeps out of the user's files (its own
    cache folder and JUnit file, one process under pytest-xdist: ``xdist``) and is stopped, with
    all it started, past ``timeout_s``.  An error names what went wrong and its fix."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuprof-ncu-") as tmp:
        folder = Path(tmp)
        report = folder / "test.ncu-rep"
        args = [nodeid, "-q", "--rootdir", str(rootdir), "-o", f"cache_dir={folder / 'cache'}",
                f"--junitxml={folder / 'junit.xml'}", *(["-n0"] if xdist else []),
                *option_args({"nsys": True, "confirm": 0, "baseline-dir": folder}), *options]
        try:
            with child_pytest(args, rootdir, {INSIDE_NSYS: str(folder / "inner.json"), SIDE: NCU_SIDE},
                              under=ncu_command(ncu, report, plan, kernels), merged=True) as process:
                said = process.communicate(timeout=timeout_s)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            raise GpuprofError(f"ncu ran over {format_number(timeout_s)} s (--gpuprof-confirm-timeout) and was "
                               "stopped, with the test under it") from None
        if NO_PERMISSION in said:
            raise GpuprofError(PERMISSION_FIX)
        if not report.is_file():
            last = [line for line in said.splitlines() if line.startswith(("==ERROR==", "==WARNING=="))] \
                or said.splitlines()[-3:]  # ncu's own words, else the test's last
            raise GpuprofError(f"ncu profiled no kernel of {STEP_RANGE_PREFIX}{plan.step}: " + " / ".join(last))
        launches = read_ncu_csv(export_csv(ncu, report, timeout_s), named="ncu's report of the test")
    lacking = not_computed(launches)
    if lacking:  # asked for (METRICS), and judged: none is left out
        raise GpuprofError(f"ncu's report of the test lacks metrics gpuprof judges: {'; '.join(needs_lines(lacking))}")
    capped = f" (the first {plan.launches}: --launch-count)" if len(launches) >= plan.launches else ""
    return {**ncu_counters(launches, function_name),
            "profiled": f"{STEP_RANGE_PREFIX}{plan.step}, kernels {kernel_filter(plan, kernels)}, "
                        f"{len(launches)} launch(es){capped}",
            "seconds": round(time.monotonic() - started, 1)}

