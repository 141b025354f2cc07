"""Numbers a person reads: each kind of quantity in the unit its size calls for,
to 4 significant digits; a ratio as a percentage and its change in percentage points.
Every expected string is worked out by hand from the raw number."""

import pytest

from pytest_gpuprof.compare import host
from pytest_gpuprof.compare.verdict import shown_value
from pytest_gpuprof.numbers import (
    format_bytes,
    format_change,
    format_count,
    format_points,
    format_quantity,
    format_rate,
    format_ratio,
    format_time_us,
)
from pytest_gpuprof.report.words import broken_brief, broken_header, verdict_state


@pytest.mark.parametrize(("us", "signed", "shown"), [
    (14821.444, False, "14.82 ms"),  # 14.821444 ms, 4 significant digits
    (9288.122, False, "9.288 ms"),
    (269.536, False, "269.5 µs"),
    (999.96, False, "1 ms"),  # rounds to 1000.0 µs: the next unit up
    (2_500_000, False, "2.5 s"),
    (12.624, True, "+12.62 µs"),
    (-1140.0, True, "-1.14 ms"),
    (0.0063, True, "+0.006 µs"),  # traces resolve 1 ns: no digit past the third decimal of a µs
    (0, False, "0 µs"),
])
def test_times_in_the_unit_their_size_calls_for(us, signed, shown):
    assert format_time_us(us, signed) == shown


@pytest.mark.parametrize(("count", "shown"), [
    (315382784, "300.8 MiB"),  # 315382784 / 2**20 = 300.77
    (524288, "512 KiB"),
    (1023, "1023 B"),
    (1.5 * 2**30, "1.5 GiB"),
    (1048575.9, "1 MiB"),  # 1023.9999 KiB rounds to 1024: the next unit up
    (0, "0 B"),
])
def test_bytes_in_binary_units(count, shown):
    assert format_bytes(count) == shown


def test_ratios_as_percentages_and_their_changes_in_points():
    assert format_ratio(0.755841) == "75.6%"
    assert format_points(-0.227038) == "-22.7 pp"
    assert format_change(0.755841, 0.982879, "ratio") == "-22.7 pp"  # 0.755841 - 0.982879 = -0.227038
    assert format_quantity(0.755841, "ratio") == "75.6%"


def test_counts_as_integers_with_their_change():
    assert format_count(64, signed=True) == "+64"
    assert format_count(8 / 3) == "2.667"  # a mean per step that is no integer
    assert format_change(8, 0, "count") == "+8"  # from 0: the difference
    assert format_change(95, 71, "count") == "+33.8%"  # 24 / 71 = 0.33803


def test_a_change_from_zero_is_said_in_the_metrics_unit():
    assert format_change(1200, 0, "time", "us") == "+1.2 ms"
    assert format_change(3 * 2**20, 0, "bytes", "B") == "+3 MiB"


def test_rates_and_percentages_of_peak():
    assert format_rate(0.0050294) == "0.005029 GB/s"
    assert format_rate(420.43) == "420.4 GB/s"
    assert format_quantity(45.218, "percent", "%") == "45.22%"
    assert format_quantity(2.5, "percent", "%", signed=True) == "+2.5 pp"


def test_each_metric_by_its_kind():
    assert shown_value("kernel_time_us", 14821.444) == "14.82 ms"
    assert shown_value("memcpy_dtoh_bytes", 315382784) == "300.8 MiB"
    assert shown_value("gpu_utilization", 0.755841) == "75.6%"
    assert shown_value("sync_count", 8) == "8"
    assert shown_value("kernels[gemm].time_us", 1500.0) == "1.5 ms"
    assert shown_value("kernels[gemm].count", 9) == "9"
    assert shown_value("launch_call_us", None) == "n/a"


def test_the_host_is_as_fast_when_its_factor_reads_1_00():
    assert host.slower(4.119, 4.1).startswith("the host ran as fast as the baseline's")  # 1.0046x
    assert host.slower(7.2, 4.5).startswith("the host ran 1.60x slower than the baseline's")
    assert host.slower(4.5, 7.2).startswith("the host ran 1.60x faster than the baseline's")
    assert "(launch calls 7.2 µs; baseline 4.5 µs)" in host.slower(7.2, 4.5)


def test_a_verdict_that_compared_nothing_says_so():
    v = {"metric": "memcpy_dtoh_gbps", "status": "ok", "baseline": None, "current": 0.005,
         "rule": "not compared: the baseline's recorded runs do not all hold its steps"}
    assert verdict_state(v) == "not compared"
    assert verdict_state({**v, "rule": "within ±5%"}) == "ok"


def _verdict(metric, status, baseline, current, change="", **more):
    return {"metric": metric, "status": status, "baseline": baseline, "current": current, "change": change,
            "rule": "must match exactly per step", **more}


def test_a_failures_first_line_names_what_broke():
    briefs = [broken_brief([_verdict("kernel_count", "changed", 71, 95, "+33.8%")]),
              broken_brief([_verdict("sync_count", "threshold", None, 8, threshold={"op": "==", "value": 0})]),
              broken_brief([_verdict("gpu_utilization", "regressed", 0.982879, 0.755841, "-22.7 pp")])]
    assert briefs == ["kernel_count 71 → 95 (+33.8%)", "sync_count 8 (threshold == 0)",
                      "gpu_utilization 98.3% → 75.6% (-22.7 pp)"]
    assert broken_header(12, "NVIDIA H200", "baseline file b.json", briefs) == (
        "12 metric(s) broke on NVIDIA H200: kernel_count 71 → 95 (+33.8%), sync_count 8 (threshold == 0), "
        "gpu_utilization 98.3% → 75.6% (-22.7 pp) and 9 more (baseline file b.json)")
    assert broken_brief([_verdict("kernels[my_kernel].count", "new", None, 2)]) == "kernels[my_kernel].count new"
    kernel = "kernels[void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float> >(int)].count"
    assert broken_brief([_verdict(kernel, "changed", 1, 9, "+800.0%")]) == \
        "kernels[vectorized_elementwise_kernel].count 1 → 9 (+800.0%)"  # the function's own name
