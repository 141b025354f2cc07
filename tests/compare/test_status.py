"""A test's status is derived (compare/evaluate.py ``status_of``) from its verdicts and a few
facts, never assigned: the steps after judging (confirmation, the base revision's pairs,
Nsight Compute's counters) change verdicts and facts, and the status follows."""

import ast
import json
from pathlib import Path

import pytest

from pytest_gpuprof.compare.counter_verdicts import judge_counters
from pytest_gpuprof.compare.evaluate import TestResult
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.status import STATUSES, State
from pytest_gpuprof.compare.verdict import Verdict

AS_BASE, UNSURE = State.SAME_AS_BASE, State.NOT_SURE

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpuprof"
WARMING = "first measured step took 2.0x the median of the others: still warming up (raise warmup)"


def verdict(status: str, metric: str = "kernel_time_us") -> Verdict:
    return Verdict(metric, status, 100.0, 120.0, "within ±10%")


def made_of(*statuses: str, **facts) -> TestResult:
    """A result holding verdicts of these statuses, and the facts given."""
    return TestResult("t.py::t", verdicts=[verdict(s) for s in statuses], **facts)


#: Each status, and a result of verdicts and facts that gives it, worked out from docs/results.md's table.
BY_HAND = {
    "error": TestResult.of_error("t.py::t", "b.json: not a baseline file"),
    "failed": made_of("ok", "improved", "regressed"),  # a broken verdict fails whatever else improved
    UNSURE: made_of("ok", UNSURE, AS_BASE),  # not sure is listed before same as base
    "unconfirmed": made_of("unconfirmed", "undecided"),
    AS_BASE: made_of(AS_BASE, "improved"),
    "unstable": made_of("ok", "unstable", health=[WARMING]),  # nothing else to say: the measurement's health
    "undecided": made_of("improved", "undecided"),
    "improved": made_of("ok", "improved", health=[WARMING]),  # an improvement is said before an unsteady run
    "no baseline": made_of("ok", has_baseline=False),  # thresholds held, nothing to compare with
    "updated": made_of("ok", recorded=True),
    "passed": made_of("ok"),
}


def test_every_status_follows_from_verdicts_and_facts():
    assert list(BY_HAND) == list(STATUSES)
    assert {status: result.status for status, result in BY_HAND.items()} == dict(zip(STATUSES, STATUSES))


def test_the_facts_decide_before_the_verdicts():
    assert made_of("ok", "threshold", recorded=True).status == "failed"  # a recording that broke a threshold
    assert made_of("threshold", has_baseline=False).status == "failed"
    assert made_of("ok", has_baseline=False, strict=True).status == "failed"  # --gpuprof-strict
    assert made_of("ok", strict=True).status == "passed"  # strict fails only a test with no baseline
    assert made_of("ok", "improved", has_baseline=False).status == "no baseline"


def test_no_code_path_can_assign_it():
    result = made_of("regressed")
    with pytest.raises(AttributeError):
        result.status = "passed"
    result.verdicts[0].status = "unconfirmed"  # what confirmation does: the status follows
    assert result.status == "unconfirmed"


def test_no_module_assigns_a_status_other_than_a_verdicts():
    """The package's name for a verdict is ``v``: any other ``X.status = ...`` would set a
    result's, which only its verdicts and facts decide."""
    assigned = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            assigned += [f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(t)}" for t in targets
                         if isinstance(t, ast.Attribute) and t.attr == "status"
                         and not (isinstance(t.value, ast.Name) and t.value.id == "v")]
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr" and "'status'" in ast.unparse(node):
                assigned.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    assert assigned == []


def test_an_improved_counter_makes_an_unsteady_run_improved_as_an_improved_time_does():
    """An unsteady run whose kernel time improved is ``improved``; one whose bandwidth
    (Nsight Compute, 0.2 to 0.5: beyond the ratio tolerance 0.05) improved stayed ``unstable``,
    the counters judged after the status was set."""
    stored = {"memory_bandwidth_utilization": 0.2, "kernels": {}}
    result = TestResult("t.py::t", verdicts=[verdict("ok")], health=[WARMING],
                        baseline_entry={"metrics": {}, "counters": stored},
                        counters={"memory_bandwidth_utilization": 0.5, "kernels": {}})
    assert result.status == "unstable"
    judge_counters(result, Rules(), False)
    assert [v.status for v in result.verdicts] == ["ok", "improved"]
    assert result.status == BY_HAND["improved"].status == "improved"


def distributed(ranks: dict[str, TestResult], *own: str, **facts) -> TestResult:
    """A distributed test as ``compare.distributed.combine`` makes it: its own verdicts (the
    skew's), then each rank's with its rank; the ranks' health said with their rank."""
    verdicts = [verdict(s, "rank_skew") for s in own] + [
        Verdict(v.metric, v.status, v.baseline, v.current, v.rule, rank=int(r)) for r, t in ranks.items()
        for v in t.verdicts]
    health = [f"rank {r}: {line}" for r, t in ranks.items() for line in t.health]
    return TestResult("t.py::t", verdicts=verdicts, health=health, ranks=ranks, **facts)


def test_a_distributed_test_is_the_worst_of_its_ranks_and_its_own():
    # rank 1 unsteady with nothing else to say: the test is unstable, though rank 0 improved
    assert distributed({"0": made_of("improved"), "1": made_of("ok", health=[WARMING])}, "ok").status == "unstable"
    # an unsteady rank that improved is improved: its health, said in the test's, makes nothing unstable
    assert distributed({"0": made_of("improved", health=[WARMING]), "1": made_of("ok")}, "ok").status == "improved"
    assert distributed({"0": made_of("ok"), "1": made_of("ok")}, "regressed").status == "failed"  # the skew
    # a rank with no entry of its own (hand-written ranks 0 and 2): the test is not judged, and strict fails it
    unjudged = {"0": made_of("ok"), "1": made_of("ok", has_baseline=False)}
    assert distributed(unjudged, "ok").status == "no baseline"
    assert distributed(unjudged, "ok", strict=True).status == "failed"
    recording = {"0": made_of(recorded=True), "1": made_of("threshold", recorded=True)}
    assert distributed(recording, recorded=True).status == "failed"
    assert distributed({"0": made_of(recorded=True)}, recorded=True).status == "updated"


@pytest.mark.parametrize("status", STATUSES)
def test_a_documents_status_reads_back(status):
    """``gpuprof diff`` and ``merge`` read documents back: the status each stored is the one
    read, through the facts the document gives."""
    written = json.loads(json.dumps(BY_HAND[status].to_json()))
    assert written["status"] == status
    assert TestResult.from_json(written).status == status


@pytest.mark.parametrize("doc, status", [
    # --gpuprof-strict failed a test without a baseline: no verdict broken, a message
    ({"nodeid": "t.py::t", "status": "failed", "message": "no baseline for H100 in b.json (--gpuprof-strict)",
      "verdicts": [{"metric": "gpu_utilization", "status": "ok", "baseline": None, "current": 0.9}]}, "failed"),
    # written before health and slower_machine were told apart: only "unstable"
    ({"nodeid": "t.py::t", "status": "unstable", "unstable": [WARMING],
      "verdicts": [{"metric": "kernel_time_us", "status": "unstable", "baseline": 100.0, "current": 120.0}]},
     "unstable"),
    ({"nodeid": "t.py::t", "status": "no baseline", "verdicts": []}, "no baseline"),
    ({"nodeid": "t.py::t", "status": "updated", "verdicts": []}, "updated"),
    ({"nodeid": "t.py::t", "status": "error", "message": "x.json.gz: cannot read trace"}, "error"),
])
def test_an_earlier_versions_document_reads_back_with_its_status(doc, status):
    assert TestResult.from_json(doc).status == status


def test_a_distributed_documents_status_reads_back():
    test = distributed({"0": made_of("improved"), "1": made_of("ok", health=[WARMING])}, "ok")
    read = TestResult.from_json(json.loads(json.dumps(test.to_json())))
    assert (read.status, read.ranks["0"].status, read.ranks["1"].status) == ("unstable", "improved", "unstable")


def test_a_test_the_base_revisions_pairs_judged_was_judged_against_the_base():
    """No stored baseline and the base's first process measured nothing: a broken threshold
    that the base's processes break too (0.80 < 0.85) is the same as base, not unjudged."""
    from pytest_gpuprof.compare.pairs import SAME, Decision, judge_pairs
    from pytest_gpuprof.compare.rules import parse_threshold

    threshold = parse_threshold("gpu_utilization >= 0.85", "marker")
    result = TestResult("t.py::t", verdicts=[Verdict("gpu_utilization", "threshold", None, 0.84, threshold.text,
                                                     relative=False, threshold=threshold)], has_baseline=False)
    assert result.status == "failed"
    judge_pairs(result, {"gpu_utilization": Decision("gpu_utilization", SAME, 0.80, 0.84, 2, 0.04, 0.0, 0.08)},
                "/base", 1.0, "")
    assert (result.verdicts[0].status, result.status) == (AS_BASE, AS_BASE)
