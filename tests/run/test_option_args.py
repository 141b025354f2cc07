"""Options given to the pytest processes gpuprof starts are written from the one option table
(options.option_args), as pytest reads them back."""

import pytest

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
