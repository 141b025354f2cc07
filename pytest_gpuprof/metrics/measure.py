"""Metrics of one normalized trace: pure, vectorized functions (docs/metrics.md defines each).

The measured steps come from the trace itself (``ProfilerStep#N`` ranges, else
``step_N`` ranges, else the whole trace), so a saved trace reproduces every
number.  GPU work belongs to the step in which its launching runtime call
started (matched by correlation id), even when it runs after the step closed
(``steps``: the steps and the attribution).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..trace.model import INT64_MAX, Trace
from .clock import step_clocks
from .health import stalled_steps
from .intervals import clip, covered_length, longest_gap, merge_intervals, union_length, union_length_per_group
from .specs import COPY_KINDS, METRICS
from .steps import find_steps, launch_times, step_of, without_l2_flushes

#: The count metrics; a step whose counts differ from the median step's is no host stall
#: (``health.stalled_steps``).
COUNTS = [name for name, spec in METRICS.items() if spec.kind == "count"]

#: Kernel names (the heaviest) whose per-step times are kept: per_step["kernels"][name].
PER_STEP_KERNELS = 20

_API_SUFFIX = re.compile(r"(_v\d+)?(_ptds|_ptsz)?$")
#: Kernel-launch calls, whose CPU-side durations measure the host's speed (``launch_call_us``).
_LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
})
#: The quantile of a step's launch-call durations that is its host-speed reading: a low one,
#: since a call that waited on a full launch queue measures the GPU, not the host.
LAUNCH_QUANTILE = 0.25
#: A PCIe lane's data rate in GB/s (1e9 bytes/s) per direction, by link generation: the
#: transfer rate after the line encoding (8b/10b to generation 2, 128b/130b from 3, 1b/1b
#: FLIT mode at 6 with 242 of each 256 bytes carrying data), before packet overheads.
PCIE_LANE_GBPS = {1: 2.5 * 8 / 10 / 8, 2: 5.0 * 8 / 10 / 8, 3: 8.0 * 128 / 130 / 8, 4: 16.0 * 128 / 130 / 8,
                  5: 32.0 * 128 / 130 / 8, 6: 64.0 * 242 / 256 / 8}
_SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
})


@dataclass
class Measurement:
    """Metrics of one trace plus what they were computed over."""

    metrics: dict[str, Any]
    per_step: dict[str, Any]  # each metric's value per step; under "kernels", the heaviest kernels' times
    steps: pd.DataFrame  # start, end, name of each measured step
    step_source: str  # "ProfilerStep#N", "step_N" or "whole trace"
    window: tuple[int, int]  # W in ns
    gpu_name: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the attributed GPU work: start, end, kind ("kernel", a copy kind, "memset"), name, stream, step,
    #: launch (the CPU start of the call that launched it)
    work: pd.DataFrame | None = None
    #: the trace's annotation ranges (NVTX, user annotations, steps): start, end, name, tid
    ranges: pd.DataFrame | None = None
    #: the trace's runtime calls (start, end, name, tid) and its host threads' names by tid
    runtime: pd.DataFrame | None = None
    thread_names: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu_name,
            "steps": {"source": self.step_source, "count": len(self.steps)},
            "window_ns": list(self.window),
            "metrics": self.metrics,
            "per_step": self.per_step,
        }


def is_launch_call(name: str) -> bool:
    """True for runtime/driver calls that launch one kernel (not a graph)."""
    return _API_SUFFIX.sub("", name) in _LAUNCH_CALLS


def is_comm_kernel(name: str) -> bool:
    """A collective-communication kernel: NCCL's, ``ncclKernel_*`` and, since NCCL 2.19,
    ``ncclDevKernel_*`` (a leading ``void `` of a demangled name aside)."""
    return name.removeprefix("void ").startswith("nccl")


def is_sync_call(name: str) -> bool:
    """True for runtime/driver calls that block the CPU until the GPU catches up."""
    base = _API_SUFFIX.sub("", name)
    if base in _SYNC_CALLS:
        return True
    return base.startswith(("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")) and "Async" not in base


def measure(trace: Trace) -> Measurement:
    """Compute every metric of docs/metrics.md for one trace; a trace with no GPU work in its
    steps is an error naming it (``TraceError``): zeros measured there would pass any gate."""
    unflushed, trace = trace, without_l2_flushes(trace)
    steps, source = find_steps(trace)
    step_start = steps["start"].to_numpy(np.int64)
    step_end = steps["end"].to_numpy(np.int64)
    launch = launch_times(trace)
    k_launch, c_launch, s_launch = launch(trace.kernels), launch(trace.copies), launch(trace.sets)
    k_step = step_of(k_launch, step_start, step_end)
    c_step = step_of(c_launch, step_start, step_end)
    s_step = step_of(s_launch, step_start, step_end)
    r_step = step_of(trace.runtime["start"].to_numpy(np.int64), step_start, step_end)
    kernels = trace.kernels[k_step >= 0]
    copies = trace.copies[c_step >= 0]
    sets = trace.sets[s_step >= 0]
    if not (len(kernels) or len(copies) or len(sets)):
        raise TraceError(_no_gpu_work(trace, len(steps), source, flushed=trace is not unflushed))
    own_work = [(kernels, k_step[k_step >= 0]), (copies, c_step[c_step >= 0]), (sets, s_step[s_step >= 0])]
    w_start = int(step_start.min())
    w_end = int(max([step_end.max()] + [int(t["end"].max()) for t in (kernels, copies, sets) if len(t)]))
    n = len(steps)

    metrics, per_step = _work_metrics(own_work, n)
    slices = _utilization(trace, own_work, step_start, step_end, (w_start, w_end), metrics, per_step)
    _sync_metrics(trace, r_step, n, max(w_end - w_start, 1), slices, metrics, per_step)
    _communication(trace, kernels, k_step[k_step >= 0], n, metrics, per_step)
    metrics["collectives"] = _collectives(trace.collectives, step_start, step_end)
    metrics["window_us"] = _us(w_end - w_start)
    per_step["window_us"] = [_us(v) for v in slices]
    _host_metrics(trace, own_work, r_step, step_start, step_end, metrics, per_step)
    metrics["step_count"] = n
    metrics["step_gpu_time_us"] = _step_busy_us(own_work, n)
    peak = trace.metadata.get("peak_memory_allocated_bytes")
    metrics["peak_memory_allocated_bytes"] = int(peak) if peak is not None else None
    work = _work_table(own_work, [k_launch[k_step >= 0], c_launch[c_step >= 0], s_launch[s_step >= 0]])
    return Measurement(metrics, per_step, steps, source, (w_start, w_end), trace.gpu_name, trace.metadata, work,
                       trace.ranges, trace.runtime, trace.threads)


def _work_metrics(own_work: list[tuple[pd.DataFrame, np.ndarray]], n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The counts, times and bytes of the GPU work launched in the steps (kernels, copies of
    each kind, memsets), in total and per step: the metrics and per-step series, begun."""
    (kernels, k_steps), (copies, c_steps), (sets, s_steps) = own_work
    metrics: dict[str, Any] = {
        "kernel_count": int(len(kernels)),
        "kernel_time_us": _us(_dur(kernels).sum()),
        "kernels": _per_kernel(kernels),
    }
    per_step: dict[str, Any] = {
        "kernel_count": _bincount(k_steps, n),
        "kernel_time_us": _step_us(k_steps, n, _dur(kernels)),
    }
    _copy_metrics(copies, c_steps, n, metrics, per_step)
    heaviest = list(metrics["kernels"])[:PER_STEP_KERNELS]
    per_step["kernels"] = _per_kernel_steps(kernels, k_steps, n, heaviest)
    metrics["memset_count"] = int(len(sets))
    per_step["memset_count"] = _bincount(s_steps, n)
    return metrics, per_step


def _copy_metrics(copies: pd.DataFrame, c_steps: np.ndarray, n: int, metrics: dict, per_step: dict) -> None:
    """Per copy kind (``COPY_KINDS``): the copies' count, bytes, time and rate (GB/s)."""
    kinds = copies["kind"].astype(str).to_numpy()
    for kind in COPY_KINDS:
        sel = kinds == kind
        metrics[f"memcpy_{kind}_count"] = int(sel.sum())
        metrics[f"memcpy_{kind}_bytes"] = int(copies["bytes"].to_numpy()[sel].sum())
        metrics[f"memcpy_{kind}_time_us"] = _us(_dur(copies)[sel].sum())
        per_step[f"memcpy_{kind}_count"] = _bincount(c_steps[sel], n)
        per_step[f"memcpy_{kind}_bytes"] = _bincount(c_steps[sel], n, copies["bytes"].to_numpy()[sel])
        step_ns = _bincount(c_steps[sel], n, _dur(copies)[sel])
        per_step[f"memcpy_{kind}_time_us"] = [_us(v) for v in step_ns]
        metrics[f"memcpy_{kind}_gbps"] = _gbps(copies["bytes"].to_numpy()[sel].sum(), _dur(copies)[sel].sum())
        per_step[f"memcpy_{kind}_gbps"] = [_gbps(b, d) for b, d in zip(per_step[f"memcpy_{kind}_bytes"], step_ns)]


def _utilization(trace: Trace, own_work: list[tuple[pd.DataFrame, np.ndarray]], step_start: np.ndarray,
                 step_end: np.ndarray, window: tuple[int, int], metrics: dict, per_step: dict) -> np.ndarray:
    """How busy the GPU's kernels, its copy engines and its PCIe link were over the window
    and over each step's slice of it, and how much of the copies' time kernels hid
    (``overlap_efficiency``).  Returns the steps' slices' lengths, which the window tiles."""
    copies, c_steps = own_work[1]
    n, (w_start, w_end) = len(step_start), window
    width = max(w_end - w_start, 1)
    slice_lo, slice_hi = _step_slices(step_start, step_end, own_work)
    slices = slice_hi - slice_lo
    kernel_busy = merge_intervals(*_bounds(trace.kernels))
    copy_busy = merge_intervals(*_bounds(trace.copies))
    metrics["gpu_utilization"] = _ratio(union_length(*clip(*_bounds(trace.kernels), w_start, w_end)), width)
    per_step["gpu_utilization"] = _ratios(covered_length(kernel_busy, slice_lo, slice_hi), slices)
    metrics["copy_utilization"] = _ratio(union_length(*clip(*_bounds(trace.copies), w_start, w_end)), width)
    per_step["copy_utilization"] = _ratios(covered_length(copy_busy, slice_lo, slice_hi), slices)
    peak = pcie_peak_gbps(trace.metadata.get("pcie_link"))
    busier = [max(h, d) for h, d in zip(per_step["memcpy_htod_bytes"], per_step["memcpy_dtoh_bytes"])]
    metrics["pcie_utilization"] = _ratio(max(metrics["memcpy_htod_bytes"], metrics["memcpy_dtoh_bytes"]),
                                         peak * width) if peak else None
    per_step["pcie_utilization"] = [round(b / (peak * int(s)), 6) if peak and s > 0 else None
                                    for b, s in zip(busier, slices)]
    overlapped = covered_length(kernel_busy, *_bounds(copies))
    copy_time = int(_dur(copies).sum())
    metrics["overlap_efficiency"] = _ratio(int(overlapped.sum()), copy_time) if copy_time > 0 else None
    per_step["overlap_efficiency"] = _ratios(np.asarray(_bincount(c_steps, n, overlapped)),
                                             np.asarray(_bincount(c_steps, n, _dur(copies))))
    return slices


def _sync_metrics(trace: Trace, r_step: np.ndarray, n: int, width: int, slices: np.ndarray, metrics: dict,
                  per_step: dict) -> None:
    """The synchronizing calls made in the steps: their count and the share of the window
    (of each step's slice) the CPU spent in them."""
    sync_mask = (r_step >= 0) & _name_mask(trace.runtime["name"], is_sync_call)
    syncs = trace.runtime[sync_mask]
    metrics["sync_count"] = int(len(syncs))
    per_step["sync_count"] = _bincount(r_step[sync_mask], n)
    metrics["sync_wait_fraction"] = _ratio(int(_dur(syncs).sum()), width)
    per_step["sync_wait_fraction"] = _ratios(np.asarray(_bincount(r_step[sync_mask], n, _dur(syncs))), slices)


def _host_metrics(trace: Trace, own_work: list[tuple[pd.DataFrame, np.ndarray]], r_step: np.ndarray,
                  step_start: np.ndarray, step_end: np.ndarray, metrics: dict, per_step: dict) -> None:
    """What says whether the host kept the steps' times (docs/metrics.md): each step's
    longest host gap, the stalled steps, the GPU's clocks in each step and the host's speed
    read from its kernel-launch calls (``launch_call_us``)."""
    n = len(step_start)
    per_step["host_gap_us"] = [_us(v) for v in _host_gaps(trace, step_start, step_end, _launching_threads(trace))]
    per_step["stalled"] = stalled_steps(per_step, COUNTS)
    per_step |= step_clocks(trace.metadata.get("health"), trace.ranges, *_work_bounds(own_work, n)) or {}
    launches = (r_step >= 0) & _name_mask(trace.runtime["name"], is_launch_call)
    durations = _dur(trace.runtime)[launches]
    per_step["launch_call_us"] = _step_quantile_us(r_step[launches], n, durations)
    metrics["launch_call_us"] = _us(np.quantile(durations, LAUNCH_QUANTILE, method="lower")) if len(durations) else None


def _work_table(own_work: list[tuple[pd.DataFrame, np.ndarray]], launches: list[np.ndarray]) -> pd.DataFrame:
    """The attributed GPU work as one table (``Measurement.work``): each kernel, copy and
    memset with its kind, name, stream, step and the CPU start of its launching call."""
    (kernels, k_steps), (copies, c_steps), (sets, s_steps) = own_work
    k_launch, c_launch, s_launch = launches
    kinds = copies["kind"].astype(str).to_numpy()
    return pd.concat([
        pd.DataFrame({"start": kernels["start"], "end": kernels["end"], "kind": "kernel",
                      "name": kernels["name"].astype(str), "stream": kernels["stream"], "step": k_steps,
                      "launch": k_launch}),
        pd.DataFrame({"start": copies["start"], "end": copies["end"], "kind": kinds,
                      "name": "memcpy " + pd.Series(kinds, index=copies.index, dtype=object),
                      "stream": copies["stream"], "step": c_steps, "launch": c_launch}),
        pd.DataFrame({"start": sets["start"], "end": sets["end"], "kind": "memset", "name": "memset",
                      "stream": sets["stream"], "step": s_steps, "launch": s_launch}),
    ], ignore_index=True)


def _no_gpu_work(trace: Trace, steps: int, source: str, flushed: bool) -> str:
    """What a trace (less its L2 flushes, the harness's work; FLUSHED: it had some) without GPU
    work in its steps lacks: any GPU work at all (a trace of CPU activity alone), or work
    launched in its steps (it holds some, launched before, after or between them)."""
    held = len(trace.kernels) + len(trace.copies) + len(trace.sets)
    what = f"{trace.file or 'the trace'}: no GPU work to measure"
    aside = ", its L2 flushes aside" if flushed else ""
    if not held:
        return f"{what}: it holds no kernel, memcpy or memset on any GPU{aside}"
    return f"{what}: none of its {held} kernels, memcpys and memsets{aside} was launched in its {steps} " \
           f"measured step(s) (from {source})"


def _collectives(calls: pd.DataFrame, step_start: np.ndarray, step_end: np.ndarray) -> dict[str, dict]:
    """The collective calls made in the measured steps (by their CPU start), per collective:
    ``count`` and ``bytes`` (their inputs' bytes; null where the trace does not record a call's
    size), in name order."""
    inside = calls[step_of(calls["start"].to_numpy(np.int64), step_start, step_end) >= 0]
    out = {}
    for name, own in inside.groupby("name", observed=True, sort=True):
        size = own["bytes"].to_numpy(np.int64)
        out[str(name)] = {"count": int(len(own)), "bytes": None if (size < 0).any() else int(size.sum())}
    return out


def _communication(trace: Trace, kernels: pd.DataFrame, steps: np.ndarray, n: int, metrics: dict,
                   per_step: dict) -> None:
    """The communication metrics (docs/metrics.md): the attributed NCCL kernels, their time,
    how much of their union every other kernel of the trace covers (``comm_compute_overlap``,
    as Holistic Trace Analysis defines it) and what none covers (``exposed_comm_us``)."""
    comm = _name_mask(kernels["name"], is_comm_kernel)
    others = ~_name_mask(trace.kernels["name"], is_comm_kernel)
    compute = merge_intervals(*_bounds(trace.kernels[others]))
    starts, ends = _bounds(kernels[comm])
    comm_steps = steps[comm]
    metrics["comm_kernel_count"] = int(comm.sum())
    per_step["comm_kernel_count"] = _bincount(comm_steps, n)
    metrics["comm_time_us"] = _us((ends - starts).sum())
    lo, hi = merge_intervals(starts, ends)
    union, hidden = int((hi - lo).sum()), int(covered_length(compute, lo, hi).sum())
    metrics["comm_compute_overlap"] = _ratio(hidden, union) if union else None
    metrics["exposed_comm_us"] = _us(union - hidden)
    if not comm.any():  # no series of zeros to judge (and to widen the test's correction for)
        return
    per_step["comm_time_us"] = _step_us(comm_steps, n, ends - starts)
    step_union, step_hidden = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i in np.unique(comm_steps):  # the steps that communicated: few, each its own union
        lo, hi = merge_intervals(starts[comm_steps == i], ends[comm_steps == i])
        step_union[i], step_hidden[i] = (hi - lo).sum(), covered_length(compute, lo, hi).sum()
    per_step["comm_compute_overlap"] = _ratios(step_hidden, step_union)
    per_step["exposed_comm_us"] = [_us(v) for v in step_union - step_hidden]



def _name_mask(names: pd.Series, test) -> np.ndarray:
    """``test(name)`` for each call, evaluated once per distinct name."""
    cats = names.cat.categories
    hit = np.array([test(str(c)) for c in cats], dtype=bool)
    codes = names.cat.codes.to_numpy()
    return hit[codes] if len(cats) else np.zeros(len(names), dtype=bool)


def _step_quantile_us(steps: np.ndarray, n: int, dur_ns: np.ndarray) -> list[float | None]:
    """Per step, the ``LAUNCH_QUANTILE`` of its durations (the lower of the two middle
    values, a real call's duration), in microseconds; None for a step without one."""
    order = np.lexsort((dur_ns, steps))
    steps, dur_ns = steps[order], dur_ns[order]
    first = np.searchsorted(steps, np.arange(n), side="left")
    count = np.searchsorted(steps, np.arange(n), side="right") - first
    at = first + np.floor(LAUNCH_QUANTILE * (count - 1)).astype(np.int64)
    return [_us(dur_ns[i]) if c else None for i, c in zip(at, count)]


def _per_kernel(kernels: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Count and total time per kernel name, longest total first (ties by name)."""
    if not len(kernels):
        return {}
    grouped = (
        pd.DataFrame({"name": kernels["name"].astype(str).to_numpy(), "dur": _dur(kernels)})
        .groupby("name", sort=True)["dur"].agg(["count", "sum"])
        .reset_index()
        .sort_values(["sum", "name"], ascending=[False, True], kind="stable")
    )
    return {
        name: {"count": int(count), "time_us": _us(total)}
        for name, count, total in grouped.itertuples(index=False)
    }


def _step_busy_us(pairs: list[tuple[pd.DataFrame, np.ndarray]], n: int) -> list[float]:
    """Per step: length of the union of the step's own GPU work (kernels, copies, sets)."""
    starts = np.concatenate([t["start"].to_numpy(np.int64) for t, _ in pairs])
    ends = np.concatenate([t["end"].to_numpy(np.int64) for t, _ in pairs])
    steps = np.concatenate([s for _, s in pairs]).astype(np.int64)
    return [_us(b) for b in union_length_per_group(starts, ends, steps, n)]


def _work_bounds(pairs: list[tuple[pd.DataFrame, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the first start and the last end of its own GPU work; -1 for both where it has none."""
    first, last = np.full(n, INT64_MAX, np.int64), np.full(n, -1, np.int64)
    for table, steps in pairs:
        if len(table):
            np.minimum.at(first, steps, table["start"].to_numpy(np.int64))
            np.maximum.at(last, steps, table["end"].to_numpy(np.int64))
    return np.where(last >= 0, first, -1), last


def _bounds(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)


def _dur(table: pd.DataFrame) -> np.ndarray:
    return table["end"].to_numpy(np.int64) - table["start"].to_numpy(np.int64)


def _per_kernel_steps(kernels: pd.DataFrame, steps: np.ndarray, n: int, names: list[str]) -> dict[str, list[float]]:
    """Per-step time of each of the given kernel names."""
    if not names:
        return {}
    name_of = kernels["name"].astype(str).to_numpy()
    dur = _dur(kernels)
    return {name: _step_us(steps[name_of == name], n, dur[name_of == name]) for name in names}


def _step_us(steps: np.ndarray, n: int, dur_ns: np.ndarray) -> list[float]:
    """Per step, the sum of the durations (ns) of its rows, in microseconds."""
    return [_us(v) for v in _bincount(steps, n, dur_ns)]


def _step_slices(step_start: np.ndarray, step_end: np.ndarray, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Each step's slice of the window, [e_(i-1), e_i): e_i is the later of step i's CPU end
    and its own GPU work's last end, kept non-decreasing, and e_(-1) = W0.  The slices
    tile W exactly; a step's slice is how far it moved the window's end."""
    end = step_end.copy()
    for table, steps in pairs:
        if len(table):
            np.maximum.at(end, steps, table["end"].to_numpy(np.int64))
    reach = np.maximum.accumulate(end)
    return np.concatenate(([step_start[0]], reach[:-1])), reach


def _launching_threads(trace: Trace) -> np.ndarray:
    """The threads whose runtime calls launched GPU work in the trace."""
    launched = trace.launch_ids()
    calls = trace.runtime
    return np.unique(calls["tid"].to_numpy(np.int64)[np.isin(calls["correlation"].to_numpy(np.int64), launched)])


def _host_gaps(trace: Trace, step_start: np.ndarray, step_end: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Per step, the longest time in which the launching threads made no CUDA call: within
    [previous step's CPU end, this step's CPU end] (a stall between two steps delays the
    second), counted from the first step's start for the first."""
    calls = trace.runtime[np.isin(trace.runtime["tid"].to_numpy(np.int64), threads)]
    lo = np.concatenate(([step_start[0]], step_end[:-1]))
    return longest_gap(merge_intervals(*_bounds(calls)), lo, step_end)


def _bincount(steps: np.ndarray, n: int, weights: np.ndarray | None = None) -> list[int]:
    if weights is None:
        return [int(v) for v in np.bincount(steps.astype(np.int64), minlength=n)[:n]]
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, steps.astype(np.int64), weights.astype(np.int64))
    return [int(v) for v in out]


def _us(ns: int | np.integer) -> float:
    """Nanoseconds to microseconds; exact to the nanosecond in the decimal printout."""
    return round(int(ns) / 1000, 3)


def pcie_peak_gbps(link: Any) -> float | None:
    """One direction's peak of a PCIe link, ``{"generation": G, "width": W}`` as recorded from
    NVML (``capture.nvml.pcie_link``), in GB/s: W lanes at ``PCIE_LANE_GBPS[G]``; None
    without a link or of a generation not in the table."""
    if not isinstance(link, dict) or link.get("generation") not in PCIE_LANE_GBPS:
        return None
    return PCIE_LANE_GBPS[link["generation"]] * link["width"]


def _gbps(nbytes: int | np.integer, dur_ns: int | np.integer) -> float | None:
    """Bytes over nanoseconds: GB/s (1e9 bytes a second), to 4 significant digits (a 4-byte
    copy's 0.0027 GB/s keeps its digits, a 1 us copy of 1 byte its 0.001); None when nothing moved."""
    return float(f"{int(nbytes) / int(dur_ns):.4g}") if nbytes > 0 and dur_ns > 0 else None


def _ratio(num: float, den: float) -> float:
    return round(num / den, 6) if den > 0 else 0.0


def _ratios(num: np.ndarray, den: np.ndarray) -> list[float | None]:
    """Per step, num / den rounded like every ratio; None where den is 0 (nothing to divide)."""
    return [round(int(a) / int(b), 6) if b > 0 else None for a, b in zip(num, den)]
