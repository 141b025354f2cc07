"""A mistake in ``@pytest.mark.gpuprof`` is found when the tests are collected, in every
mode, and fails its test at set-up: under ``--gpuprof`` on a machine without a GPU (which
would otherwise skip it), under ``--gpuprof-replay`` without its trace (likewise), and in a
plain run, where the marker is otherwise ignored."""

import json

import pytest

# Imported here, before any in-process pytester run, so pandas/numpy stay loaded across
# runs (pytester drops modules first imported inside a run).
import pytest_gpuprof.run.session  # noqa: F401

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
}


def errors_at_setup(result) -> dict[str, str]:
    """Test name -> the first line of its set-up error."""
    lines = result.outlines
    out = {}
    for i, line in enumerate(lines):
        if "ERROR at setup of " in line:
            name = line.split("ERROR at setup of ")[1].split()[0]
            out[name] = lines[i + 1]
    return out


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
    assert json.loads((pytester.path / "modules.json").read_text()) == []
