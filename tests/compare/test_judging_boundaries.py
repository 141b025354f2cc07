"""The boundaries of the metrics and the judging: slices and host gaps, stalled steps and
warm-up, a slower machine, the runs a baseline entry keeps, which spread bounds which series,
a change of exactly the tolerance, the kernel diff, what an unhealthy run downgrades.  Each
test pins a behaviour that a deliberate single-point change to a core function (one of 57
such mutations) changed without any other test noticing.  Every expected value is worked
out by hand from the inputs (the comments show how), never read back from the code."""

import pytest

from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.model import (
    COPY_COLUMNS,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    make_table,
)


def _trace(calls, kernels, steps):
    """calls: (name, start, end, tid, correlation); kernels: (start, end, correlation);
    steps: (start, end) of ProfilerStep#0.. on thread 1."""
    runtime = make_table(RUNTIME_COLUMNS, {"name": [c[0] for c in calls], "start": [c[1] for c in calls],
                                           "end": [c[2] for c in calls], "tid": [c[3] for c in calls],
                                           "correlation": [c[4] for c in calls]})
    runtime["name"] = runtime["name"].astype("category")
    k = make_table(KERNEL_COLUMNS, {"start": [x[0] for x in kernels], "end": [x[1] for x in kernels],
                                    "name": ["k"] * len(kernels), "device": [0] * len(kernels),
                                    "stream": [7] * len(kernels), "correlation": [x[2] for x in kernels]})
    ranges = make_table(RANGE_COLUMNS, {"start": [s for s, _ in steps], "end": [e for _, e in steps],
                                        "name": [f"ProfilerStep#{i}" for i in range(len(steps))],
                                        "tid": [1] * len(steps)})
    return Trace(k, make_table(COPY_COLUMNS, {}), make_table(SET_COLUMNS, {}), runtime, ranges, source="kineto")


# Three steps on thread 1: [0, 1000], [2000, 3000], [3000, 4000] (ns).
STEPS = [(0, 1000), (2000, 3000), (3000, 4000)]
CALLS = [
    ("cudaLaunchKernel", 0, 100, 1, 1),
    ("cudaLaunchKernel", 900, 1000, 1, 2),
    ("cudaLaunchKernel", 2000, 2100, 1, 3),
    ("cudaLaunchKernel", 2900, 3000, 1, 4),
    ("cudaStreamSynchronize", 3000, 3600, 1, 5),  # starts at step 2's start: step 2's; straddles step 1's end
    ("cudaLaunchKernel", 3900, 4000, 1, 6),
    ("cudaGetDevice", 1200, 1300, 2, 7),  # another thread, which launches nothing
]
KERNELS = [(150, 250, 1), (1000, 1100, 2), (2100, 2400, 3), (3000, 3200, 4), (4000, 4100, 6)]


@pytest.fixture(scope="module")
def small():
    return measure(_trace(CALLS, KERNELS, STEPS))


def test_slices_and_per_step_ratios_by_hand(small):
    ps = small.per_step
    # step ends: max(CPU end, own GPU work end) = 1100, 3200, 4100 -> slices [0,1100) [1100,3200) [3200,4100)
    assert ps["window_us"] == [1.1, 2.1, 0.9]
    # kernel busy time per slice: 100+100, 300+200, 100 ns over 1100, 2100, 900 ns
    assert ps["gpu_utilization"] == [round(200 / 1100, 6), round(500 / 2100, 6), round(100 / 900, 6)]
    # the 600 ns stream sync is step 2's; its share of step 2's *slice* (900 ns), not of the CPU span (1000 ns)
    assert ps["sync_count"] == [0, 0, 1]
    assert ps["sync_wait_fraction"] == [0.0, 0.0, round(600 / 900, 6)]
    # no copies at all: nothing to divide, so no value (None), not 0
    assert ps["overlap_efficiency"] == [None, None, None]


def test_host_gaps_by_hand(small):
    # step 0, [0, 1000]: calls [0,100] [900,1000] -> longest pause 100..900 = 800 ns
    # step 1, from step 0's CPU end: [1000, 3000]: thread-1 calls [2000,2100] and [2900,3600] (merged with
    #   [2900,3000]) -> pauses 1000..2000 = 1000 and 2100..2900 = 800; thread 2's call does not count (it
    #   launches nothing)
    # step 2, [3000, 4000]: the sync call straddling 3000 covers 3000..3600, then [3900,4000] -> pause 300
    assert small.per_step["host_gap_us"] == [0.8, 1.0, 0.3]


# --- metrics.health -------------------------------------------------------------

from pytest_gpuprof.metrics import health  # noqa: E402


def test_stalled_steps_each_condition_by_hand():
    # 7 steps; median window 100 us, median kernel time 100 us, median kernel count 2.
    # Steps 4-6 each took 140 us: excess 40 > 0.25 * 100, with a 30 us host pause >= 0.5 * 40 (the
    # *excess*; 0.5 * the median window would be 50 and would clear step 4).
    #   step 4: same work as the median step -> stalled
    #   step 5: kernel time 50, |50 - 100| = 50 > 0.10 * 100: different GPU work -> not stalled
    #   step 6: 3 kernels against the median's 2 -> not stalled
    per_step = {
        "window_us": [100, 100, 100, 100, 140, 140, 140],
        "host_gap_us": [5, 5, 5, 5, 30, 30, 30],
        "kernel_time_us": [100, 100, 100, 100, 100, 50, 100],
        "kernel_count": [2, 2, 2, 2, 2, 2, 3],
    }
    assert health.stalled_steps(per_step, ["kernel_count"]) == [0, 0, 0, 0, 1, 0, 0]


def test_too_few_steady_steps_means_more_than_half_stalled():
    # 2 of 4 stalled: 2 * 2 > 4 is false, half is still enough to judge; 3 of 4 is not
    assert health.assess([100.0] * 4, None, [1, 1, 0, 0]) == []
    assert health.assess([100.0] * 4, None, [1, 1, 1, 0]) == [
        "3 of 4 steps stalled on the host: too few steady steps to judge"]
    # stalled and throttled steps are both left out: 2 + 2 of 5 leave one step, too few
    assert health.assess([100.0] * 5, None, [1, 1, 0, 0, 0], [0, 0, 1, 1, 0]) == [
        "4 of 5 steps stalled on the host or ran at a throttled clock: too few steady steps to judge"]
    assert health.assess([100.0] * 5, None, [1, 0, 0, 0, 0], [1, 0, 1, 0, 0]) == []  # 2 of 5 left out


def test_warmup_compares_the_first_step_with_the_median_of_the_others():
    # the others 100, 100, 100, 200, 200: median 100; 160 > 1.5 * 100 -> warming up, 1.6x
    # (the median of all six, (100 + 160) / 2 = 130, would hide it: 160 < 195)
    assert health.assess([160.0, 100.0, 100.0, 100.0, 200.0, 200.0], None) == [
        "first measured step took 1.6x the median of the others: still warming up (raise warmup)"]


# --- compare.machine ------------------------------------------------------------

from pytest_gpuprof.compare.machine import explains, machine_differences  # noqa: E402


def test_a_machine_is_slower_only_below_every_baseline_run():
    probes = {"h2d_pinned_gbps": 55.0, "h2d_pageable_gbps": 18.0, "gemm_us": 190.0, "launch_us": 7.0,
              "sm_clock_mhz": 1980.0}
    runs = [{**probes, "h2d_pinned_gbps": 50.0}, {**probes, "h2d_pinned_gbps": 60.0}]
    # 50 GB/s now: as fast as the slower baseline run (limit 50 * 0.9 = 45), though 60 * 0.9 = 54 > 50
    assert machine_differences({**probes, "h2d_pinned_gbps": 50.0}, runs) == {}
    # 44 GB/s < 45: slower than every run
    assert set(machine_differences({**probes, "h2d_pinned_gbps": 44.0}, runs)) == {"h2d_pinned_gbps"}


def test_the_launch_probe_explains_no_copy_or_kernel_time():
    # MOVES: launch_us moves only what the host's pace sets (the window and the ratios)
    assert explains("launch_us", "memcpy_htod_time_us") is False
    assert explains("launch_us", "kernels[k].time_us") is False


# --- compare.recording.new_baseline_entry -----------------------------------------

from pytest_gpuprof.compare.evaluate import TestResult  # noqa: E402
from pytest_gpuprof.compare.recording import new_baseline_entry  # noqa: E402


def _run(tag, kernel_count=4, backend="torch"):
    metrics = {"kernel_count": kernel_count, "kernel_time_us": 3.0, "step_count": 2,
               "kernels": {"k": {"count": kernel_count, "time_us": 3.0}}}
    return TestResult("t.py::t", gpu="GPU", metrics=metrics, per_step={"kernel_time_us": [1.0, 2.0]}, distribution={},
                      environment={"run": tag}, backend=backend)


def test_the_last_keep_runs_runs_are_kept():
    entry, how = new_baseline_entry(_run("A"), None, keep_runs=2)
    assert how == "first run recorded"
    entry, _ = new_baseline_entry(_run("B"), entry, keep_runs=2)
    entry, how = new_baseline_entry(_run("C"), entry, keep_runs=2)
    # three runs of one program, two kept: the newest two, B and C (A dropped)
    assert [r["environment"]["run"] for r in entry["runs"]] == ["B", "C"]
    assert how == "run 2 of at most 2 recorded"
    assert entry["per_step"]["kernel_time_us"] == [1.0, 2.0, 1.0, 2.0]  # B's samples then C's


def test_other_gpu_work_or_backend_replaces_the_runs():
    entry, _ = new_baseline_entry(_run("A"), None, keep_runs=5)
    # 6 kernels per 2 steps instead of 4: another program, its runs cannot be pooled
    changed, how = new_baseline_entry(_run("B", kernel_count=6), entry, keep_runs=5)
    assert how == "replaced: the GPU work per step changed"
    assert [r["environment"]["run"] for r in changed["runs"]] == ["B"]
    # same work, recorded with the other backend: its times are not comparable either
    other, how = new_baseline_entry(_run("C", backend="nsys"), entry, keep_runs=5)
    assert [r["environment"]["run"] for r in other["runs"]] == ["C"]


# --- compare.verdicts: which spread bounds which series -----------------------------

from pytest_gpuprof.compare.rules import Rules  # noqa: E402
from pytest_gpuprof.compare.verdicts import judge  # noqa: E402

KERNELS20 = [f"k{i}" for i in range(20)]


def test_the_window_keeps_its_own_run_spread_not_the_kernels_pooled_one():
    """Three recorded runs whose window medians were 1000, 1100 and 1200 us, and whose 21 kernel
    series (the total and 20 names) barely moved.  The window's prediction interval is its own,
    on the values, with R - 1 = 2 degrees of freedom: 1100 +- t(0.995, 2) * 100 * sqrt(4/3)
    = 1100 +- 9.925 * 115.5 = about [-46, 2246] us, so a run whose window median is 1704.5 us is
    within what the runs show.  (The kernels' pooled log spread, 42 degrees of freedom,
    t(0.995, 42) = 2.70, would give exp(7.0003 +- 2.70 * 0.0912 * 1.155) = about [826, 1457] and
    fail it.)"""
    steps = 10
    metrics = {"step_count": steps, "kernel_count": 20 * steps,
               "kernels": {k: {"count": steps, "time_us": 50.0} for k in KERNELS20}}
    before = {"window_us": [1000.0, 1050.0, 1100.0, 1150.0, 1200.0] * 2, "kernel_time_us": [100.0] * steps,
              "kernels": {k: [5.0] * steps for k in KERNELS20}}
    now = {"window_us": [1700.0 + i for i in range(steps)], "kernel_time_us": [100.0] * steps,
           "kernels": {k: [5.0] * steps for k in KERNELS20}}
    runs = [{"distribution": {"window_us": {"median": w}, "kernel_time_us": {"median": kt},
                              "kernels": {k: {"median": m} for k in KERNELS20}}}
            for w, kt, m in ((1000.0, 100.0, 5.0), (1100.0, 101.0, 5.1), (1200.0, 99.0, 4.9))]
    verdicts = judge(metrics, metrics, Rules(), True, (now, before), None, runs)
    window = next(v for v in verdicts if v.metric == "window_us")
    # beyond the 10% tolerance (1704.5 vs 1100) and every step slower: U = 0, normal approximation with
    # the baseline's 5 tied pairs, z = 49.5 / 13.2 = 3.75, p = 1.8e-4 < 0.01 / 22 series = 4.5e-4; yet
    # inside the runs' interval
    assert window.status == "ok" and "within what the baseline's runs show" in window.evidence
    # a window above the interval's top (2246) fails
    now["window_us"] = [2400.0 + i for i in range(steps)]
    window = next(v for v in judge(metrics, metrics, Rules(), True, (now, before), None, runs)
                  if v.metric == "window_us")
    assert window.status == "regressed"


def _host_step(window_us: float, reading: float, utilization: float, steps: int = 12) -> dict:
    return {"window_us": [window_us + i for i in range(steps)], "launch_call_us": [reading] * steps,
            "gpu_utilization": [utilization] * steps, "kernel_time_us": [0.2 * window_us] * steps}


@pytest.mark.parametrize(("utilization", "status"), [(0.5, "regressed"), (0.51, "ok")])
def test_a_faster_host_reveals_host_work_only_in_a_step_that_is_the_hosts(utilization, status):
    """The same window as measured (1000 us a step) on a host launching 1.25x faster (4 us a call
    against 5): at the baseline host's speed 1000 * 1.25^1.3 = 1337 us, +34%, outside one run's
    interval exp(±t(0.995, 26) * 0.05 * sqrt(2)) = ±21.7%.  In a step that is the host's (the GPU
    busy half the window or less) that is more host-side work and fails; in a busier step the
    window follows the GPU, and unchanged as measured it passes."""
    steps = 12
    metrics = {"step_count": steps, "kernel_count": steps, "kernels": {"k": {"count": steps, "time_us": 1.0}}}
    before, now = _host_step(1000.0, 5.0, utilization), _host_step(1000.0, 4.0, utilization)
    runs = [{"distribution": {}, "per_step": before}]
    window = next(v for v in judge(metrics, metrics, Rules(), True, (now, before), None, runs)
                  if v.metric == "window_us")
    assert window.status == status, window.evidence
    if status == "regressed":
        assert "+0.0% as measured, +33.7% at the baseline host's speed" in window.evidence


def test_a_ratio_is_not_excused_by_a_window_that_regressed_at_the_baseline_hosts_speed():
    """Review finding: the host 1.43x faster (3.5 us a launch against 5), the window -12% as
    measured (880 us: improved) but 880 * (5/3.5)^1.3 = 1399 us, +40%, at the baseline host's
    speed (regressed), and gpu_utilization 0.5 -> 0.3.  The window's change is not the
    host's, so the utilization drop stays a regression."""
    steps = 12
    metrics = {"step_count": steps, "kernel_count": steps, "kernels": {"k": {"count": steps, "time_us": 1.0}}}
    before, now = _host_step(1000.0, 5.0, 0.5), _host_step(880.0, 3.5, 0.3)
    verdicts = {v.metric: v for v in judge(metrics, metrics, Rules(), True, (now, before), None,
                                           [{"distribution": {}, "per_step": before}])}
    assert verdicts["window_us"].status == "regressed" and not verdicts["window_us"].by_host
    assert verdicts["gpu_utilization"].status == "regressed"


def _copies(gbps: float, time_us: float, steps: int = 12) -> dict:
    return {"memcpy_dtoh_gbps": [gbps] * steps, "memcpy_dtoh_time_us": [time_us] * steps,
            "memcpy_dtoh_bytes": [4] * steps, "window_us": [100.0] * steps}


def test_the_bandwidth_of_a_copy_too_short_to_have_one_is_not_judged():
    """A 4-byte copy of 1.5 us a step (0.0027 GB/s) that takes 1.7 us: -12% bandwidth, yet
    0.2 us: under 10 time floors (50 us) a copy's duration is latency.  A 60 us copy kind
    20% slower in bandwidth regresses."""
    steps = 12
    metrics = {"step_count": steps, "kernel_count": 0, "kernels": {}, "memcpy_dtoh_count": steps,
               "memcpy_dtoh_bytes": 4 * steps}
    for time_us, (b, c), status in ((1.5, (0.0027, 0.0024), "ok"), (60.0, (50.0, 40.0), "regressed")):
        before_m = {**metrics, "memcpy_dtoh_time_us": time_us * steps, "memcpy_dtoh_gbps": b}
        now_m = {**metrics, "memcpy_dtoh_time_us": time_us * steps, "memcpy_dtoh_gbps": c}
        before, now = _copies(b, time_us), _copies(c, time_us)
        now["memcpy_dtoh_gbps"] = [c * (1 + i / 1000) for i in range(steps)]
        rate = next(v for v in judge(now_m, before_m, Rules(), True, (now, before), None,
                                     [{"distribution": {}, "per_step": before}]) if v.metric == "memcpy_dtoh_gbps")
        assert rate.status == status, rate.rule
        if status == "ok":
            assert rate.rule.startswith("not judged: the baseline's copies of this kind take under 10 time floors")


def test_a_new_series_that_an_older_baselines_runs_lack_is_not_compared():
    """An entry recorded before the copy bandwidth existed, updated by a newer run: the pooled
    steps lack the series (every run must hold one) while the metrics have it.  Judging the
    whole-window value alone would skip the steps and the runs' spread: not compared."""
    steps = 12
    metrics = {"step_count": steps, "kernel_count": 0, "kernels": {}, "memcpy_dtoh_count": steps,
               "memcpy_dtoh_bytes": 4 * steps, "memcpy_dtoh_time_us": 600.0 * steps}
    before = {k: v for k, v in _copies(50.0, 600.0).items() if k != "memcpy_dtoh_gbps"}
    now = _copies(40.0, 600.0)
    rate = next(v for v in judge({**metrics, "memcpy_dtoh_gbps": 40.0}, {**metrics, "memcpy_dtoh_gbps": 50.0},
                                 Rules(), True, (now, before), None, [{"distribution": {}, "per_step": before}])
                if v.metric == "memcpy_dtoh_gbps")
    assert rate.status == "ok" and rate.rule.startswith("not compared: the baseline's recorded runs")


# --- compare.rules -------------------------------------------------------------------

from pytest_gpuprof.compare.rules import beyond_time_rule  # noqa: E402


def test_a_time_change_of_exactly_the_tolerance_is_within_it_with_no_floor_in_the_way():
    # 0.25 * 100 = 25 exactly in binary floating point; with the floor at 0 only the relative
    # rule decides: +25 us is "within +-25%", +25.5 is beyond, and so is -25.5 (either way)
    assert beyond_time_rule(25.0, 100.0, 0.25, 0.0) is False
    assert beyond_time_rule(-25.0, 100.0, 0.25, 0.0) is False
    assert beyond_time_rule(25.5, 100.0, 0.25, 0.0) is True
    assert beyond_time_rule(-25.5, 100.0, 0.25, 0.0) is True
    # and the floor alone: a change past the tolerance but not past the floor does not count
    assert beyond_time_rule(8.0, 10.0, 0.25, 8.0) is False


# --- compare.kernels -----------------------------------------------------------------

from pytest_gpuprof.compare.kernels import kernel_changes  # noqa: E402


def test_kernel_changes_name_slower_and_faster_by_hand():
    a = {"step_count": 2, "kernels": {"g": {"count": 2, "time_us": 200.0}, "h": {"count": 2, "time_us": 100.0},
                                      "u": {"count": 2, "time_us": 20.0}}}
    b = {"step_count": 2, "kernels": {"g": {"count": 2, "time_us": 300.0}, "h": {"count": 2, "time_us": 50.0},
                                      "u": {"count": 2, "time_us": 20.4}}}
    rows, unchanged = kernel_changes(a, b, Rules())
    # per step: g 100 -> 150 us (+50, slower), h 50 -> 25 us (-25, faster), u 10 -> 10.2 (under the 5 us floor)
    assert [(r["kernel"], r["change"], r["delta_us"]) for r in rows] == [("g", "slower", 50.0), ("h", "faster", -25.0)]
    assert unchanged == 1


# --- compare.evaluate: what an unhealthy run downgrades --------------------------------

from types import SimpleNamespace  # noqa: E402

from pytest_gpuprof.compare.evaluate import Measured, evaluate  # noqa: E402


def _unhealthy(kernel_us, syncs):
    metrics = {"step_count": 1, "kernel_time_us": kernel_us, "sync_count": syncs, "kernels": {}}
    m = SimpleNamespace(per_step={"kernel_time_us": [kernel_us], "stalled": [0]},
                        metadata={"health": {"slowdowns": ["thermal"]}}, metrics=metrics)
    return Measured("GPU", "torch", metrics), m


def test_an_unhealthy_run_downgrades_time_regressions_but_not_counts():
    entry = {"backend": "torch", "metrics": {"step_count": 1, "kernel_time_us": 100.0, "sync_count": 0, "kernels": {}}}
    # kernel time 100 -> 200 us (+100%): a time regression, which a GPU slowed down can explain -> unstable
    run, m = _unhealthy(200.0, 0)
    result = TestResult.of("t.py::t", run, evaluate(run, m, entry, Rules(), update=False))
    assert result.unstable == ["GPU slowed down: thermal"]
    assert {v.metric: v.status for v in result.verdicts}["kernel_time_us"] == "unstable"
    assert result.status == "unstable"
    # 0 -> 2 syncs per step is a count: clocks do not move counts, so it still fails
    run, m = _unhealthy(200.0, 2)
    result = TestResult.of("t.py::t", run, evaluate(run, m, entry, Rules(), update=False))
    statuses = {v.metric: v.status for v in result.verdicts}
    assert statuses["sync_count"] == "regressed" and statuses["kernel_time_us"] == "unstable"
    assert result.status == "failed"


def test_a_short_kernel_is_bounded_by_at_least_the_short_kernel_spread():
    """Three recorded runs whose 20 kernels all agree within 0.2% (pooled log spread about
    0.001), then a run whose kernel k0 takes 8% longer in every step (300 -> 324 us a step):
    launched 100 times a step (3 us a launch) it is within exp(log 300 +- t(0.995, 40) * 0.03
    * sqrt(4/3)), about +-9.8%; launched once a step (300 us a launch), a regression."""
    steps = 10
    for launches, expected in ((100, "ok"), (1, "regressed")):
        metrics = {"step_count": steps, "kernel_count": launches * 20 * steps,
                   "kernels": {k: {"count": launches * steps, "time_us": 300.0 * steps} for k in KERNELS20}}
        before = {"kernel_time_us": [6000.0] * steps,
                  "kernels": {k: [300.0 + 0.01 * i for i in range(steps)] for k in KERNELS20}}
        now = {"kernel_time_us": [6000.0] * steps,
               "kernels": {k: [(324.0 if k == "k0" else 300.0) + 0.01 * i for i in range(steps)] for k in KERNELS20}}
        runs = [{"distribution": {"kernel_time_us": {"median": 6000.0 * f},
                                  "kernels": {k: {"median": 300.0 * f} for k in KERNELS20}}}
                for f in (0.999, 1.0, 1.001)]
        verdicts = judge(metrics, metrics, Rules(), True, (now, before), None, runs)
        k0 = next(v for v in verdicts if v.metric == "kernels[k0].time_us")
        assert k0.status == expected, (launches, k0.evidence)
