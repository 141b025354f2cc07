"""``gpuprof analyze --range``: it cuts one test out of an nsys report of a pytest session, and
is refused, saying so, for every input that holds no test's range (it was refused for a Kineto
trace only, and silently ignored for an Nsight Compute report and a folder of ranks)."""

from pathlib import Path

import pytest

from pytest_gpuprof.cli.main import main

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("path, what", [(DATA / "sync.pt.trace.json.gz", "a Kineto trace"),
                                        (DATA / "ncu" / "small.raw.csv", "an Nsight Compute report"),
                                        (Path("report.ncu-rep"), "an Nsight Compute report"),  # refused before it is read
                                        (DATA / "ranks", "a folder of per-rank Kineto traces")])
def test_range_is_refused_for_an_input_without_test_ranges(path, what, capsys):
    assert main(["analyze", str(path), "--range", "t.py::t"]) == 2
    assert capsys.readouterr().err == (
        f"gpuprof: --range t.py::t: {path} is {what}, and --range applies to nsys reports of a pytest session only "
        "(.sqlite, .nsys-rep: each test in an NVTX range named by its node id); leave --range out\n")


def test_the_help_says_which_inputs_range_applies_to(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("--range NAME only the test whose node id is NAME: for an nsys report of a pytest session (.sqlite, "
            ".nsys-rep), each test in an NVTX range of that name; refused for any other input") in help_text
