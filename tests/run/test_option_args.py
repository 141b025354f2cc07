"""Options given to the pytest processes gpuprof starts are written from the one option table
(options.option_args), as pytest reads them back."""

import dataclasses

import pytest

from helpers.session import session_settings
from pytest_gpuprof.capture.profiler import StepPlan
from pytest_gpuprof.options import OPTIONS, option_args


def test_each_kind_of_option_is_written_as_its_flag_says():
    assert option_args({"": True, "keep-traces": False, "baseline-dir": "/b", "confirm": 0, "ratio-tolerance": 0.05,
                        "threshold": ["sync_count == 0", "gpu_utilization >= 0.85"], "replay": None}) == [
        "--gpuprof", "--gpuprof-baseline-dir=/b", "--gpuprof-confirm=0", "--gpuprof-ratio-tolerance=0.05",
        "--gpuprof-threshold=sync_count == 0", "--gpuprof-threshold=gpu_utilization >= 0.85"]


def test_an_unknown_option_is_refused():
    with pytest.raises(KeyError):
        option_args({"warmpu": 3})


def test_pytest_reads_back_what_was_written(pytester):
    """Every option, written with a value of its kind, parses back to that value."""
    values = {o.name: {"bool": True, "int": 7, "float": 0.25, "str": "x", "path": "p", "list": ["a >= 1"]}[o.kind]
              for o in OPTIONS}
    config = pytester.parseconfig(*option_args(values))
    for option in OPTIONS:
        got = config.getoption(option.ini)
        assert got == values[option.name] or str(got) == str(values[option.name]), option.flag


FLOATS = [o for o in OPTIONS if o.kind == "float"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
@pytest.mark.parametrize("option", FLOATS, ids=[o.flag for o in FLOATS])
def test_a_float_option_that_is_no_finite_number_is_a_usage_error_naming_it(pytester, option, value):
    """NaN passes every comparison and hid a regression (--gpuprof-ratio-tolerance=nan); infinity
    overflowed: both are refused before any test runs, on the command line and in the ini file."""
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{option.flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {option.flag}: expected a finite number, got '{value}'" in result.stderr.lines
    if value == "nan":
        pytester.makeini(f"[pytest]\n{option.ini} = nan\n")
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof")
        assert f"ERROR: ini key {option.ini}: expected a finite number, got 'nan'" in result.stderr.lines


@pytest.mark.parametrize("threshold, words", [
    ("gpu_utilization >= 85", "gpu_utilization is a ratio from 0 to 1, which this threshold always passes or "
                              "always fails; in percent, write 'gpu_utilization >= 85%' (the same as "
                              "'gpu_utilization >= 0.85')"),
    ("kernel_time_us <= 1e400", "its number must be finite"),
])
def test_a_threshold_that_decides_nothing_is_a_usage_error(pytester, threshold, words):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof", f"--gpuprof-threshold={threshold}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any(line.endswith(f"threshold {threshold!r}: {words}") for line in result.stderr.lines), result.stderr.lines



def test_a_fresh_measurement_gets_the_runs_floor_on_measured_steps(tmp_path):
    """A confirmation, nsys or rank process measures as many steps as the run: the floor goes
    with the plan, and no floor adds no option."""
    settings = session_settings(tmp_path)
    assert not any("min-active" in arg for arg in settings.plan_args())
    floored = dataclasses.replace(settings, plan=StepPlan(active=10, min_active=25)).plan_args()
    assert "--gpuprof-active=25" in floored and "--gpuprof-min-active=25" in floored
