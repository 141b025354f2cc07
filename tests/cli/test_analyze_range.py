"""``gpuprof analyze --range``: it cuts one test out of an nsys report of a pytest session, and
is refused, saying so, for every input that holds no test's range (it was refused for a Kineto
trace only, and silently ignored for an Nsight Compute report and a folder of ranks).
``gpuprof diff --range`` likewise, where neither side is an nsys report (it was silently ignored)."""

import gzip
import json
from pathlib import Path

import pytest

from pytest_gpuprof.cli.main import main
from pytest_gpuprof.compare.evaluate import of_measurement
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.report.document import SCHEMA_VERSION
from pytest_gpuprof.trace.kineto import load_kineto

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize("path, what", [(DATA / "sync.pt.trace.json.gz", "a Kineto trace"),
                                        (DATA / "ncu" / "small.raw.csv", "an Nsight Compute report"),
                                        # refused before it is read
                                        (Path("report.ncu-rep"), "an Nsight Compute report"),
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


APPLIES = ("and --range applies to nsys reports of a pytest session only (.sqlite, .nsys-rep: each test in an NVTX "
           "range named by its node id); leave --range out\n")


def test_diff_range_is_refused_when_neither_side_is_an_nsys_report(tmp_path, capsys):
    trace = DATA / "sync.pt.trace.json.gz"
    results = tmp_path / "results.json"
    test = of_measurement("t.py::t", measure(load_kineto(trace)), "torch").to_json()
    results.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "tests": [test]}))
    assert main(["diff", str(trace), str(trace)]) == 0  # read whole without --range
    capsys.readouterr()
    for a, what_a, b, what_b in ((trace, "a Kineto trace", trace, "a Kineto trace"),
                                 (results, "a results file (--gpuprof-json)", DATA / "ranks",
                                  "a folder of per-rank Kineto traces"),
                                 (DATA / "ncu" / "small.raw.csv", "an Nsight Compute report", results,
                                  "a results file (--gpuprof-json)")):
        assert main(["diff", str(a), str(b), "--range", "t.py::t"]) == 2
        assert capsys.readouterr().err == f"gpuprof: --range t.py::t: {a} is {what_a} and {b} is {what_b}, {APPLIES}"


def test_diff_range_cuts_the_side_that_is_an_nsys_report(tmp_path, capsys):
    """An nsys report of a session against a Kineto trace of the test: the range applies to the report."""
    report = tmp_path / "sync.sqlite"
    report.write_bytes(gzip.decompress((DATA / "nsys" / "sync.sqlite.gz").read_bytes()))
    trace = DATA / "sync.pt.trace.json.gz"
    assert main(["diff", str(trace), str(report), "--range", "t.py::t"]) == 2
    assert capsys.readouterr().err == "gpuprof: no NVTX range named 't.py::t' in the report\n"
    assert main(["diff", str(trace), str(report), "--range", "sync"]) in (0, 1)
    assert "B (current):" in capsys.readouterr().out


def test_the_diff_help_says_which_inputs_range_applies_to(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("--range NAME only the test whose node id is NAME, cut out of each side that is an nsys report of a "
            "pytest session (.sqlite, .nsys-rep: each test in an NVTX range of that name); a side of another kind is "
            "read whole; refused when neither side is an nsys report") in help_text
