"""Noise-aware time comparison and measurement health."""

import numpy as np
import pytest

from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.stats import mann_whitney_u
from pytest_gpuprof.compare.verdicts import judge
from pytest_gpuprof.metrics import health

# Reference p-values from SciPy 1.x (scipy.stats.mannwhitneyu, two-sided), an independent
# implementation: exact for the first three, asymptotic with tie correction for the last two.
A10 = [10.126, 9.868, 10.640, 10.105, 9.464, 10.362, 11.304, 10.947, 9.316, 8.679]
B10 = [11.878, 11.778, 10.334, 10.403, 10.667, 10.631, 11.041, 10.094, 11.454, 11.712]
CASES = [
    ([1, 2, 3], [4, 5, 6], 0.0, 0.1),
    ([-0.8019, -1.3244, -0.2484, 0.4204, 1.1360], [0.9097, 0.2474, 0.0152, 1.5487, 2.4348, 1.0728, -0.4333],
     9.0, 0.20202020202020204),
    ([1, 2, 2, 3, 4], [2, 3, 5, 6, 6, 7], 4.5, 0.06414661873440437),
]


@pytest.mark.parametrize("a, b, u, p", CASES)
def test_mann_whitney_matches_scipy(a, b, u, p):
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u and got_p == pytest.approx(p, rel=1e-9)


def test_mann_whitney_is_symmetric_and_exact_for_ten_steps():
    u, p = mann_whitney_u(A10, B10)
    u2, p2 = mann_whitney_u(B10, A10)
    assert u + u2 == 100 and p == pytest.approx(p2)
    # every value of B above every value of A but one pair: the smallest p there is
    _, extreme = mann_whitney_u(list(range(10)), list(range(10, 20)))
    assert extreme == pytest.approx(2 / 184756)  # 2 / C(20, 10)


def metrics(kernel_us_per_step, steps):
    return {"kernel_time_us": sum(kernel_us_per_step), "step_count": steps, "kernels": {}}


def verdict(before, now, **rules):
    v = judge(metrics(now, len(now)), metrics(before, len(before)), Rules(**rules), True,
              ({"kernel_time_us": now}, {"kernel_time_us": before}))
    return next(x for x in v if x.metric == "kernel_time_us")


def test_a_real_slowdown_is_a_regression_with_its_p_value():
    rng = np.random.default_rng(1)
    base = list(1000 + rng.normal(0, 5, 10))
    slow = list(1120 + rng.normal(0, 5, 10))
    v = verdict(base, slow)
    assert v.status == "regressed" and v.baseline == pytest.approx(np.median(base))
    assert "Mann-Whitney U p=" in v.evidence and "n=10/10" in v.evidence


def test_a_change_beyond_tolerance_but_within_noise_is_not_a_regression():
    # medians 12% apart, but the steps overlap completely: no evidence of a change
    base = [1000, 1300, 900, 1250, 950, 1100, 1000, 1350, 880, 1200]
    noisy = [1180, 1000, 1450, 950, 1350, 1200, 1060, 1420, 990, 1300]
    v = verdict(base, noisy)
    assert v.status == "ok" and "within noise" in v.evidence


def test_too_few_steps_is_undecided_and_says_how_many_to_run():
    v = verdict([1000, 1001, 999], [1200, 1201, 1199])
    assert v.status == "undecided" and "n=3/3" in v.evidence and "at least 5" in v.evidence
    assert not v.failed


def test_without_samples_the_means_are_compared_as_before():
    v = next(x for x in judge(metrics([1200] * 10, 10), metrics([1000] * 10, 10), Rules())
             if x.metric == "kernel_time_us")
    assert v.status == "regressed" and v.evidence == ""


@pytest.mark.parametrize("readings, times, words", [
    ({"sm_clock_mhz": [1200, 1980], "slowdowns": ["hardware power brake"], "other_processes": []}, [10] * 5,
     "hardware power brake"),
    ({"sm_clock_mhz": [1980, 1980], "slowdowns": ["hardware thermal slowdown"], "other_processes": []}, [10] * 5,
     "hardware thermal slowdown"),
    ({"sm_clock_mhz": [1980, 1980], "slowdowns": [], "other_processes": [4242]}, [10] * 5, "pid 4242"),
    (None, [30, 10, 10, 11, 10], "first measured step took 3.0x"),
])
def test_unhealthy_measurements_are_named(readings, times, words):
    reasons = health.assess(times, readings)
    assert len(reasons) == 1 and words in reasons[0]


def test_a_clock_drop_without_a_slowdown_reason_is_a_note_not_a_reason():
    readings = {"sm_clock_mhz": [1560, 1980], "slowdowns": [], "other_processes": []}
    assert health.assess([10] * 5, readings) == []
    assert health.clock_note(readings).startswith("SM clock ranged 1560-1980 MHz during the steps")
    # 0.85 of 1980 is 1683: a lowest clock at it is no drop, under it is
    assert health.clock_note({**readings, "sm_clock_mhz": [1683, 1980]}) is None
    assert health.clock_note({**readings, "sm_clock_mhz": [1682, 1980]}) is not None
    # with a slowdown reason the run is unstable (assess), and the note would repeat it
    slowed = {**readings, "slowdowns": ["hardware slowdown"]}
    assert health.clock_note(slowed) is None
    assert health.assess([10] * 5, slowed) == ["GPU slowed down: hardware slowdown"]


def test_a_healthy_measurement_has_no_reasons():
    assert health.assess([10, 10.5, 9.8, 10.1], {"sm_clock_mhz": [1950, 1980], "slowdowns": [],
                                                 "other_processes": []}) == []


# The exact distribution is used up to 30 steps a side (no ties), the normal approximation
# beyond.  Reference values from SciPy 1.17.1, scipy.stats.mannwhitneyu(a, b,
# alternative="two-sided", method="exact" | "asymptotic", use_continuity=True): at these
# sizes the two methods differ by a factor of about 3, so each side of the switch shows.
A30 = [float(x) for x in range(30)]
B30 = [x + 12.5 for x in range(30)]
B31 = [x + 12.5 for x in range(31)]


@pytest.mark.parametrize("a, b, u, p", [
    (A30, B30, 153.0, 4.109080573709038e-06),  # 30 and 30: exact (asymptotic would be 1.167e-05)
    (A30, B31, 153.0, 6.997145329436898e-06),  # 30 and 31: asymptotic (exact would be 2.206e-06)
    (B31, A30, 777.0, 6.997145329436898e-06),
])
def test_exact_up_to_30_steps_a_side_then_the_normal_approximation(a, b, u, p):
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u and got_p == pytest.approx(p, rel=1e-9)


# a kernel whose steps spread +-20% around 1 ms: two middle steps moved 1000 -> 1030 us (or
# 970) put the median 3% past the baseline's, beyond a 2% tolerance and the 5 us floor, while
# the steps hardly differ: U = 50 + 2 (or 48) of a mean 50 and a standard deviation of
# sqrt(10 * 10 * 21 / 12) = 13.2, p about 0.88, far from the level 0.01 / 1 series
SPREAD = [800, 850, 900, 950, 1000, 1000, 1050, 1100, 1150, 1200]
MOVED = {"slower": [800, 850, 900, 950, 1030, 1030, 1050, 1100, 1150, 1200],
         "faster": [800, 850, 900, 950, 970, 970, 1050, 1100, 1150, 1200]}


def one_process(now, base_process):
    v = judge(metrics(now, len(now)), metrics(SPREAD, len(SPREAD)), Rules(kernel_time_tolerance=0.02), True,
              ({"kernel_time_us": now}, {"kernel_time_us": SPREAD}), base_process=base_process)
    return next(x for x in v if x.metric == "kernel_time_us")


def test_a_slowdown_not_significant_against_one_base_process_is_a_provisional_regression_for_the_pairs():
    v = one_process(MOVED["slower"], base_process=True)
    assert (v.status, v.provisional, v.let_through) == ("regressed", True, "")
    assert (v.baseline, v.current, v.p_level) == (1000, 1030, 0.01) and v.p_value > 0.8
    assert v.evidence.endswith("(n=10/10): not significant against one base process: the pairs decide")
    assert v.failed and v.to_json()["provisional"] is True


def test_the_same_slowdown_against_a_stored_baseline_passes_as_not_significant():
    v = one_process(MOVED["slower"], base_process=False)
    assert (v.status, v.provisional, v.let_through) == ("ok", False, "not significant")
    assert (v.baseline, v.current) == (1000, 1030) and v.p_value > 0.8
    assert v.evidence.endswith("(n=10/10): within noise") and "provisional" not in v.to_json()


def test_an_improvement_not_significant_against_one_base_process_stays_ok():
    v = one_process(MOVED["faster"], base_process=True)
    assert (v.status, v.provisional, v.let_through) == ("ok", False, "not significant")
    assert (v.baseline, v.current) == (1000, 970) and v.evidence.endswith("within noise")


def test_the_window_not_significant_against_one_base_process_stays_ok():
    """Only kernel times are sent to the pairs so: the window moves with the host between
    processes (on the device, sending it sent half the unchanged transformer runs to the pairs)."""
    def window_metrics(per_step):
        return {"window_us": sorted(per_step)[len(per_step) // 2], "step_count": len(per_step), "kernels": {}}

    (v,) = [x for x in judge(window_metrics(MOVED["slower"]), window_metrics(SPREAD), Rules(time_tolerance=0.02), True,
                             ({"window_us": MOVED["slower"]}, {"window_us": SPREAD}), base_process=True)
            if x.metric == "window_us"]
    assert (v.status, v.provisional, v.let_through) == ("ok", False, "not significant")
    assert (v.baseline, v.current) == (1000, 1030) and v.evidence.endswith("within noise")
