"""The one judge (``compare.judge.Judge``), driven directly with a real trace: no pytest
session, no plugin.  What it is given decides what it returns; a file it cannot read is an
error result naming the file, never an exception."""

import json
import shutil
from pathlib import Path

import pytest

from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file
from pytest_gpuprof.compare.judge import Judge
from pytest_gpuprof.compare.rules import Rules, parse_threshold
from pytest_gpuprof.compare.status import BROKEN, State, Status
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "example_suite").is_dir():  # (wherever this file lies under tests/)
    ROOT = ROOT.parent
NODE = "example_suite/test_moe.py::test_moe_forward"
TRACE = ROOT / "example_suite" / "traces" / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace():
    return load_kineto(TRACE)


def loader(trace):
    return lambda: {0: (trace, TRACE)}


def test_a_trace_is_judged_against_the_entry_stored_for_its_gpu(trace):
    """The shipped baseline of this test was recorded from the shipped trace's GPU: every
    metric judged, none broken, the file named."""
    judged = Judge(ROOT / "baselines", "torch", Rules()).judge(NODE, {}, loader(trace))
    result = judged.result
    assert result.status == Status.PASSED and judged.entry is None
    assert result.baseline_file == baseline_file(ROOT / "baselines", NODE)
    assert result.gpu == "NVIDIA H200" and result.trace == TRACE
    assert {v.metric for v in result.verdicts} >= {"kernel_time_us", "kernel_count", "sync_count", "gpu_utilization"}
    assert not [v for v in result.verdicts if v.status in BROKEN]


def test_a_recording_returns_the_entry_and_the_next_run_is_judged_against_it(trace, tmp_path):
    recording = Judge(tmp_path, "torch", Rules(), update=True).judge(NODE, {}, loader(trace))
    assert recording.result.status == Status.UPDATED
    assert recording.entry is not None and recording.entry["metrics"] == recording.result.metrics
    assert len(recording.entry["runs"]) == 1 and not baseline_file(tmp_path, NODE).exists()  # the run stage writes it
    BaselineFile(baseline_file(tmp_path, NODE)).update({NODE: {recording.result.gpu: recording.entry}})
    again = Judge(tmp_path, "torch", Rules()).judge(NODE, {}, loader(trace)).result
    assert again.status == Status.PASSED
    time = next(v for v in again.verdicts if v.metric == "kernel_time_us")
    assert time.status == State.OK and time.baseline == time.current  # the same trace: no change at all


def test_with_no_stored_entry_it_is_unjudged_and_fails_only_under_strict(trace, tmp_path):
    plain = Judge(tmp_path, "torch", Rules()).judge(NODE, {}, loader(trace)).result
    assert plain.status == Status.NO_BASELINE and plain.message == ""
    strict = Judge(tmp_path, "torch", Rules(), strict=True).judge(NODE, {}, loader(trace)).result
    assert strict.status == Status.FAILED and strict.facts()["strict"]
    assert strict.message == f"no baseline for NVIDIA H200 in {baseline_file(tmp_path, NODE)} (--gpuprof-strict)"


def test_the_base_revision_stands_in_for_a_missing_entry(trace, tmp_path):
    """``against_base``: what the run stage measured at the base revision, judged here."""
    recorded = Judge(tmp_path / "elsewhere", "torch", Rules(), update=True).judge(NODE, {}, loader(trace))
    asked = []

    def against_base(nodeid, gpu):
        asked.append(nodeid)
        return recorded.entry, None

    result = Judge(tmp_path, "torch", Rules()).judge(NODE, {}, loader(trace), against_base=against_base).result
    assert asked == [NODE] and result.status == Status.PASSED and result.facts()["has_baseline"]


def test_a_marker_threshold_is_judged_with_the_run_rules(trace):
    judge = Judge(ROOT / "baselines", "torch", Rules(thresholds=(parse_threshold("sync_count >= 1000", "run"),)))
    result = judge.judge(NODE, {"thresholds": ["gpu_utilization >= 0.999"]}, loader(trace)).result
    broken = {v.metric: v.status for v in result.verdicts if v.status in BROKEN}
    assert broken == {"sync_count": State.THRESHOLD, "gpu_utilization": State.THRESHOLD}
    assert result.status == Status.FAILED


def test_an_unreadable_baseline_is_an_error_result_naming_the_file(trace, tmp_path):
    file = baseline_file(tmp_path, NODE)
    file.parent.mkdir(parents=True)
    file.write_text("{not json")
    result = Judge(tmp_path, "torch", Rules()).judge(NODE, {}, loader(trace)).result
    assert result.status == Status.ERROR and str(file) in result.message


def test_a_trace_that_cannot_be_loaded_is_an_error_result(tmp_path):
    def broken():
        raise TraceError(f"{tmp_path / 'x.json'}: not a trace")

    result = Judge(tmp_path, "torch", Rules()).judge(NODE, {}, broken).result
    assert result.status == Status.ERROR and result.message == f"{tmp_path / 'x.json'}: not a trace"


def test_a_result_read_back_from_its_document_keeps_its_status(trace, tmp_path):
    """The results document keeps the facts a status follows from: read back, every status is
    the same (a strict failure with no verdict broken too)."""
    from pytest_gpuprof.compare.evaluate import TestResult

    judged = [Judge(ROOT / "baselines", "torch", Rules()).judge(NODE, {}, loader(trace)).result,
              Judge(tmp_path, "torch", Rules(), strict=True).judge(NODE, {}, loader(trace)).result,
              Judge(tmp_path, "torch", Rules(), update=True).judge(NODE, {}, loader(trace)).result,
              Judge(tmp_path, "torch", Rules()).judge(NODE, {}, loader(trace)).result]
    for result in judged:
        doc = json.loads(json.dumps(result.to_json()))
        assert TestResult.from_json(doc).status == result.status == doc["status"]
    assert [r.status for r in judged] == [Status.PASSED, Status.FAILED, Status.UPDATED, Status.NO_BASELINE]


def test_a_document_of_before_facts_were_kept_is_read_from_its_status(trace, tmp_path):
    from pytest_gpuprof.compare.evaluate import TestResult

    strict = Judge(tmp_path, "torch", Rules(), strict=True).judge(NODE, {}, loader(trace)).result.to_json()
    del strict["facts"]
    assert TestResult.from_json(strict).status == Status.FAILED
    assert TestResult.from_json({**strict, "status": "no baseline"}).status == Status.NO_BASELINE


def test_the_judge_reads_no_file_it_is_not_given(trace, tmp_path):
    """The baselines folder is read, never written: judging leaves it as it was."""
    shutil.copytree(ROOT / "baselines", tmp_path / "b")
    before = {p: p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    Judge(tmp_path / "b", "torch", Rules()).judge(NODE, {}, loader(trace))
    assert {p: p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()} == before
