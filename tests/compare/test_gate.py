"""The gate on real traces of host stalls and of shifts between processes (recorded on an
H200 by tests/data/record_traces.py: ``host`` and ``launch``), and the rules that keep it
from crying wolf: the spread of the baseline's runs, machine probes, confirmation.

The stalled trace's host paused 20 ms in the middle of measured steps 3 and 7; the
slow_host trace's 2 ms in every step.  The launch traces are one launch-bound decode
loop recorded in four processes (p0 to p3; p3's host ran about 55% slower all along)
and once beside a process spinning on the same CPU core (busy)."""

import dataclasses
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.naive import Naive
from helpers.session import session_settings
from pytest_gpuprof.capture.nvml import lineage
from pytest_gpuprof.capture.probes import best_readings
from pytest_gpuprof.compare import baseline as baseline_io
from pytest_gpuprof.compare import confirmation
from pytest_gpuprof.compare.evaluate import Measured, TestResult, evaluate, of_measurement
from pytest_gpuprof.compare.machine import explains, machine_differences
from pytest_gpuprof.compare.recording import new_baseline_entry
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.stats import Prior, t_quantile
from pytest_gpuprof.compare.time_rules import pooled_log_spread, run_spread
from pytest_gpuprof.compare.verdict import Verdict
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.run import confirm
from pytest_gpuprof.run.session import GpuprofSession
from pytest_gpuprof.trace.kineto import load_kineto
from pytest_gpuprof.trace.model import Trace

HOST = Path(__file__).parents[1] / "data" / "host"
NODE = "tests/compare/test_gate.py::fixture"


def scaled_trace(name: str, scale: float = 1.0) -> Trace:
    """The host trace NAME with every kernel SCALE times as long."""
    trace = load_kineto(HOST / f"{name}.pt.trace.json.gz")
    if scale != 1.0:  # every kernel runs longer: a real GPU-side regression
        k = trace.kernels
        k["end"] = k["start"] + ((k["end"] - k["start"]) * scale).round().astype("int64")
    return trace


def measured(name: str, kernel_scale: float = 1.0):
    return measure(scaled_trace(name, kernel_scale))


def failed_result(*verdicts: Verdict) -> TestResult:
    """A failed result of NODE holding VERDICTS."""
    return TestResult(NODE, gpu="NVIDIA H200", metrics={}, verdicts=list(verdicts))


def baseline(*names: str) -> dict:
    """The entry --gpuprof-update-baseline leaves after one run per name, in turn."""
    entry = None
    for name in names:
        m = measured(name)
        entry, _ = new_baseline_entry(of_measurement(NODE, m, "torch"), entry, keep_runs=5)
    return entry


def judged(name: str, entry: dict, kernel_scale: float = 1.0) -> TestResult:
    m = measured(name, kernel_scale)
    run = Measured.of(m, "torch")
    return TestResult.of(NODE, run, evaluate(run, m, entry, Rules(), update=False))


def regressed(result: TestResult) -> list[str]:
    return [v.metric for v in result.verdicts if v.status == "regressed"]


# --- host stalls --------------------------------------------------------------

def test_the_planted_stalls_are_found_and_nothing_else_but_the_first_step():
    stalled = measured("stalled").per_step["stalled"]
    # steps 3 and 7: the planted pauses; step 0: the host's start of the measured steps,
    # slow in the steady trace too, where nothing else is flagged
    assert [i for i, s in enumerate(stalled) if s] == [0, 3, 7]
    assert [i for i, s in enumerate(measured("steady").per_step["stalled"]) if s] == [0]
    assert not any(measured("slow_host").per_step["stalled"])  # slow in every step alike: no stall


def test_stalled_steps_raise_no_alarm_and_are_reported():
    result = judged("stalled", baseline("steady"))
    assert result.status == "passed", [(v.metric, v.status, v.evidence) for v in result.verdicts if v.status != "ok"]
    assert result.notes[0].startswith("3 of 10 steps stalled on the host (pauses up to 20.")
    window = next(v for v in result.verdicts if v.metric == "window_us")
    # the median step of the usable ones: no 20 ms pause in it
    assert window.current < 1.1 * window.baseline


def test_a_host_that_is_slow_in_every_step_still_fails():
    result = judged("slow_host", baseline("steady"))
    assert result.status == "failed" and "window_us" in regressed(result)
    assert "gpu_utilization" in regressed(result)
    assert not any(v.metric == "kernel_time_us" and v.status != "ok" for v in result.verdicts)


# --- shifts between processes --------------------------------------------------

def test_two_recorded_runs_cannot_bound_a_third_so_the_shift_passes():
    # t(0.995, 1) = 63.7: two runs' medians say little about a third process
    assert judged("launch_p3", baseline("launch_p0", "launch_p1")).status == "passed"


def test_a_host_shift_between_processes_passes_at_the_baseline_hosts_speed():
    """p3's host launched about 1.4x slower than p0-p2's: its window is about 1.6x theirs as
    measured, and within what they show once each step is put at their host's speed."""
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    shifted = judged("launch_p3", entry)
    assert shifted.status == "passed", [(v.metric, v.status, v.evidence) for v in shifted.verdicts if v.status != "ok"]
    window = next(v for v in shifted.verdicts if v.metric == "window_us")
    assert window.current > 1.4 * window.baseline
    assert "at the baseline host's speed" in window.evidence and "the host ran 1.4" in window.evidence
    assert "x slower than the baseline's (launch calls" in window.evidence


def test_a_noisy_neighbour_is_not_confirmed_either():
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    busy = judged("launch_busy", entry)
    assert confirmation.needs_confirmation(busy)
    confirmation.confirm(busy, [judged("launch_p3", baseline("launch_p0", "launch_p1", "launch_p2", "launch_busy"))])
    assert busy.status in ("unconfirmed", "passed")


def test_slower_kernels_fail_and_the_rerun_confirms_them():
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    slow = judged("launch_p3", entry, kernel_scale=1.2)
    assert "kernel_time_us" in regressed(slow)
    confirmation.confirm(slow, [judged("launch_p2", baseline("launch_p0", "launch_p1"), kernel_scale=1.2)])
    assert slow.status == "failed" and "kernel_time_us" in regressed(slow)
    v = next(v for v in slow.verdicts if v.metric == "kernel_time_us")
    assert "; confirmed in 1 fresh process(es): +" in v.evidence


def test_kernel_times_of_three_processes_agree_within_their_pooled_spread():
    """No kernel series of p3 or of the busy run falls outside what p0-p2 show: the GPU side
    does not move between processes, however slow the host."""
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    for name in ("launch_p3", "launch_busy"):
        result = judged(name, entry)
        assert not [m for m in regressed(result) if m == "kernel_time_us" or m.startswith("kernels[")], name


# --- the statistic ------------------------------------------------------------

def test_pooled_log_spread_pools_the_squared_deviations_of_the_log_medians():
    a, b = (100.0, 102.0, 98.0), (50.0, 50.5, 49.5)
    ss = sum((math.log(x) - sum(map(math.log, s)) / 3) ** 2 for s in (a, b) for x in s)
    spread, freedom = pooled_log_spread([a, b, (7.0,), (0.0, 3.0)])  # one run, a zero: left out
    assert freedom == 4 and spread == pytest.approx(math.sqrt(ss / 4), rel=1e-12)
    assert pooled_log_spread([(5.0,)]) is None


def test_run_spread_by_hand():
    # on the values: mean 100, s = 2, t(0.995, 2) = 9.9248 (SciPy), sqrt(1 + 1/3)
    low, high = run_spread((98.0, 100.0, 102.0))
    half = 9.924843 * 2 * math.sqrt(4 / 3)
    assert (low, high) == (pytest.approx(100 - half, rel=1e-6), pytest.approx(100 + half, rel=1e-6))
    # on the log scale with a pooled spread larger than the series' own: the pooled one, its df
    logs = [math.log(x) for x in (99.0, 100.0, 101.0)]
    mean = sum(logs) / 3
    low, high = run_spread((99.0, 100.0, 101.0), shared=(0.02, 40))
    half = t_quantile(0.995, 40) * 0.02 * math.sqrt(4 / 3)
    assert t_quantile(0.995, 40) == pytest.approx(2.704459, rel=1e-6)  # SciPy
    assert (low, high) == (pytest.approx(math.exp(mean - half)), pytest.approx(math.exp(mean + half)))
    # a series that moves more than the pooled spread keeps its own
    wide = run_spread((80.0, 100.0, 120.0), shared=(0.001, 40))
    own = math.sqrt(sum((math.log(x) - sum(math.log(y) for y in (80, 100, 120)) / 3) ** 2 for x in (80, 100, 120)) / 2)
    assert math.log(wide[1]) - math.log(wide[0]) == pytest.approx(2 * t_quantile(0.995, 40) * own * math.sqrt(4 / 3))
    assert run_spread((100.0,)) is None
    # a Prior is pooled with the series' own: (2 s^2 + 26 * 0.05^2) / 28, on 28 degrees of freedom
    logs = [math.log(x) for x in (80.0, 100.0, 120.0)]
    squares = sum((x - sum(logs) / 3) ** 2 for x in logs)  # 0.0828
    pooled = math.sqrt((squares + 26 * 0.05 ** 2) / 28)  # 0.0732, where the own is 0.203
    low, high = run_spread((80.0, 100.0, 120.0), shared=Prior(0.05, 26))
    assert math.log(high) - math.log(low) == pytest.approx(2 * t_quantile(0.995, 28) * pooled * math.sqrt(4 / 3))
    assert t_quantile(0.995, 28) == pytest.approx(2.763262, rel=1e-6)  # SciPy
    low, high = run_spread((100.0,), shared=Prior(0.05, 26))  # one run: the prior alone
    assert math.log(high / 100) == pytest.approx(t_quantile(0.995, 26) * 0.05 * math.sqrt(2))


# --- machine probes -------------------------------------------------------------

PROBES = {"h2d_pinned_gbps": 55.0, "h2d_pageable_gbps": 18.0, "gemm_us": 190.0, "launch_us": 7.0,
          "sm_clock_mhz": 1980.0}


def test_only_a_slower_machine_beyond_the_tolerance_differs():
    runs = [PROBES, {**PROBES, "gemm_us": 200.0}]
    assert machine_differences({**PROBES, "gemm_us": 229.0}, runs) == {}  # 200 * 1.15 = 230
    found = machine_differences({**PROBES, "gemm_us": 231.0, "h2d_pinned_gbps": 49.0}, runs)
    assert set(found) == {"gemm_us", "h2d_pinned_gbps"}
    assert found["h2d_pinned_gbps"] == ("host-to-device bandwidth (pinned) is 11% below the baseline machine's "
                                        "(49 GB/s; baseline 55 GB/s)")
    # faster explains nothing
    assert machine_differences({**PROBES, "gemm_us": 100.0, "h2d_pinned_gbps": 80.0}, runs) == {}
    assert machine_differences(PROBES, [None]) == {} and machine_differences(None, runs) == {}


@pytest.mark.parametrize("probe, metric, moves", [
    ("gemm_us", "kernel_time_us", True), ("gemm_us", "kernels[k].time_us", True),
    ("gemm_us", "memcpy_htod_time_us", False), ("h2d_pinned_gbps", "memcpy_htod_time_us", True),
    ("h2d_pinned_gbps", "kernel_time_us", False), ("launch_us", "kernel_time_us", False),
    ("launch_us", "window_us", True), ("sm_clock_mhz", "gpu_utilization", True),
    ("h2d_pageable_gbps", "overlap_efficiency", True),
])
def test_a_probe_explains_what_it_can_move(probe, metric, moves):
    assert explains(probe, metric) is moves


def test_a_slower_link_makes_copy_regressions_unstable_and_leaves_kernel_ones_failed():
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    for run in entry["runs"]:
        run["machine"] = PROBES
    m = measured("launch_p2", kernel_scale=1.2)
    run = dataclasses.replace(Measured.of(m, "torch"), machine={**PROBES, "h2d_pinned_gbps": 30.0})
    result = TestResult.of(NODE, run, evaluate(run, m, entry, Rules(), update=False))
    assert result.status == "failed" and "kernel_time_us" in regressed(result)  # a slow link explains no kernel
    assert any(n.startswith("host-to-device bandwidth (pinned) is 45% below") for n in result.notes + result.unstable)
    run = dataclasses.replace(Measured.of(m, "torch"), machine={**PROBES, "gemm_us": 300.0})
    result = TestResult.of(NODE, run, evaluate(run, m, entry, Rules(), update=False))
    assert result.status == "unstable" and not regressed(result)
    assert result.unstable == ["a 4096x4096x4096 bf16 GEMM's time is 58% above the baseline machine's "
                               "(300 us; baseline 190 us)"]


def test_a_results_document_written_before_health_and_machine_were_apart_reads_back_split():
    warming = "first measured step took 2.0x the median of the others: still warming up (raise warmup)"
    gemm = "a 4096x4096x4096 bf16 GEMM's time is 58% above the baseline machine's (300 us; baseline 190 us)"
    old = TestResult.from_json({"nodeid": NODE, "status": "unstable", "unstable": [warming, gemm]})
    assert (old.health, old.slower_machine, old.unstable) == ([warming], [gemm], [warming, gemm])
    new = TestResult.from_json({"nodeid": NODE, "status": "unstable", "health": [], "slower_machine": [gemm],
                                "unstable": [gemm]})
    assert (new.health, new.slower_machine) == ([], [gemm])  # today's document: its fields as written


def test_counts_and_thresholds_are_never_sent_to_confirmation():
    timing = Verdict("window_us", "regressed", 1.0, 2.0, "rule")
    assert confirmation.needs_confirmation(failed_result(timing))
    assert not confirmation.needs_confirmation(failed_result(timing, Verdict("sync_count", "regressed", 0, 8, "rule")))
    assert not confirmation.needs_confirmation(failed_result(Verdict("kernels[k]", "new", None, 1, "rule")))
    both = (timing, Verdict("kernel_time_us", "regressed", 1.0, 2.0, "rule"))
    partly = failed_result(*both)
    confirmation.confirm(partly, [failed_result(Verdict("kernel_time_us", "regressed", 1.0, 2.1, "rule")),
                           failed_result(Verdict("kernel_time_us", "regressed", 1.0, 2.2, "rule"))])
    assert [v.status for v in partly.verdicts] == ["unconfirmed", "regressed"]  # every re-run must reproduce
    assert partly.verdicts[1].evidence == "; confirmed in 2 fresh process(es): +110.0%, +120.0%"
    assert partly.status == "failed"
    assert partly.confirmation == "2 re-run(s) in fresh processes: 1 failure(s) reproduced in every re-run that decided"


def test_a_rerun_that_measured_nothing_neither_confirms_nor_clears():
    broken = "the re-run wrote no results (exit 4)"
    timing = Verdict("window_us", "regressed", 1.0, 2.0, "rule")
    alone = failed_result(dataclasses.replace(timing))
    confirmation.confirm(alone, [broken, broken])
    assert alone.status == "failed" and alone.verdicts[0].status == "regressed"
    assert alone.confirmation == ("2 re-run(s) in fresh processes: 1 failure(s) that no re-run could decide stand "
                                  f"({broken}; {broken})")
    cleared = failed_result(dataclasses.replace(timing))
    confirmation.confirm(cleared, [failed_result(), broken])  # the one that measured saw no regression
    assert cleared.status == "unconfirmed" and cleared.verdicts[0].status == "unconfirmed"
    assert cleared.verdicts[0].evidence == "; not reproduced in 1 of 1 fresh process(es)"
    assert cleared.confirmation == f"2 re-run(s) in fresh processes: the failures did not reproduce ({broken})"
    # a re-run that saw the change but judged it unstable (a slower machine, a clock drop) decides nothing
    unsteady = failed_result(dataclasses.replace(timing), dataclasses.replace(timing, metric="kernel_time_us"))
    rerun = failed_result(dataclasses.replace(timing, status="unstable"),
                          dataclasses.replace(timing, metric="kernel_time_us"))
    rerun.health = ["first measured step took 2.0x the median of the others: still warming up (raise warmup)"]
    confirmation.confirm(unsteady, [rerun, broken])
    assert [v.status for v in unsteady.verdicts] == ["regressed", "regressed"] and unsteady.status == "failed"
    assert unsteady.verdicts[0].evidence == f"; no fresh process decided (1 saw it unstable: {rerun.health[0]})"
    assert unsteady.verdicts[1].evidence == "; confirmed in 1 fresh process(es): +100.0%"
    assert unsteady.confirmation == ("2 re-run(s) in fresh processes: 1 failure(s) reproduced in every re-run that "
                                     f"decided, 1 failure(s) that no re-run could decide stand ({broken})")


def test_a_rerun_turns_gpuprof_on(pytester):
    """The re-run's own command line must profile: on a machine without a GPU its results
    document skips the test ("did not measure"); without --gpuprof it writes none."""
    pytester.makepyfile(test_one="""
        import pytest

        @pytest.mark.gpuprof
        def test_work():
            pass
    """)
    session = GpuprofSession(session_settings(pytester.path))
    assert confirm.rerun("test_one.py::test_work", session.settings.judging_args(), pytester.path, 300) == \
        "the re-run did not measure the test"


def test_each_probe_keeps_its_best_reading():
    slow = {**PROBES, "gemm_us": 233.0, "h2d_pinned_gbps": 41.0, "sm_clock_mhz": None}
    later = {**PROBES, "gemm_us": 191.0, "launch_us": 9.0}
    assert best_readings(slow, None, later) == {"h2d_pinned_gbps": 55.0, "h2d_pageable_gbps": 18.0,
                                                "gemm_us": 191.0, "launch_us": 7.0, "sm_clock_mhz": 1980.0}
    assert best_readings(None) is None


class _Probed:
    """A backend that measured on a GPU in this process (not a replay)."""
    name, runs_tests, needs_gpu, in_process, judges_here, kept_traces = "torch", True, True, True, True, None


def _session_judging(tmp_path, monkeypatch, readings):
    """A session whose start read ``readings[0]`` and whose later readings are the rest,
    judging launch_p2 with its kernels 20% slower against a baseline whose runs read PROBES."""
    entry = baseline("launch_p0", "launch_p1", "launch_p2")
    for run in entry["runs"]:
        run["machine"] = PROBES
    trace = scaled_trace("launch_p2", 1.2)
    gpu = of_measurement(NODE, measure(trace), "torch").gpu
    baseline_io.BaselineFile(baseline_io.baseline_file(tmp_path, NODE)).update({NODE: {gpu: entry}})
    session = GpuprofSession(session_settings(tmp_path), _Probed())
    session.probes.readings = readings[0]
    later = iter(readings[1:])
    monkeypatch.setattr("pytest_gpuprof.run.session.measure_machine", lambda device: next(later))
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.current_device", lambda: 0)
    return session, lambda: session.judge.judge(NODE, {}, lambda: {0: (trace, None)}, machine=session.probes.readings,
                                                probe_again=session.probes.again).result


def test_a_probe_slower_only_at_the_session_start_is_read_again_and_blames_nothing(tmp_path, monkeypatch):
    session, judge = _session_judging(tmp_path, monkeypatch, [{**PROBES, "gemm_us": 233.0}, PROBES])
    result = judge()
    assert result.status == "failed" and "kernel_time_us" in regressed(result)
    assert result.slower_machine == [] and result.machine == PROBES == session.probes.readings


def test_a_machine_slower_in_every_reading_makes_the_regression_unstable(tmp_path, monkeypatch):
    slow = {**PROBES, "gemm_us": 300.0}
    session, judge = _session_judging(tmp_path, monkeypatch, [slow, {**PROBES, "gemm_us": 290.0}, slow, PROBES])
    first, second, third = judge(), judge(), judge()
    for result in (first, second):
        assert result.status == "unstable" and not regressed(result)
        assert result.slower_machine == ["a 4096x4096x4096 bf16 GEMM's time is 53% above the baseline machine's "
                                         "(290 us; baseline 190 us)"]
        assert result.unstable == result.slower_machine and result.health == []
    # three readings at most: the fourth (which would read PROBES) is never taken
    assert third.status == "unstable" and session.probes.readings["gemm_us"] == 290.0


def test_the_processes_that_started_this_one_are_not_other_workloads():
    ours = lineage()
    assert {os.getpid(), os.getppid()} <= ours and 1 not in ours
    child = subprocess.run([sys.executable, "-c", "from pytest_gpuprof.capture.nvml import lineage; "
                            "import os; print(os.getpid(), *sorted(lineage()))"],
                           capture_output=True, text=True, check=True)
    pid, *theirs = map(int, child.stdout.split())
    assert set(theirs) == ours | {pid}  # the child's lineage is ours and itself


# --- the host's speed (tests/data/host/h100_*: one H100 machine, record_traces.py launch,
# six processes of the same code; the slowest-host and a fast-host one kept, and one with
# --host-overhead 2000, a host-side regression) ------------------------------------------

def test_a_slow_host_and_a_fast_host_pass_both_ways_and_host_work_fails():
    slow, fast = measured("h100_slow_host"), measured("h100_fast_host")
    windows = [statistics.median(m.per_step["window_us"]) for m in (slow, fast)]
    assert windows[0] > 1.6 * windows[1]  # the same code: the slow host's window 1.6x or more the fast one's
    for base, run in (("h100_slow_host", "h100_fast_host"), ("h100_fast_host", "h100_slow_host")):
        result = judged(run, baseline(base))
        assert result.status == "passed", [(v.metric, v.status, v.evidence)
                                           for v in result.verdicts if v.status != "ok"]
        window = next(v for v in result.verdicts if v.metric == "window_us")
        assert "at the baseline host's speed" in window.evidence
    bug = judged("h100_host_overhead", baseline("h100_fast_host"))
    assert bug.status == "failed" and "window_us" in regressed(bug)
    assert not [m for m in regressed(bug) if m == "kernel_time_us" or m.startswith("kernels[")]
    window = next(v for v in bug.verdicts if v.metric == "window_us")
    assert "at the baseline host's speed (" in window.evidence
    assert "outside what the baseline's runs show" in window.evidence
    # against the slowest host's baseline the host-side work added under 10% as measured, its host
    # having run faster; the step is the host's (the GPU busy under a seventh of it), so the window
    # at the baseline host's speed decides, and fails it
    masked = judged("h100_host_overhead", baseline("h100_slow_host"))
    window = next(v for v in masked.verdicts if v.metric == "window_us")
    assert window.current < 1.1 * window.baseline and window.status == "regressed", window.evidence
    assert "as measured" in window.evidence and "faster than the baseline's" in window.evidence


def test_confirmation_says_each_rerun_as_it_goes_and_stops_one_that_runs_over(tmp_path):
    """A line before the re-runs and one after each (test, re-run k of N, outcome, seconds);
    a re-run past its timeout is stopped, said so, and decides nothing."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_rerun.py").write_text("import time\n\n\ndef test_quick():\n    pass\n\n\n"
                                            "def test_hangs():\n    time.sleep(120)\n")
    lines = []
    quick = failed_result(Verdict("window_us", "regressed", 1.0, 2.0, "rule"))
    quick.nodeid = "test_rerun.py::test_quick"
    confirm.confirm(quick, ["--gpuprof"], tmp_path, 2, 300, lines.append)
    assert lines[0] == ("gpuprof: test_rerun.py::test_quick failed on window_us: re-running it 2 time(s), each in "
                        "a fresh process (stopped after 300 s), to confirm")
    for k, line in enumerate(lines[1:], 1):  # a plain test: the re-run measures nothing
        assert re.fullmatch(rf"gpuprof: test_rerun.py::test_quick: re-run {k} of 2: the re-run did not measure "
                            r"the test \(\d+\.\d s\)", line), line
    assert len(lines) == 3 and quick.status == "failed"

    lines.clear()
    hangs = failed_result(Verdict("window_us", "regressed", 1.0, 2.0, "rule"))
    hangs.nodeid = "test_rerun.py::test_hangs"
    start = time.monotonic()
    confirm.confirm(hangs, ["--gpuprof"], tmp_path, 1, 4, lines.append)
    took = time.monotonic() - start
    assert 4 <= took < 60  # stopped, not waited for
    stopped = "the re-run ran over 4 s (--gpuprof-confirm-timeout) and was stopped"
    assert re.fullmatch(rf"gpuprof: test_rerun.py::test_hangs: re-run 1 of 1: {re.escape(stopped)} \(\d+\.\d s\)",
                        lines[1]), lines[1]
    assert hangs.status == "failed" and hangs.confirmation.endswith(f"({stopped})")


def test_the_confirmation_lines_reach_the_terminal_while_the_test_runs(pytester):
    """Re-runs happen inside the failing test's call, whose output pytest captures: their
    lines are written past the capture, each on a line of its own."""
    pytester.makepyfile(test_say='''
        from pytest_gpuprof.run.outcomes import say


        def test_say(request):
            print("captured")
            say(request.config, "gpuprof: test_say.py::test_say: re-run 1 of 1: passed (1.0 s)")
    ''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # the terminal of a real run
    result.assert_outcomes(passed=1)
    assert "gpuprof: test_say.py::test_say: re-run 1 of 1: passed (1.0 s)" in result.outlines
    assert "captured" not in result.stdout.str()


def test_the_window_at_the_baseline_hosts_speed_is_worked_out_as_documented():
    """docs/metrics.md: each usable step's window times (R / r_i)^1.3, R the median reading of
    the baseline's usable steps; worked out here from the naive reader's step slices and
    launch readings (the stall flags are the package's, tested above)."""
    def at_speed(name, reference=None):
        naive, flags = Naive(HOST / f"{name}.pt.trace.json.gz"), measured(name).per_step["stalled"]
        usable = [i for i, stalled in enumerate(flags) if not stalled]
        readings = naive.launch_readings()
        reference = reference or statistics.median(readings[i] for i in usable)
        windows = [hi - lo for lo, hi in naive.step_slices()]
        return statistics.median(windows[i] * (reference / readings[i]) ** 1.3 for i in usable), reference

    before, reference = at_speed("h100_fast_host")
    now, _ = at_speed("h100_slow_host", reference)
    window = next(v for v in judged("h100_slow_host", baseline("h100_fast_host")).verdicts if v.metric == "window_us")
    assert f"{now / before - 1:+.1%} at the baseline host's speed" in window.evidence
