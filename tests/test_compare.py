"""Rules and verdicts, on small hand-written metric sets."""

import pytest

from pytest_gpuprof.compare import Rules, judge, parse_threshold, test_status as status_of
from pytest_gpuprof.errors import ConfigError


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
    return {v.metric: v for v in verdicts if v.failed or v.status in ("new", "vanished")}


def test_identical_metrics_pass():
    verdicts = judge(metrics(), metrics(), Rules())
    assert status_of(verdicts, True) == "passed" and not failed(verdicts)


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
    assert status_of(judge(metrics(sync_count=0), metrics(sync_count=10), Rules()), True) == "improved"
    v = failed(judge(metrics(sync_count=20), metrics(sync_count=10), Rules()))["sync_count"]
    assert v.status == "regressed" and v.change() == "+100.0%"


def test_time_tolerance_and_floor():
    rules = Rules(time_tolerance=0.10, time_floor_us=5.0)
    assert not failed(judge(metrics(kernel_time_us=1099.0), metrics(), rules))  # +9.9%
    v = failed(judge(metrics(kernel_time_us=1200.0), metrics(), rules))["kernel_time_us"]
    assert v.status == "regressed" and v.baseline == 100.0 and v.current == 120.0 and v.change() == "+20.0%"
    # +50% of a 2 us per step copy is 1 us: under the floor, not a regression
    assert not failed(judge(metrics(memcpy_htod_time_us=30.0), metrics(memcpy_htod_time_us=20.0), rules))
    assert status_of(judge(metrics(kernel_time_us=500.0), metrics(), rules), True) == "improved"


def test_ratio_tolerance_is_absolute_and_directional():
    rules = Rules(ratio_tolerance=0.05)
    assert not failed(judge(metrics(gpu_utilization=0.86), metrics(), rules))
    v = failed(judge(metrics(gpu_utilization=0.80), metrics(), rules))["gpu_utilization"]
    assert v.status == "regressed" and v.change() == "-0.1"
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
    assert status_of(judge(now, metrics(), Rules()), True) == "failed"


def test_thresholds_apply_without_a_baseline():
    rules = Rules(thresholds=(parse_threshold("gpu_utilization >= 85%", "test"),
                              parse_threshold("sync_count == 0", "test")))
    verdicts = judge(metrics(gpu_utilization=0.8, sync_count=3), None, rules)
    bad = failed(verdicts)
    assert bad["gpu_utilization"].rule == "gpu_utilization >= 0.85"
    assert bad["sync_count"].current == 0.3  # per step
    assert status_of(verdicts, False) == "failed"
    assert status_of(judge(metrics(), None, rules), False) == "no baseline"


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
