"""The measured steps of a trace and the step each GPU work and runtime call belongs to.

The steps come from the trace itself (``ProfilerStep#N`` ranges, else ``step_N`` ranges,
else the whole trace), so a saved trace reproduces every number.  GPU work belongs to the
step in which its launching runtime call started (matched by correlation id), even when it
runs after the step closed; the L2 flushes between steps (the harness's work) belong to none.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from ..capture.ranges import L2_FLUSH_RANGE, STEP_RANGE_PREFIX
from ..trace.model import Trace

_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_USER_STEP = re.compile(rf"^{STEP_RANGE_PREFIX}(\d+)$")


def find_steps(trace: Trace) -> tuple[pd.DataFrame, str]:
    """The measured steps, sorted by start: ProfilerStep#N, else step_N, else the whole trace."""
    names = trace.ranges["name"].astype(str)
    for pattern, source in ((_PROFILER_STEP, "ProfilerStep#N"), (_USER_STEP, "step_N")):
        found = trace.ranges[names.str.match(pattern.pattern)]
        if len(found):
            steps = found[["start", "end"]].assign(name=names[found.index].to_numpy())
            return steps.sort_values("start", kind="stable").reset_index(drop=True), source
    span = trace.span()
    if span is None:
        raise ValueError("the trace holds no events")
    return pd.DataFrame({"start": [span[0]], "end": [span[1]], "name": ["trace"]}), "whole trace"


def without_l2_flushes(trace: Trace) -> Trace:
    """The trace less the L2 flushes between steps (``flush_l2``): the runtime calls made
    inside an ``L2_FLUSH_RANGE`` range, on the range's own thread, and the GPU work they
    launched.  The flush is the harness's work, not the test's; the GPU time it took
    counts as idle."""
    ranges = trace.ranges
    flushes = ranges[ranges["name"].astype(str) == L2_FLUSH_RANGE]
    if not len(flushes):
        return trace
    calls = trace.runtime
    starts, tids = calls["start"].to_numpy(np.int64), calls["tid"].to_numpy(np.int64)
    inside = np.zeros(len(calls), dtype=bool)
    for tid, own in flushes.groupby("tid"):
        own = own.sort_values("start")
        mine = tids == tid
        inside[mine] = step_of(starts[mine], own["start"].to_numpy(np.int64), own["end"].to_numpy(np.int64)) >= 0
    launched = calls["correlation"].to_numpy(np.int64)[inside]
    launched = launched[launched > 0]

    def keep(table: pd.DataFrame) -> pd.DataFrame:
        return table[~np.isin(table["correlation"].to_numpy(np.int64), launched)].reset_index(drop=True)

    return dataclasses.replace(
        trace, kernels=keep(trace.kernels), copies=keep(trace.copies), sets=keep(trace.sets),
        runtime=calls[~inside].reset_index(drop=True),
    )


def launch_times(trace: Trace):
    """Function giving, for a GPU table, the CPU start of each row's launching call.

    A row whose correlation id matches no runtime call in the trace was launched
    before the capture began (a warm-up kernel still running): it gets -1 and
    belongs to no step.  A trace with no runtime calls at all (GPU activity
    only) falls back to each row's GPU start.
    """
    rt = trace.runtime[trace.runtime["correlation"] > 0]
    corr = rt["correlation"].to_numpy(np.int64)
    order = np.argsort(corr, kind="stable")
    corr, starts = corr[order], rt["start"].to_numpy(np.int64)[order]

    def launch(table: pd.DataFrame) -> np.ndarray:
        if len(corr) == 0:
            return table["start"].to_numpy(np.int64)
        want = table["correlation"].to_numpy(np.int64)
        i = np.minimum(np.searchsorted(corr, want), len(corr) - 1)
        return np.where(corr[i] == want, starts[i], -1)

    return launch


def step_of(times: np.ndarray, step_start: np.ndarray, step_end: np.ndarray) -> np.ndarray:
    """Index of the step whose [start, end] holds each time, -1 if none (or time -1)."""
    i = np.searchsorted(step_start, times, side="right") - 1
    j = np.maximum(i, 0)
    return np.where((i >= 0) & (times >= 0) & (times <= step_end[j]), i, -1)

