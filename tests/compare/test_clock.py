"""The GPU's clock in the judgment: steps run at a throttled clock are left out and said, and a
kernel time that rose while the SM clock fell is judged in cycles (time x SM clock).

Driven through the judge with the CNN's recorded trace (``helpers.cnn_judged``), its metadata
given NVML samples: one in the middle of each step's GPU work, worked out from the trace by
``helpers.naive``, and each step's anchor at its ``step_N`` range's start, as the capture
records them (``capture.nvml.NvmlSampler``)."""

import copy
import gzip
import json
import statistics

import pytest

from helpers.cnn_judged import CARD, NODE, TRACE, heaviest, judged, kernel_verdict, on_card, record, slowed
from helpers.naive import Naive, ns
from pytest_gpuprof.compare.status import State, Status
from pytest_gpuprof.trace.kineto import load_kineto

#: The host's wall clock minus the trace's: any offset (the anchors carry it).
OFFSET = 1_790_000_000_000_000_000
HARDWARE_THERMAL, POWER_CAP = 0x40, 0x4


@pytest.fixture(scope="module")
def naive():
    return Naive(TRACE)


@pytest.fixture(scope="module")
def trace():
    return load_kineto(TRACE)


def clocked(trace, naive, mhz, reasons=None):
    """The trace with NVML samples: step i's, in the middle of its own GPU work (``naive``), at
    ``mhz[i]`` MHz (or ``mhz`` in every step) with the reasons ``reasons[i]`` (none)."""
    steps = len(naive.steps)
    mhz = mhz if isinstance(mhz, list) else [mhz] * steps
    reasons = reasons or [0] * steps
    samples = []
    for i in range(steps):
        own = [(s, e) for _, s, e, _, step in naive.kernels + naive.copies + naive.sets if step == i]
        middle = (min(s for s, _ in own) + max(e for _, e in own)) // 2
        samples.append([middle + OFFSET, mhz[i], reasons[i]])
    ranges = trace.ranges[trace.ranges.name.astype(str).str.fullmatch(r"step_\d+")]
    starts = dict(zip(ranges.name.astype(str), ranges.start))
    anchors = [int(starts[f"step_{i}"]) + OFFSET for i in range(steps)]
    out = on_card(trace, CARD)
    out.metadata = {**out.metadata, "health": {
        **trace.metadata["health"], "sm_clock_mhz": [min(mhz), max(mhz)], "samples": steps,
        "clock_samples": samples, "step_anchors_ns": anchors}}
    return out


# --- throttled steps ------------------------------------------------------------------

def test_steps_run_at_a_throttled_clock_are_left_out_and_said(trace, naive, tmp_path):
    """Steps 2 and 5 ran hot (hardware thermal slowdown, 1410 MHz) and their kernels 30% slower:
    they are left out of the judged steps, the note says how many and why, and the test passes
    where the whole run was unstable before (a slowdown reason anywhere in it)."""
    hot = [2, 5]
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    run = copy.copy(trace)
    k = run.kernels = trace.kernels.copy()
    in_hot = k.correlation.isin(_correlations(naive, hot))
    k.loc[in_hot, "end"] = k.start[in_hot] + ((k.end[in_hot] - k.start[in_hot]) * 1.3).round().astype("int64")
    run = clocked(run, naive, [1410 if i in hot else 1980 for i in range(10)],
                  [HARDWARE_THERMAL if i in hot else 0 for i in range(10)])
    result = judged(baselines, run)
    assert result.per_step["clock_events"] == [HARDWARE_THERMAL if i in hot else 0 for i in range(10)]
    assert ("2 of 10 steps ran at a throttled clock (hardware thermal slowdown; SM clock down to 1410 MHz): "
            "left out of the time and ratio verdicts") in result.notes
    # the kernel time judged is the median of the 8 steps left, read from the trace the slow way
    kept = [sum(e - s for _, s, e, _, step in naive.kernels if step == i) / 1000 for i in range(10) if i not in hot]
    assert result.distribution["kernel_time_us"]["n"] == 8
    assert result.distribution["kernel_time_us"]["median"] == pytest.approx(statistics.median(kept), abs=1e-3)
    assert result.status == Status.PASSED and not result.health


def test_most_steps_throttled_leave_too_few_to_judge(trace, naive, tmp_path):
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    run = clocked(trace, naive, 1410, [HARDWARE_THERMAL] * 6 + [0] * 4)
    result = judged(baselines, run)
    assert result.health == ["6 of 10 steps ran at a throttled clock: too few steady steps to judge"]
    assert result.status in (Status.PASSED, Status.UNSTABLE)  # nothing regressed on the 4 left


def test_the_power_cap_is_no_throttle(trace, naive, tmp_path):
    """NVML's software power cap (and idle, application clocks) lowers the clock the test's own
    load asks for: no step is left out for it."""
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    result = judged(baselines, clocked(trace, naive, 1980, [POWER_CAP] * 10))
    assert result.distribution["kernel_time_us"]["n"] == 10 and not any("throttled" in n for n in result.notes)


# --- kernel times in cycles -----------------------------------------------------------

def test_a_kernel_slower_by_as_much_as_the_clock_fell_is_the_clock(trace, naive, tmp_path):
    """The heaviest kernel 4% slower while every step's SM clock fell as much (1980 -> 1904 MHz):
    in cycles it did not move, so it is not a regression; the verdict and the test say the clock."""
    name = heaviest(trace)
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    low = round(1980 / 1.04)  # NVML reads whole MHz
    result = judged(baselines, clocked(slowed(trace, 1.04, name), naive, low))
    v = kernel_verdict(result, name)
    cycles = 1.04 * low / 1980 - 1  # time x clock against the baseline's: worked out here, about -0.0%
    assert abs(cycles) < 0.001
    assert v.status == State.UNSTABLE and v.change() == "+4.0%" and v.margin == pytest.approx(0.02)
    assert f"in cycles (time x SM clock) {cycles:+.1%}, within the margin: the SM clock, not the code" in v.evidence
    clock = f"SM clock {low:g} MHz, {1 - low / 1980:.1%} lower than the baseline's 1980 MHz"
    assert clock == "SM clock 1904 MHz, 3.8% lower than the baseline's 1980 MHz" and clock in v.evidence
    assert result.status == Status.UNSTABLE
    assert f"the {clock}: 1 kernel time(s) rose but not in cycles (time x SM clock), the clock's doing, not the " \
           "code's" in result.slower_machine


def test_a_kernel_slower_at_an_unchanged_clock_still_regresses(trace, naive, tmp_path):
    name = heaviest(trace)
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    result = judged(baselines, clocked(slowed(trace, 1.04, name), naive, 1980))
    v = kernel_verdict(result, name)
    assert v.status == State.REGRESSED and result.status == Status.FAILED
    assert "cycles" not in v.evidence and not result.slower_machine


def test_a_kernel_slower_than_the_clock_explains_regresses_in_cycles(trace, naive, tmp_path):
    """The clock fell 1% and the kernel took 4% longer: +3% in cycles, beyond the 2% margin."""
    name = heaviest(trace)
    baselines = record(tmp_path, [clocked(trace, naive, 1980)] * 3)
    low = round(1980 * 0.99)
    result = judged(baselines, clocked(slowed(trace, 1.04, name), naive, low))
    v = kernel_verdict(result, name)
    assert v.status == State.REGRESSED and result.status == Status.FAILED and v.margin == pytest.approx(0.02)
    assert f"in cycles (time x SM clock) {1.04 * low / 1980 - 1:+.1%}: slower at the baseline's clock too" in v.evidence


def test_a_baseline_recorded_before_the_clocks_were_kept_judges_times_alone(trace, naive, tmp_path):
    """The baseline's runs kept no step clocks (recorded before): the 4% stays a regression."""
    name = heaviest(trace)
    old = clocked(trace, naive, 1980)
    old.metadata = {**old.metadata, "health": {k: v for k, v in old.metadata["health"].items()
                                               if k not in ("clock_samples", "step_anchors_ns")}}
    baselines = record(tmp_path, [old] * 3)
    result = judged(baselines, clocked(slowed(trace, 1.04, name), naive, round(1980 / 1.04)))
    assert kernel_verdict(result, name).status == State.REGRESSED and result.status == Status.FAILED


# --- kept with the run and the baseline -----------------------------------------------

def test_the_baseline_and_the_results_document_keep_each_steps_clock(trace, naive, tmp_path):
    from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file
    from pytest_gpuprof.compare.evaluate import TestResult
    from pytest_gpuprof.compare.results_doc import check
    from pytest_gpuprof.report.document import results_document

    baselines = record(tmp_path / "b", [clocked(trace, naive, 1980)])
    (entry,) = BaselineFile(baseline_file(baselines, NODE)).load()["tests"][NODE].values()
    assert entry["per_step"]["sm_clock_mhz"] == [1980.0] * 10 and entry["per_step"]["clock_events"] == [0] * 10
    doc = json.loads(json.dumps(results_document([judged(baselines, clocked(trace, naive, 1904))], {}, "torch",
                                                 tmp_path)))
    check(doc)
    assert TestResult.from_json(doc["tests"][0]).per_step["sm_clock_mhz"] == [1904.0] * 10
    doc["tests"][0]["per_step"]["clock_events"][3] = -1
    with pytest.raises(ValueError, match=r"per_step\.clock_events\[3\] must be an integer in \[0, 2\*\*63\) "
                                         r"or null, got -1"):
        check(doc)


def _correlations(naive, steps):
    """The correlation ids of the runtime calls launched in ``steps`` (by their CPU start)."""
    with gzip.open(TRACE, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    return {e["args"]["correlation"] for e in events if naive.step_of(ns(e["ts"])) in steps}
