"""A mistake in ``@pytest.mark.gpuprof`` is found when the tests are collected, in every
mode, and fails its test at set-up: under ``--gpuprof`` on a machine without a GPU (which
would otherwise skip it), under ``--gpuprof-replay`` without its trace (likewise), and in a
plain run, where the marker is otherwise not acted on.  A marker with several mistakes names
each, a line each; the gpuprof section counts the tests that failed their set-up."""

import json

import pytest

# Imported here, before any in-process pytester run, so pandas/numpy stay loaded across
# runs (pytester drops modules first imported inside a run).
import pytest_gpuprof.run.session  # noqa: F401
from helpers.suites import section

MISTAKES = '''
import pytest


@pytest.mark.gpuprof(thresholds=["gpu_utilization > 0.85"], warmpu=3)
def test_unknown_argument():
    pass


@pytest.mark.gpuprof(thresholds=["gpu_utilization => 0.9"])
def test_unparseable_threshold(gpuprof):
    pass


@pytest.mark.gpuprof(active="10")
def test_bad_value_type():
    pass


@pytest.mark.gpuprof(tolerances={"window_us": [0.1]})
def test_bad_tolerance_type():
    pass


@pytest.mark.gpuprof(thresholds="gpu_util > 85")
def test_unknown_metric_in_threshold():
    pass


@pytest.mark.gpuprof(tolerances={"kernel_tim_us": 0.5})
def test_unknown_metric_in_tolerances():
    pass


@pytest.mark.gpuprof(thresholds=["gpu_utilization >= 85"])
def test_ratio_threshold_in_percent():
    pass


@pytest.mark.gpuprof(warmpu=3, active=0, world_size=0, thresholds=["gpu_utilization >= 85", "gpu_util > 1"],
                     tolerances={"kernel_tim_us": -1})
def test_every_mistake(gpuprof):
    pass


@pytest.mark.gpuprof(warmup=1, active=2, thresholds=["gpu_utilization >= 0.5"], tolerances={"window_us": 0.2})
def test_right(gpuprof):
    pass
'''

MARKER = "@pytest.mark.gpuprof on test_mistakes.py::"
#: Each mistaken test and what its error says.
SAID = {
    "test_unknown_argument": "unknown argument(s) warmpu; known: active, flush_l2, ncu, thresholds, tolerances, "
                             "wait, warmup, world_size",
    "test_unparseable_threshold": "cannot parse threshold 'gpu_utilization => 0.9'; expected METRIC OP NUMBER",
    "test_bad_value_type": "gpuprof steps: active must be a non-negative integer, got '10'",
    "test_bad_tolerance_type": "tolerances['window_us'] must be a finite number >= 0, got [0.1]",
    "test_unknown_metric_in_threshold": "unknown metric 'gpu_util' in threshold 'gpu_util > 85'; known: ",
    "test_unknown_metric_in_tolerances": "tolerances names unknown metric 'kernel_tim_us'",
    "test_ratio_threshold_in_percent": "threshold 'gpu_utilization >= 85': gpu_utilization is a ratio from 0 to 1, "
                                       "which this threshold always passes or always fails; in percent, write "
                                       "'gpu_utilization >= 85%' (the same as 'gpu_utilization >= 0.85')",
    "test_every_mistake": "unknown argument(s) warmpu; known: ",
}
#: Every line of the error of the test whose marker has every kind of mistake at once: its
#: arguments', then its thresholds' and tolerances'.
EVERY_MISTAKE = [
    "unknown argument(s) warmpu; known: active, flush_l2, ncu, thresholds, tolerances, wait, warmup, world_size",
    "gpuprof steps: active must be at least 1, got 0",
    "world_size must be a whole number of ranks, 1 or more, got 0",
    SAID["test_ratio_threshold_in_percent"],
    "unknown metric 'gpu_util' in threshold 'gpu_util > 1'; known: ",
    "tolerances names unknown metric 'kernel_tim_us'",
    "tolerances['kernel_tim_us'] must be a finite number >= 0, got -1",
]


def errors_at_setup(result) -> dict[str, str]:
    """Test name -> the first line of its set-up error."""
    return {name: lines[0] for name, lines in error_lines(result).items()}


def error_lines(result) -> dict[str, list[str]]:
    """Test name -> every line of its set-up error."""
    out: dict[str, list[str]] = {}
    name = None
    for line in result.outlines:
        if "ERROR at setup of " in line:
            name = line.split("ERROR at setup of ")[1].split()[0]
            out[name] = []
        elif line.startswith(("___", "===")):
            name = None
        elif name is not None and line:
            out[name].append(line)
    return out


def names_every_mistake(result) -> None:
    """The test with every kind of mistake has each named, a line each, after its test."""
    lines = error_lines(result)["test_every_mistake"]
    assert len(lines) == len(EVERY_MISTAKE), lines
    for line, words in zip(lines, EVERY_MISTAKE):
        assert line.startswith(f"{MARKER}test_every_mistake: {words}"), line


@pytest.mark.parametrize("mode, right", [
    ("--gpuprof", "skipped"),  # no GPU here
    ("--gpuprof-replay", "skipped"),  # no trace of it
])
def test_every_marker_mistake_fails_its_test_under_gpuprof(pytester, mode, right):
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_mistakes=MISTAKES)
    args = [f"--gpuprof-replay={pytester.mkdir('traces')}"] if mode == "--gpuprof-replay" else [mode]
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(errors=len(SAID), **{right: 1})
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    errors = errors_at_setup(result)
    assert sorted(errors) == sorted(SAID)
    for name, words in SAID.items():
        assert errors[name].startswith(f"{MARKER}{name}: {words}"), errors[name]
    names_every_mistake(result)
    assert (f"{len(SAID)} profiled test(s) failed their set-up and were not measured: see their errors above (a "
            "mistake in the gpuprof marker, or a fixture that raised)") in section(result)


def test_a_run_whose_profiled_tests_all_failed_set_up_says_so(pytester):
    """Not "no profiled tests ran": the test did use the marker."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_mistake='''
import pytest


@pytest.mark.gpuprof(thresholds=["gpu_utilization >= 85"])
def test_percent():
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpuprof")
    result.assert_outcomes(errors=1)
    lines = section(result)
    assert "1 profiled test(s) failed their set-up and were not measured: see their errors above (a mistake in the " \
           "gpuprof marker, or a fixture that raised)" in lines
    assert not any("no profiled tests ran" in line for line in lines), lines


def test_a_plain_run_fails_every_mistake_without_loading_pandas(pytester):
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_mistakes=MISTAKES)
    pytester.makeconftest('''
import json, sys

def pytest_collection_finish(session):
    with open("modules.json", "w") as fh:
        json.dump(sorted(m for m in ("torch", "pandas", "numpy", "nvtx") if m in sys.modules), fh)
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # a fresh interpreter
    result.assert_outcomes(errors=len(SAID), passed=1)
    errors = errors_at_setup(result)
    assert sorted(errors) == sorted(SAID)
    for name, words in SAID.items():
        assert errors[name].startswith(f"{MARKER}{name}: {words}"), errors[name]
    names_every_mistake(result)
    assert json.loads((pytester.path / "modules.json").read_text()) == []
