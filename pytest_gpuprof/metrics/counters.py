"""Inside the kernels: Nsight Compute's counters of each kernel name over its profiled
launches, and the share of the card's DRAM bandwidth the profiled kernels used
(docs/metrics.md, "Inside the kernels")."""

from __future__ import annotations

from typing import Any

import pandas as pd

#: Each kernel's counters (docs/metrics.md): the median of its launches, with their min and max.
KERNEL_COUNTERS = ("time_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "dram_bytes",
                   "achieved_occupancy_pct", "registers_per_thread", "local_memory_bytes", "l1_hit_rate_pct",
                   "l2_hit_rate_pct", "tensor_pipe_pct")


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
