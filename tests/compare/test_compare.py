"""Rules and verdicts, on small hand-written metric sets."""

import dataclasses

import pytest

from pytest_gpuprof.compare.evaluate import status_of
from pytest_gpuprof.compare.rules import Rules, parse_threshold
from pytest_gpuprof.compare.samples import distribution, stored_samples
from pytest_gpuprof.compare.stats import evenly_spaced
from pytest_gpuprof.compare.status import BROKEN
from pytest_gpuprof.compare.verdicts import judge
from pytest_gpuprof.errors import ConfigError
from pytest_gpuprof.metrics.specs import METRICS


def metrics(**over):
    base = {
        "kernel_count": 100, "kernel_time_us": 1000.0, "kernels": {"gemm": {"count": 60, "time_us": 900.0},
                                                                  "add": {"count": 40, "time_us": 100.0}},
        "memcpy_htod_count": 10, "memcpy_htod_bytes": 4096, "memcpy_htod_time_us": 50.0,
        "memcpy_dtoh_count": 0, "memcpy_dtoh_bytes": 0, "memcpy_dtoh_time_us": 0.0,
        "memcpy_dtod_count": 0, "memcpy_dtod_bytes": 0, "memcpy_dtod_time_us": 0.0,
        "memcpy_ptop_count": 0, "memcpy_ptop_bytes": 0, "memcpy_ptop_time_us": 0.0,
        "memset_count": 0, "gpu_utilization": 0.9, "copy_utilization": 0.05, "overlap_efficiency": 0.8,
        "sync_count": 0, "sync_wait_fraction": 0.0, "window_us": 1200.0, "step_count": 10,
        "step_gpu_time_us": [100.0] * 10, "peak_memory_allocated_bytes": 1 << 20,
    }
    base.update(over)
    return base


def failed(verdicts):
    return {v.metric: v for v in verdicts if v.status in BROKEN}


def test_identical_metrics_pass():
    verdicts = judge(metrics(), metrics(), Rules())
    assert status_of(verdicts) == "passed" and not failed(verdicts)


def test_counts_are_compared_per_step():
    # twice the steps, twice the totals: the same program
    twice = metrics(kernel_count=200, step_count=20, kernel_time_us=2000.0, window_us=2400.0,
                    memcpy_htod_count=20, memcpy_htod_bytes=8192, memcpy_htod_time_us=100.0,
                    kernels={"gemm": {"count": 120, "time_us": 1800.0}, "add": {"count": 80, "time_us": 200.0}})
    assert not failed(judge(twice, metrics(), Rules()))


def test_a_changed_count_fails_either_way():
    for count in (99, 101):
        bad = failed(judge(metrics(kernel_count=count), metrics(), Rules()))
        assert bad["kernel_count"].status == "changed"
        assert bad["kernel_count"].baseline == 10 and bad["kernel_count"].current == count / 10


def test_fewer_syncs_is_an_improvement_more_is_a_regression():
    assert status_of(judge(metrics(sync_count=0), metrics(sync_count=10), Rules())) == "improved"
    v = failed(judge(metrics(sync_count=20), metrics(sync_count=10), Rules()))["sync_count"]
    assert v.status == "regressed" and v.change() == "+100.0%"


def test_kernel_times_default_to_5_percent_and_other_times_to_10():
    rules = Rules()
    v = failed(judge(metrics(kernel_time_us=1060.0), metrics(), rules))["kernel_time_us"]  # +6%
    assert v.status == "regressed" and "±5%" in v.rule
    assert not failed(judge(metrics(kernel_time_us=1049.0), metrics(), rules))  # +4.9%
    small = Rules(kernel_time_tolerance=0.02, time_floor_us=0.5)  # a 2% minimum effect: +3% fails, +1.9% not
    assert failed(judge(metrics(kernel_time_us=1030.0), metrics(), small))["kernel_time_us"].status == "regressed"
    assert not failed(judge(metrics(kernel_time_us=1019.0), metrics(), small))
    copies = metrics(memcpy_htod_time_us=2000.0, window_us=4000.0)
    slower = metrics(memcpy_htod_time_us=2180.0, window_us=4360.0)  # +9% each
    assert not failed(judge(slower, copies, rules))
    worse = failed(judge(metrics(memcpy_htod_time_us=2220.0, window_us=4440.0), copies, rules))  # +11%
    assert sorted(worse) == ["memcpy_htod_time_us", "window_us"] and "±10%" in worse["window_us"].rule


def test_a_kernel_names_time_follows_the_kernel_time_tolerance():
    spec = METRICS["kernel_time_us"]
    per_kernel = dataclasses.replace(spec, name="kernels[gemm].time_us")
    assert Rules().tolerance(per_kernel) == Rules().tolerance(spec) == 0.05
    assert Rules(kernel_time_tolerance=0.2).tolerance(per_kernel) == 0.2
    assert Rules(tolerances={"kernel_time_us": 0.3}).tolerance(per_kernel) == 0.3
    assert Rules(time_tolerance=0.4).tolerance(METRICS["window_us"]) == 0.4


def test_time_tolerance_and_floor():
    rules = Rules(kernel_time_tolerance=0.10, time_tolerance=0.10, time_floor_us=5.0)
    assert not failed(judge(metrics(kernel_time_us=1099.0), metrics(), rules))  # +9.9%
    v = failed(judge(metrics(kernel_time_us=1200.0), metrics(), rules))["kernel_time_us"]
    assert v.status == "regressed" and v.baseline == 100.0 and v.current == 120.0 and v.change() == "+20.0%"
    # +50% of a 2 us per step copy is 1 us: under the floor, not a regression
    assert not failed(judge(metrics(memcpy_htod_time_us=30.0), metrics(memcpy_htod_time_us=20.0), rules))
    assert status_of(judge(metrics(kernel_time_us=500.0), metrics(), rules)) == "improved"


def test_ratio_tolerance_is_absolute_and_directional():
    rules = Rules(ratio_tolerance=0.05)
    assert not failed(judge(metrics(gpu_utilization=0.86), metrics(), rules))
    v = failed(judge(metrics(gpu_utilization=0.80), metrics(), rules))["gpu_utilization"]
    assert v.status == "regressed" and v.change() == "-10.0 pp"
    assert failed(judge(metrics(sync_wait_fraction=0.2), metrics(), rules))["sync_wait_fraction"].status == "regressed"
    # copy_utilization has no better direction: reported, never gated
    assert not failed(judge(metrics(copy_utilization=0.5), metrics(), rules))


def test_per_metric_tolerance_overrides():
    rules = Rules(tolerances={"kernel_time_us": 0.5})
    assert not failed(judge(metrics(kernel_time_us=1400.0), metrics(), rules))


def test_new_and_vanished_kernels_fail():
    now = metrics(kernels={"gemm_bf16": {"count": 60, "time_us": 900.0}, "add": {"count": 40, "time_us": 100.0}})
    bad = failed(judge(now, metrics(), Rules()))
    assert bad["kernels[gemm_bf16].count"].status == "new"
    assert bad["kernels[gemm].count"].status == "vanished"
    assert status_of(judge(now, metrics(), Rules())) == "failed"


def test_thresholds_apply_without_a_baseline():
    rules = Rules(thresholds=(parse_threshold("gpu_utilization >= 85%", "test"),
                              parse_threshold("sync_count == 0", "test")))
    verdicts = judge(metrics(gpu_utilization=0.8, sync_count=3), None, rules)
    bad = failed(verdicts)
    assert bad["gpu_utilization"].rule == "gpu_utilization >= 0.85"
    assert bad["sync_count"].current == 0.3  # per step
    assert status_of(verdicts, has_baseline=False) == "failed"
    assert status_of(judge(metrics(), None, rules), has_baseline=False) == "no baseline"


def test_threshold_on_a_missing_value_is_not_applicable():
    rules = Rules(thresholds=(parse_threshold("overlap_efficiency >= 0.6", "t"),))
    assert not failed(judge(metrics(overlap_efficiency=None), None, rules))


@pytest.mark.parametrize("text", ["gpu_utilization >> 0.8", "gpu_utilization >= high", "__import__('os')",
                                  "nonsense_metric >= 1", "gpu_utilization >= 0.8; rm -rf /"])
def test_bad_thresholds_are_refused_with_their_origin(text):
    with pytest.raises(ConfigError, match="--gpuprof-threshold"):
        parse_threshold(text, "--gpuprof-threshold")


@pytest.mark.parametrize("text, op, value", [
    ("gpu_utilization>=0.85", ">=", 0.85), (" sync_wait_fraction <= 10% ", "<=", 0.1),
    ("kernel_count == 120", "==", 120.0), ("overlap_efficiency > .6", ">", 0.6), ("window_us < 1e3", "<", 1000.0),
])
def test_threshold_grammar(text, op, value):
    t = parse_threshold(text, "x")
    assert (t.op, t.value) == (op, pytest.approx(value))


# --- time metrics on per-step samples and their distributions ---------------------

def timed(per_step_us):
    """Metrics whose only time of note is ``kernel_time_us``, with these per-step values."""
    return metrics(kernel_time_us=sum(per_step_us), step_count=len(per_step_us), kernel_count=10 * len(per_step_us),
                   kernels={}, memcpy_htod_count=0, memcpy_htod_bytes=0, memcpy_htod_time_us=0.0,
                   window_us=2000.0 * len(per_step_us))


def kernel_time(verdicts):
    return next(v for v in verdicts if v.metric == "kernel_time_us")


def test_a_capped_baseline_is_judged_on_the_median_of_all_its_steps():
    # 1000 baseline steps at 100 us, except the 200 steps the cap keeps, at 130 us: the samples kept
    # say 130, all the steps 100
    n = 1000
    kept = set(evenly_spaced(list(range(n))))
    base = [130.0 if i in kept else 100.0 for i in range(n)]
    now = [100.5, 101.0, 101.5, 100.8, 101.2, 100.9, 101.1, 100.7, 101.3, 101.0]
    samples = (stored_samples({"kernel_time_us": now}), stored_samples({"kernel_time_us": base}))
    assert samples[1]["kernel_time_us"] == [130.0] * 200
    dists = (distribution({"kernel_time_us": now}), distribution({"kernel_time_us": base}))
    assert dists[1]["kernel_time_us"]["median"] == 100.0 and dists[1]["kernel_time_us"]["n"] == n

    v = kernel_time(judge(timed(now), timed(base), Rules(), True, samples, dists))
    assert (v.status, v.baseline, v.current, v.evidence) == ("ok", 100.0, 101.0, "")  # +1%: within the tolerance
    # without the summaries the kept samples' median (130) would call it a 22% improvement
    assert kernel_time(judge(timed(now), timed(base), Rules(), True, samples)).status == "improved"


def test_an_old_baseline_without_a_distribution_is_summarized_from_its_samples():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]
    now = [v + 20 for v in base]
    steps = {"kernel_time_us": now, "kernels": {"gemm": now}}
    old = {"kernel_time_us": base, "kernels": {"gemm": base}}  # a baseline entry's per_step, no distribution
    verdicts = judge(timed(now), timed(base), Rules(), True, (steps, old), (distribution(steps), None))
    v = kernel_time(verdicts)
    assert (v.status, v.baseline, v.current) == ("regressed", 100.0, 120.0)
    k = next(x for x in verdicts if x.metric == "kernels[gemm].time_us")
    assert (k.status, k.baseline, k.current, k.evidence) == ("regressed", 100.0, 120.0, v.evidence)


def test_time_evidence_shows_both_medians_and_spreads_on_one_line():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]  # sorted: 99 99.5 99.8 99.9 100 100 ...
    now = [v + 20 for v in base]
    v = kernel_time(judge(timed(now), timed(base), Rules(), True, ({"kernel_time_us": now}, {"kernel_time_us": base})))
    # quartiles at positions 2.25 and 6.75 of the sorted ten: 99.8 + 0.25 * 0.1 and 100.1 + 0.75 * 0.1
    # 4 significant digits: 119.825 -> 119.8, 120.175 -> 120.2, 99.825 -> 99.83, 100.175 -> 100.2
    assert v.evidence == ("median 120 µs (IQR 119.8–120.2 µs, n=10) vs baseline 100 µs (IQR 99.83–100.2 µs, n=10); "
                          "Mann-Whitney U p=0.00018 (n=10/10)")
    few = kernel_time(judge(timed(now[:3]), timed(base[:4]), Rules(), True,
                            ({"kernel_time_us": now[:3]}, {"kernel_time_us": base[:4]})))
    assert few.status == "undecided" and "\n" not in few.evidence
    # 100.25 to 4 significant digits, half to even
    assert few.evidence.startswith("median 120 µs (IQR 119.5–120.5 µs, n=3) vs baseline 100.2 µs (")
    # one series judged: the level is 0.01, and with 3 and 4 steps no p can get under it (2 / C(7, 3) = 0.057)
    assert few.evidence.endswith("; too few steps to tell a change from noise (n=3/4): no p-value can get under "
                                 "0.01; measure at least 5 steps")


def test_the_level_is_corrected_for_the_number_of_time_series_judged():
    """Bonferroni: with m series judged, each needs p < 0.01 / m.  Ten steps that differ
    by 20 us with ties across (p = 0.00018, above) pass one series' level, not that of 100."""
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]
    now = [v + 20 for v in base]
    alone = kernel_time(judge(timed(now), timed(base), Rules(), True,
                              ({"kernel_time_us": now}, {"kernel_time_us": base})))
    assert alone.status == "regressed" and alone.rule.endswith("(Mann-Whitney p < 0.01 / 1 series = 0.01)")
    many = {f"k{i}": base for i in range(99)}
    crowd = kernel_time(judge(timed(now), timed(base), Rules(), True,
                              ({"kernel_time_us": now, "kernels": many}, {"kernel_time_us": base, "kernels": many})))
    assert crowd.rule.endswith("(Mann-Whitney p < 0.01 / 100 series = 0.0001)")
    assert crowd.status == "ok" and crowd.evidence.endswith("p=0.00018 (n=10/10): within noise")
    # with 5 steps a side no p-value reaches 0.01 / 100 (2 / C(10, 5) = 0.0079): undecided, and how many steps would do
    five = kernel_time(judge(timed(now[:5]), timed(base[:5]), Rules(), True,
                             ({"kernel_time_us": now[:5], "kernels": many},
                              {"kernel_time_us": base[:5], "kernels": many})))
    assert five.status == "undecided"
    assert five.evidence.endswith("no p-value can get under 0.0001; measure at least 9 steps")


# --- boundaries of each rule, and the order of the statuses ----------------------

def verdict_of(name, verdicts):
    return next(v for v in verdicts if v.metric == name)


@pytest.mark.parametrize("current, status", [
    (0.85, "ok"),  # 0.9 - 0.85 is 0.05000000000000004 in floating point: a drop of exactly the tolerance
    (0.8499999, "regressed"),  # 1e-7 beyond it
    (0.95, "ok"), (0.9500001, "improved"),
])
def test_a_ratio_may_move_by_exactly_its_tolerance(current, status):
    v = verdict_of("gpu_utilization", judge(metrics(gpu_utilization=current), metrics(gpu_utilization=0.9), Rules()))
    assert v.status == status


@pytest.mark.parametrize("per_step_us, status", [
    (105.0, "ok"),  # +5 us of 100: exactly 5%, and exactly the 5 us floor
    (105.001, "regressed"),
    (95.0, "ok"), (94.999, "improved"),
])
def test_a_time_may_move_by_exactly_its_tolerance(per_step_us, status):
    rules = Rules(kernel_time_tolerance=0.05, time_floor_us=5.0)
    v = verdict_of("kernel_time_us", judge(metrics(kernel_time_us=per_step_us * 10), metrics(), rules))
    assert v.status == status


def test_the_floor_holds_back_a_relative_change_beyond_the_tolerance():
    rules = Rules(time_floor_us=5.0)
    # memcpy_htod_time_us 5 us per step -> 10 us: +100%, but only 5 us: not beyond the floor
    assert verdict_of("memcpy_htod_time_us", judge(metrics(memcpy_htod_time_us=100.0),
                                                   metrics(memcpy_htod_time_us=50.0), rules)).status == "ok"
    assert verdict_of("memcpy_htod_time_us", judge(metrics(memcpy_htod_time_us=100.01),
                                                   metrics(memcpy_htod_time_us=50.0), rules)).status == "regressed"


@pytest.mark.parametrize("text, value, holds", [
    ("gpu_utilization >= 0.85", 0.85, True), ("gpu_utilization >= 0.85", 0.8499999, False),
    ("gpu_utilization > 0.85", 0.85, False), ("sync_wait_fraction <= 0.1", 0.1, True),
    ("sync_wait_fraction < 0.1", 0.1, False), ("sync_count == 0", 0.0, True), ("sync_count != 0", 0.0, False),
])
def test_threshold_boundaries(text, value, holds):
    assert parse_threshold(text, "t").holds(value) is holds


def v(status):
    from pytest_gpuprof.compare.verdict import Verdict

    return Verdict("m", status, 1.0, 1.0, "rule")


@pytest.mark.parametrize("statuses, has_baseline, expected", [
    (["ok", "improved", "undecided", "changed"], True, "failed"),  # anything broken fails the test
    (["ok", "new"], True, "failed"), (["vanished"], True, "failed"), (["threshold"], False, "failed"),
    (["ok"], False, "no baseline"),
    (["ok", "improved", "undecided"], True, "undecided"),  # undecided before improved
    (["undecided", "improved"], True, "undecided"),
    (["ok", "improved"], True, "improved"),
    (["ok"], True, "passed"), ([], True, "passed"),
])
def test_status_precedence(statuses, has_baseline, expected):
    assert status_of([v(s) for s in statuses], has_baseline=has_baseline) == expected


def test_the_kernel_diff_divides_each_run_by_its_own_step_count():
    """Baseline: 10 steps, gemm 60 launches over 900 us (6 per step, 90 us per step); current:
    5 steps, 30 launches over 500 us (6 per step, 100 us per step)."""
    from pytest_gpuprof.compare.kernels import kernel_diff

    base = metrics(step_count=10, kernels={"gemm": {"count": 60, "time_us": 900.0}})
    now = metrics(step_count=5, kernels={"gemm": {"count": 30, "time_us": 500.0}, "add": {"count": 5, "time_us": 1.0}})
    rows = {r["name"]: r for r in kernel_diff(now, base)}
    assert rows["gemm"] == {"name": "gemm", "status": "time only", "baseline_count": 6.0, "current_count": 6.0,
                            "baseline_time_us": 90.0, "current_time_us": 100.0, "time_change_us": 10.0}
    assert rows["add"]["status"] == "new"
    assert rows["add"]["current_count"] == 1.0 and rows["add"]["current_time_us"] == 0.2
    assert [r["name"] for r in kernel_diff(now, base)] == ["add", "gemm"]  # gated changes first
