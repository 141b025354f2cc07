"""A small timeline sample of one measured step, kept with baselines and results so
that reports can draw the baseline run's GPU timeline beside the current one
without the old trace.

The sample is the step whose GPU busy time is the median of the run's steps that
have GPU work (a step without any has nothing to draw), capped at a number of events,
with the annotation ranges (NVTX, user annotations, the steps' own) and the CUDA runtime
calls of the host threads that overlap it, each capped alike.  Events, ranges and calls
are stored as one string each (``lane kind start dur name;``, ``thread depth start end
...;``, ``thread start dur name;``) so that a refreshed baseline changes a few lines of
its JSON, not thousands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..options import default
from .measure import Measurement, is_sync_call

KINDS = ("kernel", "htod", "dtoh", "dtod", "ptop", "htoh", "other", "memset")


def sample(m: Measurement, cap: int = default("timeline-events"), calls: pd.DataFrame | None = None,
           thread_names: Mapping[int, str] | None = None) -> dict[str, Any] | None:
    """The median step's attributed GPU work, times relative to its first GPU activity
    (the GPU may run well behind the CPU, so the step's CPU start is no origin); with
    ``calls`` (the trace's runtime calls: start, end, name, tid) the host threads' calls in
    the step, their threads named by ``thread_names`` (thread id -> name) where it has them."""
    if cap <= 0 or m.work is None or not len(m.work):
        return None
    busy = np.asarray(m.metrics["step_gpu_time_us"])
    working = np.unique(m.work["step"].to_numpy())  # the steps with GPU work, in order
    step = int(working[np.argsort(busy[working], kind="stable")[len(working) // 2]])
    work = m.work[m.work["step"] == step].sort_values("start", kind="stable")
    truncated = len(work) > cap
    work = work.head(cap)
    origin = int(work["start"].min())
    end = int(work["end"].max())
    streams = sorted(int(s) for s in work["stream"].unique())
    names = sorted(set(work["name"]))
    lane = {s: i for i, s in enumerate(streams)}
    code = {n: i for i, n in enumerate(names)}
    events = ";".join(
        f"{lane[int(r.stream)]} {KINDS.index(r.kind)} {int(r.start) - origin} {int(r.end - r.start)} {code[r.name]}"
        for r in work.itertuples(index=False)
    )
    cpu = m.steps.iloc[step]  # the step's own range, on the CPU
    lo, hi = int(cpu["start"]), int(cpu["end"])
    in_step = _overlapping(m.ranges, lo, hi)
    kept_calls, calls_cut = _step_calls(calls, lo, hi, cap)
    threads = sorted({int(t) for t in in_step["tid"]} | {int(t) for t in kept_calls["tid"]})
    ranges, range_names, cut = _ranges(in_step, threads, work, origin, cap)
    out = {
        "step": step,
        "span_ns": end - origin,
        "streams": streams,
        "names": names,
        "kinds": list(KINDS),
        "events": events,
        "threads": threads,
        "range_names": range_names,
        "ranges": ranges,
        "truncated": truncated or cut or calls_cut,
    }
    if calls is not None:
        call_names = sorted(set(kept_calls["name"]))
        call_code = {n: i for i, n in enumerate(call_names)}
        out["thread_names"] = [(thread_names or {}).get(t, "") for t in threads]
        out["call_names"] = call_names
        out["calls"] = ";".join(
            f"{threads.index(int(r.tid))} {int(r.start) - origin} {int(r.end - r.start)} {call_code[r.name]}"
            for r in kept_calls.itertuples(index=False))
    return out


def _overlapping(table: pd.DataFrame | None, lo: int, hi: int) -> pd.DataFrame:
    """The rows of a table of ranges (start, end, name, tid) that overlap [lo, hi]."""
    if table is None:
        return pd.DataFrame({"start": [], "end": [], "name": [], "tid": []})
    return table[(table["start"] <= hi) & (table["end"] >= lo)]


def _step_calls(calls: pd.DataFrame | None, lo: int, hi: int, cap: int) -> tuple[pd.DataFrame, bool]:
    """The runtime calls that start in the step's CPU time [lo, hi], by start, and whether more
    than ``cap`` were cut: the synchronizations are kept first, then the earliest calls."""
    found = _overlapping(calls, lo, hi)
    found = found[found["start"] >= lo].astype({"name": str})
    if len(found) <= cap:
        return found.sort_values("start", kind="stable"), False
    syncs = found["name"].map(is_sync_call).to_numpy(bool)
    order = np.lexsort((found["start"].to_numpy(np.int64), ~syncs))[:cap]
    return found.iloc[np.sort(order)].sort_values("start", kind="stable"), True


def _ranges(table: pd.DataFrame, threads: list[int], work: pd.DataFrame, origin: int,
            cap: int) -> tuple[str, list[str], bool]:
    """The ranges of ``table`` (those overlapping the step's CPU time), as ``thread depth
    start end gpu_start gpu_end name;``, and whether more than ``cap`` were cut (the
    deepest, then the latest, go first).  Times are from ``origin``; thread indexes
    ``threads``, name the names returned.  A range's depth is how many of its thread's
    ranges are open when it starts (0: outermost); its GPU times span the sampled work
    launched inside it (as Nsight Systems projects NVTX ranges onto the GPU), ``-`` when it
    launched none."""
    if not len(table):
        return "", [], False
    tid = table["tid"].to_numpy(np.int64)
    start, stop = table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)
    name = table["name"].astype(str).to_numpy()
    order = np.lexsort((-stop, start, tid))  # by thread, then start, the longer first
    tid, start, stop, name = tid[order], start[order], stop[order], name[order]
    first = np.unique(tid, return_index=True)[1]
    thread = np.searchsorted(threads, tid)
    # open at its start: its thread's earlier ranges less those ended by then (an empty
    # range counts as 1 ns long, so it never ends before one that starts with it)
    depth = np.zeros(len(tid), dtype=np.int64)
    for a, b in zip(first, list(first[1:]) + [len(tid)]):
        ends = np.sort(np.maximum(stop[a:b], start[a:b] + 1))
        depth[a:b] = np.arange(b - a) - np.searchsorted(ends, start[a:b], side="right")
    cut = len(tid) > cap
    shown = np.sort(np.lexsort((start, depth))[:cap])
    by_launch = work.sort_values("launch", kind="stable")
    launch = by_launch["launch"].to_numpy(np.int64)
    gpu_start, gpu_end = by_launch["start"].to_numpy(np.int64) - origin, by_launch["end"].to_numpy(np.int64) - origin
    first_work = np.searchsorted(launch, start[shown], side="left")
    last_work = np.searchsorted(launch, stop[shown], side="right")
    names = sorted(set(name[shown]))
    code = {n: i for i, n in enumerate(names)}
    text = ";".join(
        f"{thread[i]} {depth[i]} {start[i] - origin} {stop[i] - origin} "
        + (f"{gpu_start[a:b].min()} {gpu_end[a:b].max()}" if b > a else "- -") + f" {code[name[i]]}"
        for i, a, b in zip(shown, first_work, last_work)
    )
    return text, names, cut


def events(sample_: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The sample's events as dicts: lane, stream, kind, start_ns, dur_ns, name."""
    out = []
    for item in filter(None, sample_["events"].split(";")):
        lane, kind, start, dur, name = (int(v) for v in item.split())
        out.append({"lane": lane, "stream": sample_["streams"][lane], "kind": sample_["kinds"][kind],
                    "start_ns": start, "dur_ns": dur, "name": sample_["names"][name]})
    return out


def ranges(sample_: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The sample's ranges as dicts: thread (its id), depth, start_ns, end_ns, gpu_start_ns,
    gpu_end_ns (None when it launched no sampled work), name; none in a sample stored
    before ranges were kept."""
    out = []
    for item in filter(None, sample_.get("ranges", "").split(";")):
        thread, depth, start, end, gpu_start, gpu_end, name = item.split()
        if int(thread) < 0 or int(name) < 0:
            raise ValueError(f"negative index in range {item!r}")
        gpu = (None, None) if gpu_start == "-" else (int(gpu_start), int(gpu_end))
        out.append({"thread": sample_["threads"][int(thread)], "depth": int(depth), "start_ns": int(start),
                    "end_ns": int(end), "gpu_start_ns": gpu[0], "gpu_end_ns": gpu[1],
                    "name": sample_["range_names"][int(name)]})
    return out


def calls(sample_: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The sample's runtime calls as dicts: thread (its id), thread_name ("" when the trace
    names none), start_ns, dur_ns, name; none in a sample stored before calls were kept."""
    out = []
    for item in filter(None, sample_.get("calls", "").split(";")):
        thread, start, dur, name = (int(v) for v in item.split())
        if thread < 0 or name < 0:
            raise ValueError(f"negative index in call {item!r}")
        out.append({"thread": sample_["threads"][thread], "thread_name": sample_["thread_names"][thread],
                    "start_ns": start, "dur_ns": dur, "name": sample_["call_names"][name]})
    return out
