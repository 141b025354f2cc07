"""Inside the kernels: Nsight Compute's counters of each kernel name over its profiled
launches, and the share of the card's DRAM bandwidth the profiled kernels used
(docs/metrics.md, "Inside the kernels")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from ..trace.ncu_report import needs
from .specs import BANDWIDTH, KERNEL_COUNTERS

#: The launch table's counters (``trace.ncu_report.COUNTERS``) a figure is worked out from, where
#: not from the one of its own name.
INPUTS = {"time_us": ("time_ns",), "local_memory_bytes": ("local_load_bytes", "local_store_bytes"),
          BANDWIDTH.name: ("dram_bytes", "dram_peak_bytes_per_cycle", "dram_cycles_per_second", "time_ns")}
#: What each kernel counter holds over the kernel's launches.
STATS = ("median", "min", "max")


def ncu_counters(launches: pd.DataFrame, function: Callable[[str], str]) -> dict[str, Any]:
    """A report's counters as results, baselines and ``gpuprof diff`` hold them:
    ``memory_bandwidth_utilization`` and ``kernels``, each kernel with its ``function``
    (``function(name)``: the name ncu's ``-k`` and a threshold's ``kernels[PATTERN]`` match)."""
    return {"memory_bandwidth_utilization": memory_bandwidth_utilization(launches),
            "kernels": {name: {"function": function(name), **row} for name, row in kernel_counters(launches).items()}}


def kernel_counters(launches: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per kernel name (``trace.ncu_report`` launches): its launches, then each of ``KERNEL_COUNTERS``
    as ``{"median", "min", "max"}`` over them, the largest time first; each null where a
    launch of the kernel could not give the counter (``not_computed`` says why)."""
    table = launches.assign(time_us=launches["time_ns"] / 1e3,
                            local_memory_bytes=launches["local_load_bytes"] + launches["local_store_bytes"])
    grouped = table.groupby("kernel", sort=False)
    stats = grouped[list(KERNEL_COUNTERS)].agg(list(STATS))
    held = grouped[list(KERNEL_COUNTERS)].count()  # the launches that gave each counter
    counts = grouped.size()
    order = stats[("time_us", "median")].sort_values(ascending=False, kind="stable").index
    return {str(name): {"launches": int(counts[name]),
                        **{c: {s: _plain(stats.at[name, (c, s)]) if held.at[name, c] == counts[name] else None
                               for s in STATS}
                           for c in KERNEL_COUNTERS}}
            for name in order}


def memory_bandwidth_utilization(launches: pd.DataFrame) -> float | None:
    """DRAM bytes over what the card's peak DRAM bandwidth moves in the profiled kernels'
    time: sum(dram bytes) / sum(peak bytes a cycle x DRAM cycles a second x duration), each
    launch's peak read from its own counters; None without a launch or a duration, or where a
    launch could not give one of them (``not_computed``)."""
    if launches[list(_inputs(BANDWIDTH.name))].isna().to_numpy().any():
        return None
    peak = launches["dram_peak_bytes_per_cycle"] * launches["dram_cycles_per_second"] * launches["time_ns"] / 1e9
    total = float(peak.sum())
    return round(float(launches["dram_bytes"].sum()) / total, 6) if total > 0 else None


def not_computed(launches: pd.DataFrame) -> dict[str, list[str]]:
    """Each figure (``KERNEL_COUNTERS``, then ``memory_bandwidth_utilization``) that some launch
    could not give, with the metrics it needs that a launch lacks (``trace.ncu_report.needs``): a
    report's gaps, said once for all its kernels."""
    lacking = {figure: [needs(key) for key in _inputs(figure) if launches[key].isna().any()]
               for figure in (*KERNEL_COUNTERS, BANDWIDTH.name)}
    return {figure: metrics for figure, metrics in lacking.items() if metrics}


def counter_needs(figure: str) -> list[str]:
    """Every metric a figure needs (``trace.ncu_report.needs`` of each of its inputs)."""
    return [needs(key) for key in _inputs(figure)]


def _inputs(figure: str) -> tuple[str, ...]:
    return INPUTS.get(figure, (figure,))


def needs_lines(lacking: dict[str, list[str]]) -> list[str]:
    """``not_computed`` in words, a line a figure: ``FIGURE needs METRIC (or WAY) and ...``."""
    return [f"{figure} needs {' and '.join(metrics)}" for figure, metrics in lacking.items()]


def _plain(value: Any) -> float | int:
    """A JSON number: whole counters stay integers (a median of two launches may not)."""
    number = float(value)
    return int(number) if number.is_integer() else number
