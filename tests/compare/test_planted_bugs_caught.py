"""Each planted bug of the example suite, recorded on a GPU, fails the right test
naming the metric that caught it (replayed against the committed baselines)."""

from pathlib import Path

import pytest

from helpers.suites import NO_GPU

ROOT = Path(__file__).parents[2]
PLANTED = Path(__file__).parents[1] / "data" / "planted"

# bug -> (test it plants into, lines the failure message must hold)
CAUGHT = {
    "item": ("test_moe", ["*sync_count: current 8 violates threshold sync_count == 0; baseline 0, current 8 (+8) "
                          "[[]regressed*",
                          "*memcpy_dtoh_count: baseline 0, current 8 (+8) [[]changed*"]),
    "compute_stream": ("test_weight_streaming", ["*overlap_efficiency: current 0.0% violates threshold "
                                                 "overlap_efficiency >= 0.6; baseline 98.*%, current 0.0% (-98.* pp) "
                                                 "[[]regressed*"]),
    "pageable": ("test_weight_streaming", ["*overlap_efficiency: current *% violates threshold*",
                                           "*memcpy_htod_time_us: baseline *, current * (+*%) [[]regressed*"]),
    "extra_kernel": ("test_transformer", ["*kernel_count: baseline 236, current 244 (+3.4%) [[]changed*",
                                          "*MulFunctor*count: baseline 1, current 9 (+800.0%) [[]changed*"]),
    "fp32": ("test_cnn", ["*kernel_count: baseline 172, current 107 (-37.8%) [[]changed*",
                          "*kernel_time_us: baseline *, current * (+5*%) [[]regressed*",
                          "*tf32*count: new kernel*"]),
}


def run_example_suite(pytester, *args):
    """pytest on the real example suite and baselines, from the repository root."""
    pytester.chdir()
    return pytester.runpytest_subprocess(
        str(ROOT / "example_suite"), "--rootdir", str(ROOT), "-p", "no:cacheprovider", *args
    )


@pytest.mark.parametrize("bug", sorted(CAUGHT))
def test_planted_bug_fails_naming_the_metric(pytester, bug):
    test, lines = CAUGHT[bug]
    result = run_example_suite(pytester, "--gpuprof", "--gpuprof-replay", str(PLANTED / bug), "-k", test)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gpuprof: * metric(s) broke on NVIDIA H200: *", *lines])


def test_shipped_traces_pass_against_the_baselines(pytester):
    result = run_example_suite(pytester, "--gpuprof", "--gpuprof-replay", str(ROOT / "example_suite" / "traces"))
    result.assert_outcomes(passed=8)  # the two distributed tests judged rank by rank from their ranks' traces
    result.stdout.fnmatch_lines([
        "*example_suite/test_distributed.py::test_ddp_training [[]rank 1[]]*passed*86 (+0.0%)*",
        "*example_suite/test_moe.py::test_moe_forward*passed*71 (+0.0%)*",
    ])


def test_no_gpu_run_says_why_and_shows_a_real_trace(pytester):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the no-GPU path")
    result = run_example_suite(pytester, "--gpuprof")
    result.assert_outcomes(skipped=8)
    result.stdout.fnmatch_lines([
        f"*8 profiled test(s) skipped: {NO_GPU}",
        "*The GPU tests were skipped: this machine has no CUDA GPU*",
        "*total over 10 steps*",
        "kernels  * 71 * 7.305 ms * | * 710 * 73.17 ms",  # 7304.53 us and 73167.954 us, 4 significant digits
        "*Judge all shipped traces against the baselines, still without a GPU:",
        "  pytest example_suite --gpuprof --gpuprof-replay=example_suite/traces",
    ])


def test_a_new_synchronization_is_never_put_down_to_the_host(pytester, tmp_path):
    """The .item() bug makes the host wait and then launch slower (its reading 1.23x the
    baseline's): with readings on both sides, its utilization drop is still the code's."""
    baselines = str(tmp_path / "b")
    run_example_suite(pytester, "--gpuprof-update-baseline", f"--gpuprof-replay={ROOT / 'example_suite' / 'traces'}",
                      f"--gpuprof-baseline-dir={baselines}", "-k", "test_moe").assert_outcomes(passed=1)
    result = run_example_suite(pytester, "--gpuprof", f"--gpuprof-replay={PLANTED / 'item'}",
                               f"--gpuprof-baseline-dir={baselines}", "-k", "test_moe")
    result.assert_outcomes(failed=1)
    # 0.755841 is 75.6%, 0.557791 55.8%; changes in percentage points
    result.stdout.fnmatch_lines(["*gpu_utilization: current 75.6% violates threshold gpu_utilization >= 0.85; "
                                 "baseline 98.*%, current 75.6% (-2*.* pp) [[]regressed*",
                                 "*sync_wait_fraction: baseline 0.0%, current 55.8% (+55.8 pp) [[]regressed*"])
    assert "the host ran" not in result.stdout.str()
