"""The metrics' names and how each is compared: what a threshold, a tolerance or a verdict
may name (docs/metrics.md defines each).

Only the standard library: the plugin checks every marker's thresholds and tolerances when
tests are collected, in every mode, without loading pandas (``plugin.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Copy directions the metrics report, in the order they are printed.
COPY_KINDS = ("htod", "dtoh", "dtod", "ptop")


@dataclass(frozen=True)
class MetricSpec:
    """How a metric is compared: ``kind`` picks the default rule, ``better`` its direction."""

    name: str
    kind: str  # "count" | "bytes" | "time" | "rate" | "ratio" | "info"
    better: str | None  # "lower" | "higher" | None (any change matters, or not gated)
    per_step: bool  # compared as total / step_count
    unit: str = ""


def _specs() -> dict[str, MetricSpec]:
    specs = [
        MetricSpec("kernel_count", "count", None, True),
        MetricSpec("kernel_time_us", "time", "lower", True, "us"),
    ]
    for kind in COPY_KINDS:
        specs += [
            MetricSpec(f"memcpy_{kind}_count", "count", None, True),
            MetricSpec(f"memcpy_{kind}_bytes", "bytes", None, True, "B"),
            MetricSpec(f"memcpy_{kind}_time_us", "time", "lower", True, "us"),
            MetricSpec(f"memcpy_{kind}_gbps", "rate", "higher", False, "GB/s"),
        ]
    specs += [
        MetricSpec("memset_count", "count", None, True),
        MetricSpec("gpu_utilization", "ratio", "higher", False),
        MetricSpec("copy_utilization", "ratio", None, False),
        MetricSpec("pcie_utilization", "ratio", "higher", False),
        MetricSpec("overlap_efficiency", "ratio", "higher", False),
        MetricSpec("sync_count", "count", "lower", True),
        MetricSpec("sync_wait_fraction", "ratio", "lower", False),
        MetricSpec("window_us", "time", "lower", True, "us"),
        MetricSpec("comm_kernel_count", "count", None, True),
        MetricSpec("comm_time_us", "time", "lower", True, "us"),
        MetricSpec("comm_compute_overlap", "ratio", "higher", False),
        MetricSpec("exposed_comm_us", "time", "lower", True, "us"),
        MetricSpec("launch_call_us", "info", None, False, "us"),
        MetricSpec("step_count", "info", None, False),
        MetricSpec("peak_memory_allocated_bytes", "info", None, False, "B"),
    ]
    return {s.name: s for s in specs}


#: Every scalar metric, in report order.  ``kernels``, ``collectives`` and ``step_gpu_time_us``
#: are the non-scalar members of the metrics object.
METRICS: dict[str, MetricSpec] = _specs()
#: Metrics a stored entry may lack: recorded since the date given (older baselines and traces).
RECORDED_SINCE = {"launch_call_us": "2026-11-25", "pcie_utilization": "2026-11-25",
                  **{f"memcpy_{kind}_gbps": "2026-11-25" for kind in COPY_KINDS},
                  **{name: "2026-11-25" for name in ("comm_kernel_count", "comm_time_us", "comm_compute_overlap",
                                                     "exposed_comm_us")}}
#: The metrics of a distributed test as a whole (its ranks' own are ``METRICS``):
#: what a threshold may name besides those.
TEST_METRICS = {"rank_skew": MetricSpec("rank_skew", "ratio", "lower", False)}


def metric_spec(metric: str) -> MetricSpec | None:
    """A metric's spec, a rank's or a distributed test's own; None for another name (a
    kernel's, ``kernels[NAME].count``)."""
    return METRICS.get(metric) or TEST_METRICS.get(metric)


#: Each kernel's counters (docs/metrics.md): the median of its launches, with their min and max.
KERNEL_COUNTERS = ("time_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "dram_bytes",
                   "achieved_occupancy_pct", "registers_per_thread", "local_memory_bytes", "l1_hit_rate_pct",
                   "l2_hit_rate_pct", "tensor_pipe_pct")


def _counter_specs() -> dict[str, MetricSpec]:
    """How each counter is judged (``compare.counter_verdicts``): a register count is exact (a changed
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
