"""What fresh processes hand back is judged in compare, and read by one function.

``compare.confirmation.upheld`` and ``compare.pairs.upheld_by_pairs`` return new verdicts and
leave the ones given as they were; ``run.child_results.child_results`` turns a missing or damaged
results document into an error naming the child and the file."""

import json

import pytest

from pytest_gpuprof.compare.confirmation import upheld
from pytest_gpuprof.compare.evaluate import TestResult
from pytest_gpuprof.compare.pairs import NOT_SURE, SAME, WORSE, Decision, upheld_by_pairs
from pytest_gpuprof.compare.status import State, Status
from pytest_gpuprof.compare.verdict import Verdict
from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.run.child_results import child_results


def regressed(metric="kernel_time_us"):
    return Verdict(metric, State.REGRESSED, 100.0, 110.0, "rule")


def test_the_reruns_judgment_returns_new_verdicts_and_leaves_the_given_ones():
    given = [regressed(), Verdict("kernel_count", State.OK, 5.0, 5.0, "rule")]
    cleared = TestResult("t.py::t", verdicts=[Verdict("kernel_time_us", State.OK, 100.0, 100.5, "rule")])
    out, said = upheld(given, [cleared, "the re-run ran over 30 s"])
    assert [v.status for v in out] == [State.UNCONFIRMED, State.OK]
    assert given[0].status == State.REGRESSED and given[0].evidence == ""
    assert out[0].evidence == "; not reproduced in 1 of 1 fresh process(es)"
    assert said == "2 re-run(s) in fresh processes: the failures did not reproduce (the re-run ran over 30 s)"


def test_the_pairs_judgment_returns_new_verdicts_and_leaves_the_given_ones():
    given = [regressed(), regressed("window_us"), regressed("memcpy_htod_time_us")]
    decisions = {"kernel_time_us": Decision("kernel_time_us", SAME, 100.0, 100.2, 3, 0.002, -0.01, 0.01),
                 "window_us": Decision("window_us", NOT_SURE, 100.0, 104.0, 3, 0.04, -0.01, 0.09),
                 "memcpy_htod_time_us": Decision("memcpy_htod_time_us", WORSE, 100.0, 110.0, 3, 0.095, 0.05, 0.12)}
    out = upheld_by_pairs(given, decisions, problem="")
    assert [v.status for v in out] == [State.SAME_AS_BASE, State.NOT_SURE, State.REGRESSED]
    assert [v.status for v in given] == [State.REGRESSED] * 3
    assert all("against the base revision measured alongside: head" in v.evidence for v in out)
    # pairs that stopped on a problem uphold a failure they could not decide
    assert upheld_by_pairs(given, decisions, problem="the base process measured nothing")[1].status == State.REGRESSED


def test_a_childs_results_are_read_by_node_id(tmp_path):
    result = TestResult("t.py::t", verdicts=[regressed()], gpu="GPU", recorded=False)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": 1, "backend": "torch", "tests": [result.to_json()]}))
    read = child_results(path, "the re-run")
    assert list(read) == ["t.py::t"] and read["t.py::t"].status == Status.FAILED


@pytest.mark.parametrize("content, why", [
    (None, "the re-run measured nothing (no results document): {path}; exit 2"),
    ("{torn", "the re-run's results cannot be read: {path}: Expecting property name"),
    ("[]", "the re-run's results cannot be read: {path}: not a JSON object"),
    ('{"tests": []}', "the re-run's results cannot be read: results file {path} has schema_version None; this "
                      "gpuprof reads 1"),
    ('{"schema_version": 1, "tests": [{"status": "passed"}]}',
     "the re-run's results cannot be read: results file {path}: tests[0].nodeid is missing"),
    ('{"schema_version": 1, "tests": [{"nodeid": "t", "status": "failed", "message": "", "gpu": null, "metrics": null, '
     '"baseline_metrics": null, "verdicts": [{"metric": "kernel_time_us", "status": "fine", "baseline": 1, '
     '"current": 2, "change": "+100%", "rule": ""}]}]}',
     "the re-run's results cannot be read: results file {path}: tests[0].verdicts[0].status must be one of 'ok', "),
    ('{"schema_version": 1, "tests": [], "skipped": [{"nodeid": "t", "reason": NaN}]}',
     "the re-run's results cannot be read: results file {path}: skipped[0].reason must be a finite number, got nan"),
])
def test_a_missing_or_damaged_results_document_is_an_error_naming_it(tmp_path, content, why):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(GpuprofError) as raised:
        child_results(path, "the re-run", "exit 2")
    assert str(raised.value).startswith(why.format(path=path))
