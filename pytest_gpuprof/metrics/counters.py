"""Inside the kernels: Nsight Compute's counters of each kernel name over its profiled
launches, and the share of the card's DRAM bandwidth the profiled kernels used
(docs/metrics.md, "Inside the kernels")."""

from __future__ import annotations

import re
from typing import Any, Callable

import pandas as pd

from .measure import MetricSpec

#: Each kernel's counters (docs/metrics.md): the median of its launches, with their min and max.
KERNEL_COUNTERS = ("time_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "dram_bytes",
                   "achieved_occupancy_pct", "registers_per_thread", "local_memory_bytes", "l1_hit_rate_pct",
                   "l2_hit_rate_pct", "tensor_pipe_pct")


def _counter_specs() -> dict[str, MetricSpec]:
    """How each counter is judged (``compare.counters``): a register count is exact (a changed
    count is a changed kernel), local memory exact with fewer bytes better (spills), a
    percentage of peak higher-is-better within an absolute tolerance; times and DRAM bytes
    reported (the timeline judges times)."""
    specs = {name: MetricSpec(name, "percent", "higher", False, "%") for name in KERNEL_COUNTERS
             if name.endswith("_pct")}
    specs |= {"time_us": MetricSpec("time_us", "info", None, False, "us"),
              "dram_bytes": MetricSpec("dram_bytes", "info", None, False, "B"),
              "registers_per_thread": MetricSpec("registers_per_thread", "count", None, False),
              "local_memory_bytes": MetricSpec("local_memory_bytes", "bytes", "lower", False, "B")}
    return {name: specs[name] for name in KERNEL_COUNTERS}


#: Each kernel counter's spec, in ``KERNEL_COUNTERS`` order.
COUNTER_SPECS: dict[str, MetricSpec] = _counter_specs()
#: The test's own counter: a ratio, higher is better, judged within the ratio tolerance.
BANDWIDTH = MetricSpec("memory_bandwidth_utilization", "ratio", "higher", False)
#: The counters a tolerance may name (``tolerances={"dram_throughput_pct": 0.02}``): the
#: percentages, in points over 100 as ratios are, and the test's bandwidth.
TOLERATED_COUNTERS = (*(name for name, spec in COUNTER_SPECS.items() if spec.kind == "percent"), BANDWIDTH.name)
#: The counters a verdict or a threshold may name as ``kernels[NAME].COUNTER``: all but
#: ``time_us`` (that name is the timeline's per-kernel time, judged over its steps).
NAMED_COUNTERS = tuple(name for name in KERNEL_COUNTERS if name != "time_us")
#: ``kernels[NAME].COUNTER``: a kernel's counter in verdicts, a pattern's in thresholds.
_KERNEL_COUNTER = re.compile(r"^kernels\[(?P<kernel>.+)\]\.(?P<counter>[a-z0-9_]+)$")


def kernel_counter(metric: str) -> tuple[str, str] | None:
    """(kernel or pattern, counter) of a ``kernels[NAME].COUNTER`` name whose counter is one of
    ``NAMED_COUNTERS``; None for any other name (``kernels[NAME].count``, ``.time_us``)."""
    m = _KERNEL_COUNTER.match(metric)
    return (m["kernel"], m["counter"]) if m and m["counter"] in NAMED_COUNTERS else None


def counter_spec(metric: str) -> MetricSpec | None:
    """The spec of ``memory_bandwidth_utilization`` or of a kernel's counter (named as a
    ``kernels[NAME].COUNTER``); None for any other name."""
    if metric == BANDWIDTH.name:
        return BANDWIDTH
    found = kernel_counter(metric)
    return None if found is None else COUNTER_SPECS[found[1]]


def ncu_counters(launches: pd.DataFrame, function: Callable[[str], str]) -> dict[str, Any]:
    """A report's counters as results, baselines and ``gpuprof diff`` hold them:
    ``memory_bandwidth_utilization`` and ``kernels``, each kernel with its ``function``
    (``function(name)``: the name ncu's ``-k`` and a threshold's ``kernels[PATTERN]`` match)."""
    return {"memory_bandwidth_utilization": memory_bandwidth_utilization(launches),
            "kernels": {name: {"function": function(name), **row} for name, row in kernel_counters(launches).items()}}


def kernel_counters(launches: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per kernel name (``trace.ncu`` launches): its launches, then each of ``KERNEL_COUNTERS``
    as ``{"median", "min", "max"}`` over them, the largest time first."""
    table = launches.assign(time_us=launches["time_ns"] / 1e3,
                            local_memory_bytes=launches["local_load_bytes"] + launches["local_store_bytes"])
    grouped = table.groupby("kernel", sort=False)
    stats = grouped[list(KERNEL_COUNTERS)].agg(["median", "min", "max"])
    counts = grouped.size()
    order = stats[("time_us", "median")].sort_values(ascending=False, kind="stable").index
    return {str(name): {"launches": int(counts[name]),
                        **{c: {s: _plain(stats.at[name, (c, s)]) for s in ("median", "min", "max")}
                           for c in KERNEL_COUNTERS}}
            for name in order}


def memory_bandwidth_utilization(launches: pd.DataFrame) -> float | None:
    """DRAM bytes over what the card's peak DRAM bandwidth moves in the profiled kernels'
    time: sum(dram bytes) / sum(peak bytes a cycle x DRAM cycles a second x duration), each
    launch's peak read from its own counters; None without a launch or a duration."""
    peak = launches["dram_peak_bytes_per_cycle"] * launches["dram_cycles_per_second"] * launches["time_ns"] / 1e9
    total = float(peak.sum())
    return round(float(launches["dram_bytes"].sum()) / total, 6) if total > 0 else None


def _plain(value: Any) -> float | int:
    """A JSON number: whole counters stay integers (a median of two launches may not)."""
    number = float(value)
    return int(number) if number.is_integer() else number
