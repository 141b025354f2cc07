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
#: The counters document's key saying why each figure that is null has no value.
NO_VALUE = "no_value"
#: Why ``memory_bandwidth_utilization`` is null where the launches give all it needs: what it
#: divides by is 0, from their durations or from the card's peak (docs/metrics.md).
ZERO_DURATION = f"has nothing to divide by: the profiled launches' durations ({needs('time_ns')}) total 0 ns"
ZERO_PEAK = (f"has nothing to divide by: the peak DRAM bytes of the profiled launches' time "
             f"({needs('dram_peak_bytes_per_cycle')} x {needs('dram_cycles_per_second')} x duration) total 0")


def ncu_counters(launches: pd.DataFrame, function: Callable[[str], str]) -> dict[str, Any]:
    """A report's counters as results, baselines and ``gpuprof diff`` hold them:
    ``memory_bandwidth_utilization``, ``kernels``, each kernel with its ``function``
    (``function(name)``: the name ncu's ``-k`` and a threshold's ``kernels[PATTERN]`` match),
    and ``no_value``: why each null figure is null, keyed as its verdicts name it
    (``kernels[NAME].COUNTER``, ``memory_bandwidth_utilization``), so that a verdict on it need
    not guess."""
    utilization, why = _bandwidth(launches)
    gaps = {f"kernels[{name}].{figure}": _needing(lacking)
            for name, group in launches.groupby("kernel", sort=False)
            for figure in KERNEL_COUNTERS if (lacking := _lacking(group, figure))}
    return {BANDWIDTH.name: utilization,
            "kernels": {name: {"function": function(name), **row} for name, row in kernel_counters(launches).items()},
            NO_VALUE: gaps | ({BANDWIDTH.name: why} if why else {})}


def kernel_counters(launches: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per kernel name (``trace.ncu_report`` launches): its launches, then each of ``KERNEL_COUNTERS``
    as ``{"median", "min", "max"}`` over them, the largest time first; each null where a
    launch of the kernel could not give the counter (``ncu_counters``' ``no_value`` says why)."""
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
    launch's peak read from its own counters; None where a launch could not give one of them,
    or that sum is 0 (``ncu_counters``' ``no_value`` says which)."""
    return _bandwidth(launches)[0]


def _bandwidth(launches: pd.DataFrame) -> tuple[float | None, str | None]:
    """``memory_bandwidth_utilization``, or None and why: the metrics it needs that a launch
    lacks, else what it divides by being 0 (``ZERO_DURATION``, ``ZERO_PEAK``)."""
    lacking = _lacking(launches, BANDWIDTH.name)
    if lacking:
        return None, _needing(lacking)
    peak = launches["dram_peak_bytes_per_cycle"] * launches["dram_cycles_per_second"] * launches["time_ns"] / 1e9
    total = float(peak.sum())
    if total > 0:
        return round(float(launches["dram_bytes"].sum()) / total, 6), None
    return None, ZERO_DURATION if launches["time_ns"].sum() == 0 else ZERO_PEAK


def not_computed(launches: pd.DataFrame) -> dict[str, list[str]]:
    """Each figure (``KERNEL_COUNTERS``, then ``memory_bandwidth_utilization``) that some launch
    could not give, with the metrics it needs that a launch lacks (``trace.ncu_report.needs``): a
    report's gaps, said once for all its kernels."""
    lacking = {figure: _lacking(launches, figure) for figure in (*KERNEL_COUNTERS, BANDWIDTH.name)}
    return {figure: metrics for figure, metrics in lacking.items() if metrics}


def _lacking(launches: pd.DataFrame, figure: str) -> list[str]:
    """The metrics a figure needs that one of ``launches`` lacks (``trace.ncu_report.needs``)."""
    return [needs(key) for key in _inputs(figure) if launches[key].isna().any()]


def _inputs(figure: str) -> tuple[str, ...]:
    return INPUTS.get(figure, (figure,))


def needs_lines(lacking: dict[str, list[str]]) -> list[str]:
    """``not_computed`` in words, a line a figure: ``FIGURE needs METRIC (or WAY) and ...``."""
    return [f"{figure} {_needing(metrics)}" for figure, metrics in lacking.items()]


def _needing(metrics: list[str]) -> str:
    """Why a figure is null where launches lack metrics: ``needs METRIC (or WAY) and ...``."""
    return f"needs {' and '.join(metrics)}"


def _plain(value: Any) -> float | int:
    """A JSON number: whole counters stay integers (a median of two launches may not)."""
    number = float(value)
    return int(number) if number.is_integer() else number
