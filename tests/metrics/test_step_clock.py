"""Each measured step's SM clock and clock-event reasons, from the NVML samples a trace keeps.

The real trace (tests/data/clock, ``record_traces.py clock``) was recorded on an H200 by the
plugin's capture around steps of 4 to 20 bf16 8192x8192 matmuls (5 to 32 ms of GPU work a
step): the card's power cap lowered its SM clock from 1980 to 1515 MHz within the run (NVML's
reason 0x4, software power cap, no slowdown).  The expected values are read from the trace
with the stdlib (``helpers.naive``), following docs/metrics.md's definition literally."""

import copy
import gzip
import json
import re
import statistics
from pathlib import Path

import pytest

from helpers.naive import Naive, ns
from pytest_gpuprof.metrics.clock import host_to_trace_ns
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto

TRACE = Path(__file__).parents[1] / "data" / "clock" / "power_capped.pt.trace.json.gz"


def naive_clocks(path: Path, health: dict) -> tuple[list, list]:
    """docs/metrics.md's per-step SM clock and clock-event reasons, the slow way."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    starts = {int(e["name"][5:]): ns(e["ts"]) for e in events
              if e.get("cat") == "user_annotation" and re.fullmatch(r"step_\d+", e["name"])}
    anchors = health["step_anchors_ns"]
    offset = statistics.median_low(anchors[i] - s for i, s in starts.items())
    samples = sorted((t - offset, mhz, why) for t, mhz, why in health["clock_samples"])
    naive = Naive(path)
    clocks, reasons = [], []
    for i in range(len(naive.steps)):
        own = [(s, e) for _, s, e, _, step in naive.kernels + naive.copies + naive.sets if step == i]
        lo, hi = min(s for s, _ in own), max(e for _, e in own)
        picked = [x for x in samples if lo <= x[0] <= hi]
        if not picked:  # the last sample before the span and the first after it
            picked = [x for x in samples if x[0] < lo][-1:] + [x for x in samples if x[0] > hi][:1]
        clocks.append(round(sum(x[1] for x in picked) / len(picked), 1))
        bits = 0
        for x in picked:
            bits |= x[2]
        reasons.append(bits)
    return clocks, reasons


def test_each_step_gets_the_clock_of_its_samples():
    trace = load_kineto(TRACE)
    per_step = measure(trace).per_step
    clocks, reasons = naive_clocks(TRACE, trace.metadata["health"])
    assert per_step["sm_clock_mhz"] == clocks and per_step["clock_events"] == reasons
    # the power cap is there: the clock fell within the run, and no step was slowed down
    assert max(clocks) == 1980 and min(clocks) < 1600 and 4 in reasons
    assert not any(r & 0xE8 for r in reasons)


def test_a_step_shorter_than_the_sampling_period_takes_the_nearest_samples():
    """Every sample but one far before the steps and one far after them dropped: each step
    lies between the two, and its clock is their mean, its reasons theirs together."""
    trace = copy.copy(load_kineto(TRACE))
    health = trace.metadata["health"]
    first, last = health["clock_samples"][0], health["clock_samples"][-1]
    kept = [[first[0] - 10**9, 1800, 1], [last[0] + 10**9, 1500, 4]]
    trace.metadata = {**trace.metadata, "health": {**health, "clock_samples": kept}}
    per_step = measure(trace).per_step
    assert per_step["sm_clock_mhz"] == [1650.0] * 40 and per_step["clock_events"] == [5] * 40


def test_the_samples_are_put_on_the_trace_clock_through_the_anchors():
    """Host clocks moved by any offset give the same steps' clocks: only anchor minus range
    start counts, not the trace's epoch."""
    trace = load_kineto(TRACE)
    health = trace.metadata["health"]
    moved = copy.copy(trace)
    shift = 123_456_789_012
    moved.metadata = {**trace.metadata, "health": {
        **health, "clock_samples": [[t + shift, mhz, why] for t, mhz, why in health["clock_samples"]],
        "step_anchors_ns": [t + shift for t in health["step_anchors_ns"]]}}
    assert host_to_trace_ns(moved.metadata["health"]["step_anchors_ns"], trace.ranges) == \
        host_to_trace_ns(health["step_anchors_ns"], trace.ranges) + shift
    before, after = measure(trace).per_step, measure(moved).per_step
    assert after["sm_clock_mhz"] == before["sm_clock_mhz"] and after["clock_events"] == before["clock_events"]


@pytest.mark.parametrize("dropped", ["clock_samples", "step_anchors_ns"])
def test_a_trace_recorded_before_the_samples_were_kept_says_no_step_clock(dropped):
    trace = copy.copy(load_kineto(TRACE))
    trace.metadata = {**trace.metadata, "health": {k: v for k, v in trace.metadata["health"].items() if k != dropped}}
    per_step = measure(trace).per_step
    assert "sm_clock_mhz" not in per_step and "clock_events" not in per_step
