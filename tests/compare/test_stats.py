"""Distribution summaries and the cap on stored per-step samples, on values worked out by hand."""

import pytest

from pytest_gpuprof.compare.samples import distribution, stored_samples
from pytest_gpuprof.compare.stats import (
    MAX_STORED_SAMPLES,
    evenly_spaced,
    smallest_p,
    steps_for,
    summarize,
)


@pytest.mark.parametrize("samples, expected", [
    # sorted 1 2 3 4: q1 at position 0.75 -> 1 + 0.75 * (2 - 1), median at 1.5, q3 at 2.25
    ([4, 1, 3, 2], {"n": 4, "median": 2.5, "q1": 1.75, "q3": 3.25, "min": 1.0, "max": 4.0}),
    # sorted 10 20 30 40 50: positions 1, 2, 3 fall on values
    ([50, 10, 40, 20, 30], {"n": 5, "median": 30.0, "q1": 20.0, "q3": 40.0, "min": 10.0, "max": 50.0}),
    # sorted 1 2 4 8 16 32: q1 at 1.25 -> 2 + 0.25 * 2, median at 2.5 -> 6, q3 at 3.75 -> 8 + 0.75 * 8
    ([32, 1, 16, 2, 8, 4], {"n": 6, "median": 6.0, "q1": 2.5, "q3": 14.0, "min": 1.0, "max": 32.0}),
    ([7.25], {"n": 1, "median": 7.25, "q1": 7.25, "q3": 7.25, "min": 7.25, "max": 7.25}),
    # 1 ns resolution: median (0.0004 + 0.0012) / 2 = 0.0008 -> 0.001; q1 at 0.25 -> 0.0006 -> 0.001
    ([0.0004, 0.0012], {"n": 2, "median": 0.001, "q1": 0.001, "q3": 0.001, "min": 0.0, "max": 0.001}),
])
def test_summary_by_hand(samples, expected):
    got = summarize(samples)
    assert got == pytest.approx(expected, abs=1e-12) and set(got) == set(expected)
    assert isinstance(got["n"], int) and all(type(v) is float for k, v in got.items() if k != "n")


@pytest.mark.parametrize("n, cap, kept", [
    (10, 4, [0, 3, 6, 9]),  # 0, 3, 6, 9 exactly
    (6, 5, [0, 1, 2, 4, 5]),  # 0, 1.25, 2.5, 3.75, 5: 2.5 rounds half to even
    (7, 3, [0, 3, 6]),
    (3, 4, [0, 1, 2]),  # under the cap: all of them
])
def test_cap_keeps_evenly_spaced_steps_by_hand(n, cap, kept):
    values = [100 + 10 * i for i in range(n)]
    assert evenly_spaced(values, cap) == [values[i] for i in kept]


def test_cap_keeps_exactly_cap_samples_first_and_last_in_order_and_the_summary_sees_all():
    n = 1001
    values = [1000.0 + (i * 37 % n) for i in range(n)]  # 37 is prime to 1001: 1000 .. 2000, each once, shuffled
    per_step = {"kernel_time_us": values, "kernel_count": list(range(n)), "kernels": {"gemm": values}}
    kept = stored_samples(per_step)
    assert len(kept["kernel_time_us"]) == MAX_STORED_SAMPLES == 200
    # the same steps in every list, in time order (kernel_count holds the step index), first and last among them
    steps = kept["kernel_count"]
    assert steps[0] == 0 and steps[-1] == n - 1 and steps == sorted(set(steps)) and len(steps) == 200
    assert kept["kernel_time_us"] == [values[i] for i in steps] == kept["kernels"]["gemm"]
    assert len(per_step["kernel_time_us"]) == n  # the input is left alone
    # all 1001 steps: sorted, the value at position p * 1000 is 1000 + p * 1000
    expected = {"n": n, "median": 1500.0, "q1": 1250.0, "q3": 1750.0, "min": 1000.0, "max": 2000.0}
    assert distribution(per_step)["kernel_time_us"] == expected == distribution(per_step)["kernels"]["gemm"]
    ordered = sorted(kept["kernel_time_us"])
    assert (ordered[99] + ordered[100]) / 2 != 1500.0  # the kept samples alone would give another median


def test_distribution_covers_time_series_only_and_takes_stored_summaries_as_they_are():
    per_step = {"kernel_count": [2, 2, 2], "memcpy_htod_bytes": [8, 8, 8], "window_us": [3.0, 1.0, 2.0],
                "kernels": {"gemm": [1.0, 1.0, 4.0]}}
    d = distribution(per_step)
    assert set(d) == {"window_us", "kernels"} and set(d["kernels"]) == {"gemm"}
    assert d["window_us"]["median"] == 2.0 and d["kernels"]["gemm"]["max"] == 4.0
    stored = {"window_us": {"n": 5000, "median": 9.0, "q1": 8.0, "q3": 10.0, "min": 1.0, "max": 12.0}}
    again = distribution(per_step, stored)
    assert again["window_us"] is stored["window_us"] and again["kernels"] == d["kernels"]  # the rest: from samples


def test_smallest_p_and_the_steps_a_level_needs_worked_by_hand():
    # every step of one run below every step of the other: 2 of C(n1 + n2, n1) orderings
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(3, 4) == pytest.approx(2 / 35)
    assert smallest_p(1, 1) == 1.0  # 2 / C(2, 1) = 1
    # 0.01: 4 a side give 2/70 = 0.029, 5 a side 2/252 = 0.0079
    assert steps_for(0.01) == 5
    # 0.01 / 26 = 0.000385: 7 a side give 2/3432 = 0.00058, 8 a side 2/12870 = 0.00016
    assert steps_for(0.01 / 26) == 8
