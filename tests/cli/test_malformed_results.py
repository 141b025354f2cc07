"""Results files read back by ``gpuprof diff`` and ``gpuprof merge`` (compare/results_doc.py):
a malformed one is one error naming the file and the member, exit 2, never a traceback; a
real one (the example suite replayed with ``--gpuprof-json``) reads as it did, also without
the members added since it was first written; nothing that is not finite is read or written."""

import copy
import functools
import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.example_suite import replay_dir, run_suite
from pytest_gpuprof.cli.main import main
from pytest_gpuprof.report.writers import write_reports

DELETE = object()
#: Reports ``gpuprof merge`` writes in the tests below, by option.
REPORTS = ("--json", "--summary", "--html", "--benchmark-json")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The results file of the example suite replayed, the MoE test's planted-bug trace in
    place (it fails); and the document."""
    out = tmp_path_factory.mktemp("results")
    path = out / "results.json"
    run_suite(out, replay_dir(out / "replay"), "--gpuprof-json", str(path))
    return path, json.loads(path.read_text())


@pytest.fixture(scope="module")
def small(real, tmp_path_factory):
    """A results file of three tests of the real one, and the document: the failing MoE test, one
    profiled under Nsight Compute (counters) and a distributed one (ranks)."""
    _, doc = real
    tests = doc["tests"]
    picked = [tests[0], tests[profiled(doc)], tests[distributed(doc)]]
    path = tmp_path_factory.mktemp("small") / "small.json"
    small = {**doc, "tests": picked}
    path.write_text(json.dumps(small))
    return path, small


def strict(text):
    """JSON as a strict reader takes it: NaN and Infinity refused."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} written"))


def run(capsys, *args):
    """``gpuprof ARGS`` in this process (an exception that is not gpuprof's error would fail
    the test: ``main`` prints those alone): (exit status, stdout, stderr)."""
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


#: In a path: the first key of the object there (a kernel's name).
FIRST = object()


def place(doc, path):
    """The container of the member at ``path`` (keys, indices, ``FIRST``) and its last key."""
    def key(node, k):
        return next(iter(node)) if k is FIRST else k

    *parents, last = path
    node = functools.reduce(lambda node, k: node[key(node, k)], parents, doc)
    return node, key(node, last)


def mutate(doc, path, value):
    node, last = place(doc, path)
    if value is DELETE:
        del node[last]
    else:
        node[last] = value


def single(doc):
    return next(i for i, t in enumerate(doc["tests"]) if not t.get("ranks"))


def distributed(doc):
    return next(i for i, t in enumerate(doc["tests"]) if t.get("ranks"))


def profiled(doc):
    return next(i for i, t in enumerate(doc["tests"]) if t.get("baseline_counters"))


# --- each malformed member: one error naming the file and the member --------------
# (name: (which test: a function of the document, the path under it, the value, the error after
# "results file PATH: ")); ``None`` for the test: a path from the document's top

S, D, P = single, distributed, profiled
MALFORMED = {
    # the cases issue 43 found
    "verdicts-5": (S, ("verdicts",), 5, "{t}.verdicts must be a list of verdict objects, got 5"),
    "metrics-abc": (S, ("metrics",), "abc", "{t}.metrics must be an object or null, got 'abc'"),
    "verdict-metric-3": (S, ("verdicts", 0, "metric"), 3, "{t}.verdicts[0].metric must be a string, got 3"),
    "gpu-123": (S, ("gpu",), 123, "{t}.gpu must be a string or null, got 123"),
    "rank-x": (D, ("ranks", "0"), "x", "{t}.ranks.0 must be a test object, got 'x'"),
    "timeline-events-nope": (S, ("timeline",), {"events": "nope"}, "{t}.timeline must be a timeline sample (step, "
                             "span_ns, streams, names, kinds, events), got {'events': 'nope'}"),
    "nan-metric": (S, ("metrics", "kernel_time_us"), math.nan,
                   "{t}.metrics.kernel_time_us must be a finite number, got nan"),
    # what else TestResult.from_json, gpuprof diff, merge and the reports read
    "test-5": (None, ("tests", 0), 5, "tests[0] must be a test object, got 5"),
    "no-nodeid": (S, ("nodeid",), DELETE, "{t}.nodeid is missing"),
    "nodeid-5": (S, ("nodeid",), 5, "{t}.nodeid must be a string, got 5"),
    "status-fine": (S, ("status",), "fine", "{t}.status must be one of 'error', 'failed', 'not sure', "),
    "no-message": (S, ("message",), DELETE, "{t}.message is missing"),
    "facts-yes": (S, ("facts", "error"), "yes", "{t}.facts must be an object of error, recorded, has_baseline, "
                  "strict, each true or false, got {'error': 'yes', "),
    "facts-unknown": (S, ("facts", "bogus"), True, "{t}.facts must be an object of error, recorded, has_baseline, "),
    "backend-cuda": (S, ("backend",), "cuda", "{t}.backend must be one of 'torch', 'nsys', or null, got 'cuda'"),
    "baseline_file-5": (S, ("baseline_file",), 5, "{t}.baseline_file must be a string or null, got 5"),
    "trace-list": (S, ("trace",), [], "{t}.trace must be a string or null, got []"),
    "environment-x": (S, ("environment",), "x", "{t}.environment must be an object, got 'x'"),
    "health-string": (S, ("health",), "abc", "{t}.health must be a list of strings, got 'abc'"),
    "notes-number": (S, ("notes",), [1], "{t}.notes must be a list of strings, got [1]"),
    "unstable-5": (S, ("unstable",), 5, "{t}.unstable must be a list of strings, got 5"),
    "confirmation-5": (S, ("confirmation",), 5, "{t}.confirmation must be a string, got 5"),
    "detects-text": (S, ("detects",), {"kernel_time_us": "2%"}, "{t}.detects must be an object of numbers, got "),
    "machine-fast": (S, ("machine",), {"gemm_us": "fast"}, "{t}.machine must be an object of numbers or nulls, or "
                     "null, got {'gemm_us': 'fast'}"),
    "kernel_count-abc": (S, ("metrics", "kernel_count"), "abc",
                         "{t}.metrics.kernel_count must be an integer in [0, 2**63), got 'abc'"),
    "baseline-step_count-0": (S, ("baseline_metrics", "step_count"), 0,
                              "{t}.baseline_metrics.step_count must be a positive integer, got 0"),
    "per_step-text": (S, ("per_step", "kernel_time_us"), "x",
                      "{t}.per_step.kernel_time_us must be a list of per-step values, got 'x'"),
    "distribution-n-0": (S, ("distribution", "kernel_time_us", "n"), 0,
                         "{t}.distribution.kernel_time_us.n must be a positive integer, got 0"),
    "baseline_distribution-unordered": (S, ("baseline_distribution", "kernel_time_us", "min"), 1e12,
                                        "{t}.baseline_distribution.kernel_time_us must be ordered min <= q1 <= "),
    "baseline_timeline-5": (S, ("baseline_timeline",), 5, "{t}.baseline_timeline must be an object or null, got 5"),
    "baseline_runs-5": (S, ("baseline_runs", 0), 5, "{t}.baseline_runs[0] must be an object, got 5"),
    "verdict-status-fine": (S, ("verdicts", 0, "status"), "fine", "{t}.verdicts[0].status must be one of 'ok', "),
    "verdict-no-rule": (S, ("verdicts", 0, "rule"), DELETE, "{t}.verdicts[0].rule is missing"),
    "verdict-baseline-abc": (S, ("verdicts", 0, "baseline"), "abc",
                             "{t}.verdicts[0].baseline must be a finite number or null, got 'abc'"),
    "verdict-current-huge": (S, ("verdicts", 0, "current"), 10 ** 400,
                             "{t}.verdicts[0].current must be a finite number or null, got 1000000000000000000000"),
    "verdict-rank-text": (S, ("verdicts", 0, "rank"), "1", "{t}.verdicts[0].rank must be an integer in [0, 2**63), "
                          "got '1'"),
    "verdict-threshold-op": (S, ("verdicts", 0, "threshold"), {"op": "~", "value": 1},
                             "{t}.verdicts[0].threshold must be an object of op (one of >=, <=, >, <, ==, !=) and a "
                             "finite value, got {'op': '~', 'value': 1}"),
    "ranks-keys": (D, ("ranks", "a"), {}, "{t}.ranks must be an object of a test per rank (keys 0, 1, ...), or null"),
    "rank-of-a-rank": (D, ("ranks", "0", "ranks"), {}, "{t}.ranks.0.ranks must be null in a rank's test, got {}"),
    "rank-metrics": (D, ("ranks", "1", "metrics", "sync_count"), -1,
                     "{t}.ranks.1.metrics.sync_count must be an integer in [0, 2**63), got -1"),
    "rank-kernel-samples": (D, ("ranks", "0", "per_step", "kernels", FIRST), -1,
                            "{t}.ranks.0.per_step.kernels[ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgs"
                            "Storage<4096ul>)] must be a list of per-step values, got -1"),
    "rank_skew-text": (D, ("metrics", "rank_skew"), "x",
                       "{t}.metrics.rank_skew must be a finite number in [0, 2**63) or null, got 'x'"),
    "counters-launches": (P, ("baseline_counters", "kernels", "add_rmsnorm_kernel", "launches"), 0,
                          "{t}.baseline_counters.kernels[add_rmsnorm_kernel].launches must be a positive integer"),
    "counters-unordered": (P, ("baseline_counters", "kernels", "add_rmsnorm_kernel", "time_us"),
                           {"min": 3, "median": 2, "max": 1}, "{t}.baseline_counters.kernels[add_rmsnorm_kernel]."
                           "time_us must be ordered min <= median <= max, got [3, 2, 1]"),
    "counters-no_value": (P, ("baseline_counters", "no_value"), [], "{t}.baseline_counters.no_value must be an object "
                          "of why each null figure is null, got []"),
    "alongside-decision": (S, ("alongside",), {"base": "b", "pairs": 3, "seconds": 1, "decisions": [{"metric": 1}]},
                           "{t}.alongside.decisions[0] must be a decision object (metric, outcome, base, head, pairs, "
                           "...), got {'metric': 1}"),
    "infinity-environment": (S, ("environment", "driver"), math.inf,
                             "{t}.environment.driver must be a finite number, got inf"),
    "skipped-nodeid": (None, ("skipped",), [{"nodeid": 5}],
                       "skipped[0] must be a {nodeid, reason} object, got {'nodeid': 5}"),
    "doc-backend-5": (None, ("backend",), 5, "backend must be a string or null, got 5"),
}
#: ``schema_version`` as a baseline file's is read: an integer, this gpuprof's (each with what
#: the error says of it; a list, as ``True == 1.0 == 1`` in a dict's keys).
VERSIONS = [(True, "True; this gpuprof reads 1"), (1.0, "1.0; this gpuprof reads 1"),
            ("1", "'1'; this gpuprof reads 1"),
            (2, "2; this gpuprof reads 1: a newer gpuprof wrote it, upgrade to read it")]


def malformed(doc, case):
    which, path, value, said = MALFORMED[case]
    doc = copy.deepcopy(doc)
    prefix = () if which is None else ("tests", which(doc))
    mutate(doc, prefix + path, value)
    return doc, said.replace("{t}", f"tests[{prefix[1]}]" if prefix else "")


def assert_refused(capsys, path, said, *command):
    status, out, err = run(capsys, *command)
    assert (status, out) == (2, ""), err
    assert err.startswith(f"gpuprof: results file {path}{said}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_results_file_is_one_error_naming_the_file_and_the_member(small, tmp_path, capsys, case):
    original, doc = small
    doc, said = malformed(doc, case)
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc))  # a NaN as Python writes it: NaN
    out = tmp_path / "merged.json"
    assert_refused(capsys, bad, f": {said}", "diff", original, bad)
    assert_refused(capsys, bad, f": {said}", "diff", bad, original)
    assert_refused(capsys, bad, f": {said}", "merge", bad, "--json", out)
    assert not out.exists()


@pytest.mark.parametrize("version, said", VERSIONS, ids=[repr(v) for v, _ in VERSIONS])
def test_a_schema_version_other_than_the_integer_1_is_refused(small, tmp_path, capsys, version, said):
    original, doc = small
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({**doc, "schema_version": version}))
    said = f" has schema_version {said}"
    assert_refused(capsys, bad, said, "diff", original, bad)
    assert_refused(capsys, bad, said, "merge", bad)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_that_is_not_finite_is_refused_wherever_it_is(small, tmp_path, capsys, literal):
    """Python's json reads them all (1e400 as inf); strict JSON has none."""
    original, _ = small
    text = original.read_text()
    assert '"gpuprof_version": "' in text
    bad = tmp_path / "r.json"
    bad.write_text(text.replace('"gpuprof_version": "', f'"extra": {literal}, "gpuprof_version": "', 1))
    said = f": extra must be a finite number, got {float(literal)}"
    assert_refused(capsys, bad, said, "diff", original, bad)
    assert_refused(capsys, bad, said, "merge", bad, "--json", tmp_path / "merged.json")
    assert not (tmp_path / "merged.json").exists()


def test_the_console_command_says_one_line_and_exits_2(small, tmp_path):
    """As a user runs it: no traceback, whatever the reports or the judge would have read."""
    original, doc = small
    doc, said = malformed(doc, "nan-metric")
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc))
    for command in (["diff", original, bad], ["merge", bad, "--html", tmp_path / "r.html"]):
        done = subprocess.run([sys.executable, "-m", "pytest_gpuprof", *map(str, command)], capture_output=True,
                              text=True)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == f"gpuprof: results file {bad}: {said}\n"


# --- real results files: read as before -------------------------------------------

def written_before_facts(doc):
    """The document as gpuprof wrote it before 2026-11-28: no ``facts``, no ``detects``."""
    doc = copy.deepcopy(doc)
    for test in doc["tests"]:
        for t in [test, *(test.get("ranks") or {}).values()]:
            del t["facts"], t["detects"]
    return doc


def test_a_real_results_file_diffs_and_merges_and_so_does_one_written_before_facts(real, tmp_path, capsys):
    original, doc = real
    old = tmp_path / "old.json"
    old.write_text(json.dumps(written_before_facts(doc)))
    status, said, err = run(capsys, "diff", original, original)
    assert status == 0 and err == "" and said.count("no metric broke or improved") == 6 + 2 * 2
    for a, b in ((old, original), (original, old)):
        assert run(capsys, "diff", a, b) == (status, said.replace(f"A (baseline): {original}", f"A (baseline): {a}")
                                             .replace(f"B (current):  {original}", f"B (current):  {b}"), "")
    merged = {}
    for name, path in (("new", original), ("old", old)):
        out = tmp_path / name
        status, said, err = run(capsys, "merge", path, *(x for o in REPORTS for x in (o, out / o[2:])))
        assert status == 1 and err == "" and said.startswith("gpuprof: merged 1 results file(s): 1 failed, 7 passed")
        merged[name] = strict((out / "json").read_text())
    assert [(t["nodeid"], t["status"]) for t in merged["new"]["tests"]] == [
        (t["nodeid"], t["status"]) for t in doc["tests"]]
    assert merged["new"]["tests"] == doc["tests"]  # merged as written
    assert [(t["nodeid"], t["status"], t["verdicts"]) for t in merged["old"]["tests"]] == [
        (t["nodeid"], t["status"], t["verdicts"]) for t in doc["tests"]]
    # a merged file reads back: merged again, it is the same
    again = tmp_path / "again.json"
    assert run(capsys, "merge", tmp_path / "new" / "json", "--json", again)[0] == 1
    assert strict(again.read_text())["tests"] == doc["tests"]


#: What a test of the first results documents (2026-11-21) kept of its steps: times and counts.
FIRST_SERIES = ("kernel_count", "kernel_time_us", "kernels", "memset_count", "sync_count", "window_us")


def first_form(test):
    """A test as the first results documents wrote it: no member added since, its steps'
    times and counts alone (``FIRST_SERIES`` and the copies')."""
    since = ("facts", "detects", "health", "slower_machine", "notes", "machine", "baseline_runs", "confirmation",
             "alongside", "ranks", "counters", "baseline_counters")
    test = {k: v for k, v in test.items() if k not in since}
    for key in ("per_step", "baseline_per_step"):
        test[key] = {k: v for k, v in test[key].items() if k in FIRST_SERIES or k.startswith("memcpy_")
                     and not k.endswith("_gbps")}
    return test


def test_a_results_file_of_the_first_form_still_diffs_and_merges(real, tmp_path, capsys):
    """Written before per-step ratios, health, facts, ranks and counters were kept
    (benchmarks/results/gate_aa_h200_2026-11-21.tgz holds 109 of them)."""
    _, doc = real
    first = tmp_path / "first.json"
    first.write_text(json.dumps({**doc, "tests": [first_form(t) for t in doc["tests"] if not t.get("ranks")]}))
    status, said, err = run(capsys, "diff", first, first)
    assert (status, err) == (0, "") and said.count("no metric broke or improved") == 6
    assert run(capsys, "merge", first, "--json", tmp_path / "merged.json")[0] == 1  # the planted MoE bug


def test_a_report_that_would_hold_a_nan_is_not_written_and_fails_the_run(tmp_path):
    """Strict JSON out too: a number that is not finite is never written (files.json_text)."""
    doc = {"schema_version": 1, "tests": [], "counts": {"skipped": 0}, "skipped": [], "odd": math.nan}
    lines, written = write_reports(doc, {"json": tmp_path / "r.json"})
    assert not written and not (tmp_path / "r.json").exists()
    assert lines == [f"json report not written: {tmp_path / 'r.json'}: it holds a number that is not finite (NaN or "
                     "Infinity), which JSON cannot hold: the run fails"]


# --- property: a mutated real results file is an error, or read and written whole --

def _paths(node, prefix=()):
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append(prefix + (key,))
        out += _paths(value, prefix + (key,))
    return out


@functools.cache
def _places(text):
    """Every place of the small document, keys drawn as often as list items (thousands of
    per-step values would crowd them out)."""
    found = _paths(json.loads(text))
    return [p for p in found if isinstance(p[-1], str)], [p for p in found if isinstance(p[-1], int)]


VALUES = [DELETE, None, math.nan, math.inf, -1, -0.5, 0, 2 ** 63, 10 ** 400, 1e300, "abc", "", [], {}, True, [1, "x"],
          {"x": 1}]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_a_mutated_real_results_file_is_an_error_or_read_diffed_and_merged(small, tmp_path, capsys, data):
    original, _ = small
    keys, values = _places(original.read_text())
    if data is None:  # a NaN where the verdicts' numbers are
        path, value = ("tests", 0, "verdicts", 0, "current"), math.nan
    else:
        path = data.draw(st.sampled_from(keys) if data.draw(st.booleans()) else st.sampled_from(values))
        value = data.draw(st.sampled_from(VALUES))
    doc = json.loads(original.read_text())
    mutate(doc, path, value)
    bad = tmp_path / "mutated.json"
    bad.write_text(json.dumps(doc))
    status, _, err = run(capsys, "diff", original, bad)
    if status == 2:
        assert err.startswith((f"gpuprof: results file {bad}", f"gpuprof: {bad}")) and err.count("\n") == 1, err
        assert run(capsys, "merge", bad)[0] == 2
        return
    assert status in (0, 1) and err == "", (path, value)
    out = tmp_path / "merged"
    status, _, err = run(capsys, "merge", bad, *(x for o in REPORTS for x in (o, out / o[2:])))
    assert status in (0, 1) and err == "", (path, value)
    strict((out / "json").read_text())
    strict((out / "benchmark-json").read_text())
