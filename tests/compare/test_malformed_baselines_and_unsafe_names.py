"""Hostile inputs to the judging end: baseline entries that cannot be trusted, marker
arguments of the wrong type, and names from a trace that carry terminal escapes,
Markdown or HTML.  Each is one clear error naming the file or the test, never a
traceback, never a weaker gate; and what a trace names reaches no report raw."""

import copy
import dataclasses
import functools
import gzip
import html
import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_gpuprof.compare.baseline import BaselineFile
from pytest_gpuprof.compare.entry import check_entry
from pytest_gpuprof.compare.evaluate import Measured, TestResult, evaluate, of_measurement
from pytest_gpuprof.compare.recording import new_baseline_entry
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.samples import distribution
from pytest_gpuprof.errors import BaselineError
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.metrics.specs import RECORDED_SINCE
from pytest_gpuprof.report.escaping import html_text, markdown_block, markdown_code, markdown_text, terminal_text
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "baselines" / "example_suite"
TRACES = ROOT / "example_suite" / "traces"
GPU = "NVIDIA H200"
def _single_gpu(path):
    """A baseline file of one single-GPU test (a distributed test's entries hold one entry per
    rank: tests/compare/test_ranks_judge.py takes those apart)."""
    return not any("ranks" in e for by_gpu in json.loads(path.read_text())["tests"].values() for e in by_gpu.values())


MODULES = sorted(p.stem for p in BASELINES.glob("*.json") if _single_gpu(p))

pytest_plugins = ["pytester"]


def stored(module):
    """(node id, the real entry recorded for it on the H200) of a shipped baseline file."""
    doc = json.loads((BASELINES / f"{module}.json").read_text())
    (nodeid, by_gpu), = doc["tests"].items()
    return nodeid, by_gpu[GPU]


def trace_of(nodeid):
    return TRACES / (nodeid.replace("/", "_").replace("::", "_") + ".pt.trace.json.gz")


@functools.cache
def measured(module):
    nodeid, _ = stored(module)
    return measure(load_kineto(trace_of(nodeid)))


def judge_against(module, entry, regressed):
    """(status, verdicts) of the shipped trace judged against ``entry``; ``regressed``: the
    trace made worse first (one more kernel per step, every step 1.5 times slower), so that
    the true comparison fails."""
    nodeid, _ = stored(module)
    m = measured(module)
    run = Measured.of(m, "torch")
    if regressed:
        metrics = dict(run.metrics, kernel_count=run.metrics["kernel_count"] + m.metrics["step_count"])
        per_step = dict(run.per_step, kernel_time_us=[v * 1.5 for v in run.per_step["kernel_time_us"]])
        run = dataclasses.replace(run, metrics=metrics, per_step=per_step, distribution=distribution(per_step))
    result = TestResult.of(nodeid, run, evaluate(run, m, entry, Rules(), update=False))
    return result.status, [v.to_json() for v in result.verdicts]


def write_doc(path, nodeid, entry):
    path.write_text(json.dumps({"schema_version": 1, "tests": {nodeid: {GPU: entry}}}, allow_nan=True))


def entry_error(tmp_path, module, entry):
    """The error reading ``entry`` as the shipped module's entry in a baseline file."""
    nodeid, _ = stored(module)
    path = tmp_path / "b.json"
    write_doc(path, nodeid, entry)
    with pytest.raises(BaselineError) as err:
        BaselineFile(path).entry(nodeid, GPU)
    text = str(err.value)
    assert text.startswith(f"baseline file {path}: entry of {nodeid} on {GPU}: ")
    return text


# --- the shipped baselines are trusted, and judged as before -----------------

@pytest.mark.parametrize("module", MODULES)
def test_every_shipped_baseline_entry_is_accepted(module):
    nodeid, entry = stored(module)
    assert BaselineFile(BASELINES / f"{module}.json").entry(nodeid, GPU) == entry
    # the trace it was recorded from passes against it; made worse, it fails
    assert judge_against(module, entry, regressed=False)[0] in ("passed", "improved", "undecided")
    assert judge_against(module, entry, regressed=True)[0] == "failed"


# --- one malformed part at a time, each named --------------------------------

def _set(entry, path, value):
    *parents, last = path
    node = entry
    for key in parents:
        node = node[key]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value


class _Delete:
    """Marks a member to leave out; its repr names the test ids alike in every process
    (pytest-xdist compares them)."""

    def __repr__(self) -> str:
        return "<deleted>"


DELETE = _Delete()
MOE = "test_moe"
CASES = [  # (where, new value, words of the error)
    ((), "a string", "entry must be an object, got 'a string'"),
    (("metrics",), DELETE, "metrics is missing"),
    (("metrics", "kernel_count"), "abc", "metrics.kernel_count must be an integer in [0, 2**63), got 'abc'"),
    (("metrics", "kernel_count"), None, "metrics.kernel_count must be an integer in [0, 2**63), got None"),
    (("metrics", "kernel_count"), -710, "metrics.kernel_count must be an integer in [0, 2**63), got -710"),
    (("metrics", "kernel_count"), True, "metrics.kernel_count must be an integer in [0, 2**63), got True"),
    (("metrics", "kernel_count"), 2**63,
     "metrics.kernel_count must be an integer in [0, 2**63), got 9223372036854775808"),
    (("metrics", "memcpy_htod_bytes"), 1.5, "metrics.memcpy_htod_bytes must be an integer in [0, 2**63), got 1.5"),
    (("per_step", "stalled", 0), 2, "per_step.stalled[0] must be 0 or 1, got 2"),
    (("metrics", "kernel_time_us"), math.nan, "metrics.kernel_time_us must be a finite number in [0, 2**63), got nan"),
    (("metrics", "window_us"), math.inf, "metrics.window_us must be a finite number in [0, 2**63), got inf"),
    (("metrics", "gpu_utilization"), None, "metrics.gpu_utilization must be a finite number in [0, 1], got None"),
    (("metrics", "sync_wait_fraction"), 7, "metrics.sync_wait_fraction must be a finite number in [0, 1], got 7"),
    (("metrics", "kernel_time_us"), 10**400, "metrics.kernel_time_us must be a finite number in [0, 2**63), got 1000"),
    (("metrics", "kernel_time_us"), 2**63 - 1,
     "metrics.kernel_time_us must be a finite number in [0, 2**63), got 9223"),
    (("metrics", "step_count"), 0, "metrics.step_count must be a positive integer, got 0"),
    (("metrics", "sync_count"), DELETE, "metrics.sync_count is missing"),
    (("metrics", "kernels"), [], "metrics.kernels must be an object of kernel names, got []"),
    (("metrics", "kernels"), {}, "metrics.kernels must be the counts of the kernels that ran, got {}"),
    (("per_step", "kernels"), {}, "per_step.kernels must be the per-step times of the heaviest kernels, got {}"),
    (("backend",), 5, "backend must be one of 'torch', 'nsys', got 5"),
    (("backend",), "perf", "backend must be one of 'torch', 'nsys', got 'perf'"),
    (("runs",), {}, "runs must be a non-empty list, got {}"),
    (("runs",), [], "runs must be a non-empty list, got []"),
    (("runs",), DELETE, "runs is missing"),
    (("runs", 0), "run", "runs[0] must be an object, got 'run'"),
    (("runs", 1, "per_step"), DELETE, "runs[1].per_step is missing"),
    (("runs", 1, "distribution"), DELETE, "runs[1].distribution is missing"),
    (("runs", 2, "machine", "launch_us"), "fast",
     "runs[2].machine.launch_us must be a finite number in [0, 2**63) or null, got 'fast'"),
    (("per_step",), [1, 2], "per_step must be an object, got [1, 2]"),
    (("per_step", "kernel_time_us"), DELETE, "per_step.kernel_time_us is missing"),
    (("per_step", "kernel_time_us", 3), -4.0,
     "per_step.kernel_time_us[3] must be a finite number in [0, 2**63), got -4.0"),
    (("per_step", "kernel_time_us", 3), None,
     "per_step.kernel_time_us[3] must be a finite number in [0, 2**63), got None"),
    (("per_step", "gpu_utilization", 3), None,
     "per_step.gpu_utilization[3] must be a finite number in [0, 1] (null only in a step with no window), got None"),
    (("per_step", "sync_wait_fraction", 3), 1.5,
     "per_step.sync_wait_fraction[3] must be a finite number in [0, 1], got 1.5"),
    (("runs", 0, "per_step", "memcpy_htod_count"), math.inf,
     "runs[0].per_step.memcpy_htod_count must be a list of per-step values, got inf"),
    (("per_step", "stalled"), DELETE, "per_step.stalled is missing"),
    # a series recorded since 2026-11-25 may be absent, not null (a null one crashed the judge: Hypothesis found it)
    (("per_step", "memcpy_dtoh_gbps"), None, "per_step.memcpy_dtoh_gbps is missing"),
    (("distribution",), "wide", "distribution must be an object, got 'wide'"),
    (("distribution", "kernel_time_us", "median"), "x",
     "distribution.kernel_time_us.median must be a finite number in [0, 2**63), got 'x'"),
    (("distribution", "kernel_time_us", "q1"), 1e9,
     "distribution.kernel_time_us must be ordered min <= q1 <= median <= q3 <= max"),
    (("distribution", "gpu_utilization", "max"), 2,
     "distribution.gpu_utilization.max must be a finite number in [0, 1], got 2"),
    (("timeline", "events"), "0 0 zero", "timeline must be a timeline sample"),
    # the host threads' runtime calls (their thread and name indices; kept since 2026-11-27)
    (("timeline", "calls"), "0 5 7 99", "timeline must be a timeline sample"),
    (("timeline", "calls"), "0 5 x 0", "timeline must be a timeline sample"),
]


@pytest.mark.parametrize("where, value, words", CASES,
                         ids=[".".join(map(str, c[0])) + f"={c[1]!r}"[:30] for c in CASES])
def test_a_malformed_entry_is_an_error_naming_the_file_the_test_and_the_part(tmp_path, where, value, words):
    entry = copy.deepcopy(stored(MOE)[1])
    if where:
        _set(entry, where, value)
    else:
        entry = value
    assert words in entry_error(tmp_path, MOE, entry)


@pytest.mark.parametrize("edit, words", [
    (lambda e: e["per_step"].pop("memcpy_dtoh_bytes"), "per_step.memcpy_dtoh_bytes is missing"),
    (lambda e: e["runs"][0]["per_step"].pop("memcpy_htod_bytes"), "runs[0].per_step.memcpy_htod_bytes is missing"),
    (lambda e: e["per_step"].update(comm_compute_overlap=[None] * len(e["per_step"]["stalled"])),
     "per_step.comm_time_us is missing"),
], ids=["memcpy_dtoh_bytes", "runs[0].memcpy_htod_bytes", "comm_time_us"])
def test_a_null_whose_step_the_entry_cannot_tell_is_an_error_naming_the_list(tmp_path, edit, words):
    """A bandwidth or an overlap may be null in a step with nothing to divide, which other
    lists tell; without them the check was a traceback (KeyError; found by
    benchmarks/fuzz_baselines.py).  The fused-norm test copies nothing: its bandwidths are null."""
    entry = copy.deepcopy(stored("test_fused_norm")[1])
    edit(entry)
    assert words in entry_error(tmp_path, "test_fused_norm", entry)


@pytest.mark.parametrize("content, words", [
    (b'{"schema_version": 1, "tests": {"m.py::t": {"H200": {"metrics": "\xff\xfe"}}}}', "is not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "is not valid JSON"),
    (b'{"schema_version": 1, "tests": {"m.py::t": "H200"}}', "test m.py::t must map GPU models to entries, got 'H200'"),
    # found by benchmarks/fuzz_baselines.py: each was read, as no baseline or as the last of two values
    (b'{"schema_version": 1, "tests": {"m.py::t": {"H200": null}}}',
     "entry of m.py::t on H200: entry must be an object, got None"),
    (b'{"schema_version": 1, "tests": {"m.py::t": {"backend": "torch", "metrics": {}}}}',  # the GPU level left out
     "entry of m.py::t on backend: entry must be an object, got 'torch'"),
    (b'{"schema_version": 1, "tests": {"m.py::t": {"H200": {"metrics": {}}, "H200": {"metrics": {}}}}}',
     "gives the name 'H200' twice in one object"),
    (b'{"schema_version": true, "tests": {}}', "has schema_version True"),
])
def test_an_unreadable_file_is_an_error_naming_it(tmp_path, content, words):
    path = tmp_path / "m.json"
    path.write_bytes(content)
    with pytest.raises(BaselineError, match=re.escape(words)) as err:
        BaselineFile(path).entry("m.py::t", "H200")
    assert str(path) in str(err.value)


def test_an_entry_of_before_samples_were_kept_is_judged_on_its_metrics(tmp_path):
    """Only ``metrics`` (older gpuprof): accepted as one run that kept nothing, and judged on
    the totals per step."""
    nodeid, entry = stored(MOE)
    path = tmp_path / "b.json"
    write_doc(path, nodeid, {"backend": "torch", "metrics": entry["metrics"]})
    old = BaselineFile(path).entry(nodeid, GPU)
    assert old == {"backend": "torch", "metrics": entry["metrics"], "runs": [{}]}
    assert judge_against(MOE, old, regressed=True)[0] == "failed"


def test_a_lone_surrogate_in_a_name_is_written_as_its_escape_and_reads_back(tmp_path):
    """A ``\\ud800`` escape in a baseline (or a trace) is a string UTF-8 cannot hold: the
    reports and the baseline update wrote it as a traceback; they write it as the escape."""
    file = BaselineFile(tmp_path / "m.json")
    entry = {"environment": {"note\ud800": "x\udfff"}, "runs": [{}]}
    doc = {"schema_version": 1, "tests": {"m.py::t": {"H200": entry}}}
    file.path.write_text(json.dumps(doc))
    file.update({"m.py::u": {"H200": {"metrics": {}, "runs": [{}]}}})
    assert file.path.read_text().count("\\ud800") == 1
    assert file.load()["tests"]["m.py::t"] == doc["tests"]["m.py::t"]


def test_an_update_replaces_recorded_runs_that_share_no_kernel_with_it():
    """Runs of another test pasted into an entry: pooled with this run, no kernel would be
    left to judge, and the next run would refuse the entry the update wrote."""
    nodeid, entry = stored(MOE)
    result = of_measurement(nodeid, measured(MOE), "torch")
    assert new_baseline_entry(result, entry, 5)[1] == "run 4 of at most 5 recorded"
    foreign = copy.deepcopy(entry)
    for run in foreign["runs"]:
        steps = len(run["per_step"]["stalled"])
        run["per_step"]["kernels"] = {"another_kernel": [1.0] * steps}
    new, how = new_baseline_entry(result, foreign, 5)
    assert how == "replaced: the GPU work per step changed" and len(new["runs"]) == 1
    check_entry(new)


# --- the same through pytest: an `error` status, the file left as it was -----

HOSTILE_ENTRIES = {
    "kernel_count-abc": (("metrics", "kernel_count"), "abc"),
    "backend-5": (("backend",), 5),
    "no-metrics": (("metrics",), DELETE),
}


@pytest.mark.parametrize("mode", ["--gpuprof", "--gpuprof-update-baseline"])
@pytest.mark.parametrize("case", sorted(HOSTILE_ENTRIES))
def test_a_malformed_entry_fails_its_test_as_error_and_is_never_overwritten(pytester, mode, case):
    nodeid, entry = stored(MOE)
    entry = copy.deepcopy(entry)
    _set(entry, *HOSTILE_ENTRIES[case])
    suite = minimal_suite(pytester, MOE)
    path = pytester.path / "baselines" / "example_suite" / "test_moe.json"
    path.parent.mkdir(parents=True)
    write_doc(path, nodeid, entry)
    before = path.read_bytes()
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={suite}", mode)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "pytest_gpuprof/" not in out
    assert re.search(rf"^gpuprof: baseline file {re.escape(str(path))}: entry of {re.escape(nodeid)} on {GPU}: ",
                     out, re.M), out
    assert re.search(rf"^{re.escape(nodeid)}\s+error", out, re.M), out
    assert path.read_bytes() == before


def minimal_suite(pytester, module, marker="", trace=None):
    """example_suite/<module>.py with its one test in fixture form, and a replay folder
    holding its real trace (or ``trace``, bytes); returns the replay folder."""
    nodeid, _ = stored(module)
    name = nodeid.split("::")[1]
    pytester.makefile(".ini", pytest="[pytest]\n")
    (pytester.path / "example_suite").mkdir(exist_ok=True)
    (pytester.path / "example_suite" / f"{module}.py").write_text(
        f"import pytest\n\n{marker}\ndef {name}(gpuprof):\n    for _ in gpuprof.steps():\n        pass\n")
    replay = pytester.path / "replay"
    replay.mkdir(exist_ok=True)
    if trace is None:
        shutil.copyfile(trace_of(nodeid), replay / trace_of(nodeid).name)
    else:
        (replay / trace_of(nodeid).name).write_bytes(trace)
    return replay


# --- property: a mutated real entry is an error, or judged exactly as before --

def _paths(node, prefix=()):
    """Every place in an entry: (path, whether it is a name the data chose, e.g. a kernel's)."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            named = prefix[-1:] == ("kernels",) or prefix[-1:] in (("environment",), ("machine",))
            out.append((prefix + (key,), named))
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append((prefix + (i,), False))
            out += _paths(value, prefix + (i,))
    return out


@functools.cache
def places(module):
    """The places of an entry, structure first: a random pick would mostly hit one of the
    thousands of per-step values, so the keys are drawn as often as the values."""
    found = _paths(stored(module)[1])
    keys = [p for p in found if isinstance(p[0][-1], str)]
    values = [p for p in found if isinstance(p[0][-1], int)]
    return keys, values


VALUES = [DELETE, None, math.nan, math.inf, -math.inf, -1, -0.5, "abc", "", [], {}, True, False, 2 ** 63, [1, "x"]]


@st.composite
def mutations(draw):
    module = draw(st.sampled_from(MODULES))
    keys, values = places(module)
    path, named = draw(st.sampled_from(keys) if draw(st.booleans()) else st.sampled_from(values))
    value = draw(st.sampled_from(VALUES))
    if value is DELETE and (named or isinstance(path[-1], int)):
        value = None  # deleting a kernel name or a step changes what was measured, not the file's shape
    return module, path, value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations(), regressed=st.booleans())
@example(mutation=("test_fused_norm", ("metrics", "comm_kernel_count"), DELETE), regressed=False)
def test_a_mutated_real_entry_is_an_error_or_judged_exactly_as_the_original(tmp_path, mutation, regressed):
    module, path, value = mutation
    nodeid, original = stored(module)
    entry = copy.deepcopy(original)
    _set(entry, path, value)
    file = tmp_path / "b.json"
    write_doc(file, nodeid, entry)
    try:
        read = BaselineFile(file).entry(nodeid, GPU)
    except BaselineError as exc:
        assert str(exc).startswith(f"baseline file {file}: "), exc
        return
    # accepted: the mutation changed nothing the verdicts read (a free-form field, or a
    # summary the samples give again), so the judgement is the original's, never weaker
    status, verdicts = judge_against(module, read, regressed)
    expected_status, expected = judge_against(module, original, regressed)
    if path[0] == "metrics" and path[-1] in RECORDED_SINCE and value in (DELETE, None):
        # an entry recorded before the metric existed: that metric, and only it, is said not compared
        name = path[-1]
        assert [v["rule"] for v in verdicts if v["metric"] == name] == ["not compared: no value in one of the runs"]
        verdicts = [v for v in verdicts if v["metric"] != name]
        expected = [v for v in expected if v["metric"] != name]
    assert (status, verdicts) == (expected_status, expected), (path, value)


# --- marker arguments ---------------------------------------------------------

BAD_MARKERS = {
    "thresholds=[5]": "thresholds must be a string or a list of strings such as 'gpu_utilization >= 0.85', got [5]",
    "thresholds=['gpu_utilization >> 1']": "cannot parse threshold 'gpu_utilization >> 1'",
    "tolerances={'kernel_time_us': 'abc'}": "tolerances['kernel_time_us'] must be a finite number >= 0, got 'abc'",
    "tolerances={'kernel_time_us': -0.1}": "tolerances['kernel_time_us'] must be a finite number >= 0, got -0.1",
    "tolerances={'kernel_time_us': float('nan')}": "tolerances['kernel_time_us'] must be a finite number >= 0, got nan",
    "tolerances={'kernel_time_us': True}": "tolerances['kernel_time_us'] must be a finite number >= 0, got True",
    "tolerances=0.1": "tolerances must be a dict of metric name to tolerance, got 0.1",
    "tolerances={'kernel_tme_us': 0.1}": "tolerances names unknown metric 'kernel_tme_us'",
    "active=0": "active must be at least 1, got 0",
    "warmup=-1": "warmup must be a non-negative integer, got -1",
    "active='10'": "active must be a non-negative integer, got '10'",
    "flush_l2='yes'": "flush_l2 must be True or False, got 'yes'",
}


def test_each_bad_marker_argument_fails_its_test_with_one_line_naming_it(pytester):
    pytester.makefile(".ini", pytest="[pytest]\n")
    tests = "".join(f"\n\n@pytest.mark.gpuprof({args})\ndef test_{i}(gpuprof):\n    for _ in gpuprof.steps():\n"
                    "        pass\n" for i, args in enumerate(BAD_MARKERS))
    pytester.makepyfile(test_marks="import pytest\n" + tests)
    replay = pytester.path / "replay"
    replay.mkdir()
    trace = trace_of(stored(MOE)[0])
    for i in range(len(BAD_MARKERS)):
        shutil.copyfile(trace, replay / f"test_marks.py_test_{i}.pt.trace.json.gz")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={replay}")
    outcomes = result.parseoutcomes()  # setup errors (the fixture) and failures (judging)
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == len(BAD_MARKERS), outcomes
    out = result.stdout.str()
    assert "During handling" not in out
    assert "Traceback" not in out and "pytest_gpuprof/" not in out, out
    for i, words in enumerate(BAD_MARKERS.values()):
        line = f"@pytest.mark.gpuprof on test_marks.py::test_{i}: "
        assert any(line in row and words in row for row in result.outlines), (words, out)


# --- escaping ------------------------------------------------------------------

HOSTILE_NAME = "k\x1b[31mred\x1b]0;title\x07|`x`|\n# heading\n```\n[a](http://x) <script>alert(1)</script> &amp; \u202e"


def test_terminal_text_shows_every_control_character_as_its_escape():
    assert terminal_text(HOSTILE_NAME) == (
        "k\\x1b[31mred\\x1b]0;title\\x07|`x`|\\n# heading\\n```\\n[a](http://x) <script>alert(1)</script> "
        "&amp; \\u202e")
    assert terminal_text("void gemm<float, 128>(int)") == "void gemm<float, 128>(int)"


def test_markdown_text_escapes_what_markdown_would_act_on():
    assert markdown_text(HOSTILE_NAME) == (
        # the escapes' backslashes escaped too: rendered, the text shows \x1b
        "k\\\\x1b\\[31mred\\\\x1b\\]0;title\\\\x07\\|\\`x\\`\\|\\\\n\\# heading\\\\n\\`\\`\\`\\\\n"
        "\\[a\\](http://x) &lt;script>alert(1)&lt;/script> &amp;amp; \\\\u202e")
    assert markdown_code("a|``b") == "```a\\|``b```"
    assert markdown_block("gpuprof: no baseline for H````\n# x") == [
        "`````text", "gpuprof: no baseline for H````\\n# x", "`````"]


def test_html_text_escapes_markup_and_quotes():
    assert html_text('<script>"x" & \'y\'</script>') == "&lt;script&gt;&quot;x&quot; &amp; &#x27;y&#x27;&lt;/script&gt;"
    assert html_text(None) == ""


def hostile_trace(nodeid, gpu=True, kernel=True, name=HOSTILE_NAME):
    """The real trace of ``nodeid`` with its GPU and its first kernel renamed ``name``."""
    doc = json.loads(gzip.decompress(trace_of(nodeid).read_bytes()))
    if gpu:
        for device in doc.get("deviceProperties", []):
            device["name"] = name
        doc["gpuprof"]["environment"]["gpu"] = name
    first = next(e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
    for event in doc["traceEvents"]:
        if kernel and event.get("name") == first:
            event["name"] = name
    return gzip.compress(json.dumps(doc).encode())


def outside_code_blocks(markdown):
    """The lines of a Markdown text that are not inside a fenced code block."""
    out, fence = [], None
    for line in markdown.splitlines():
        run = re.match(r"`{3,}", line)
        if fence is None and run:
            fence = run[0]
        elif fence is not None and line.startswith(fence) and not line.strip("`"):
            fence = None
        elif fence is None:
            out.append(line)
    return out


REPORTS = ("--gpuprof-summary=s.md", "--gpuprof-html=r.html", "--gpuprof-json=r.json")


def reports_hold_no_raw_name(pytester, result):
    out = result.stdout.str()
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    summary = (pytester.path / "s.md").read_text()
    assert "\x1b" not in summary and "\u202e" not in summary
    plain = outside_code_blocks(summary)
    prose = [re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line) for line in plain]  # inline code left out
    assert not any("<script>" in line or line.startswith("# ") for line in prose), summary
    page = (pytester.path / "r.html").read_text()
    # the page's own scripts aside, the name shows only escaped (in its timeline's JSON as \u003c)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    return out, summary, plain


def test_a_gpu_name_from_a_trace_reaches_no_terminal_markdown_or_html_raw(pytester):
    """--gpuprof-strict puts the GPU name in the failure message, and the summary in a code
    block whose fence is longer than the name's."""
    nodeid, _ = stored(MOE)
    replay = minimal_suite(pytester, MOE, trace=hostile_trace(nodeid, kernel=False))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={replay}", "--gpuprof-strict", *REPORTS)
    result.assert_outcomes(failed=1)
    out, summary, plain = reports_hold_no_raw_name(pytester, result)
    assert f"gpuprof: no baseline for {terminal_text(HOSTILE_NAME)} in " in out
    assert f"GPU: {terminal_text(HOSTILE_NAME)}" in result.outlines
    assert [line for line in plain if line.startswith("#")] == ["## gpuprof: 1 failed", "### Failures"]
    assert f"<summary>❌ <code>{html.escape(nodeid)}</code></summary>" in summary  # its fold, named once
    assert [line for line in summary.splitlines() if line.startswith("```")] == ["````text", "````"], summary
    doc = json.loads((pytester.path / "r.json").read_text())
    assert doc["tests"][0]["gpu"] == HOSTILE_NAME  # the results document keeps it as it was: JSON escapes it


def test_a_kernel_name_from_a_trace_reaches_no_terminal_markdown_or_html_raw(pytester):
    """Against the shipped baseline the renamed kernel is new (and the old name vanished):
    the failure message, the summary and the HTML name it."""
    nodeid, _ = stored(MOE)
    replay = minimal_suite(pytester, MOE, trace=hostile_trace(nodeid, gpu=False))
    (pytester.path / "baselines" / "example_suite").mkdir(parents=True)
    shutil.copyfile(BASELINES / "test_moe.json", pytester.path / "baselines" / "example_suite" / "test_moe.json")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={replay}", *REPORTS)
    result.assert_outcomes(failed=1)
    out, summary, plain = reports_hold_no_raw_name(pytester, result)
    assert f"  kernels[{terminal_text(HOSTILE_NAME)}].count: new kernel, " in out
    assert markdown_code(f"kernels[{HOSTILE_NAME}].count") in summary
    assert [line for line in plain if line.startswith("#")] == ["## gpuprof: 1 failed", "### Failures"]
    assert f"<summary>❌ <code>{html.escape(nodeid)}</code></summary>" in summary  # its fold, named once


#: Every C0 control character and DEL, which XML 1.0 cannot hold even escaped (but tab and
#: line breaks), in a kernel's name.
CONTROL_NAME = "k" + "".join(map(chr, range(32))) + "\x7f\x85 end"


def test_names_of_control_characters_leave_every_report_well_formed(pytester):
    """JUnit XML parses (its properties name the kernel visibly), and no report holds a control
    character raw: the page shows each as its escape."""
    nodeid, _ = stored(MOE)
    replay = minimal_suite(pytester, MOE, trace=hostile_trace(nodeid, gpu=False, name=CONTROL_NAME))
    (pytester.path / "baselines" / "example_suite").mkdir(parents=True)
    shutil.copyfile(BASELINES / "test_moe.json", pytester.path / "baselines" / "example_suite" / "test_moe.json")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={replay}", "--junitxml=j.xml",
                                *REPORTS)
    result.assert_outcomes(failed=1)
    properties = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").iter("property")}
    shown = terminal_text(CONTROL_NAME)
    assert f"gpuprof.broken.kernels[{shown}].count" in properties
    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85]")
    for report in ("s.md", "r.html", "j.xml"):
        text = (pytester.path / report).read_text()
        assert not raw.findall(text), (report, sorted(set(raw.findall(text))))
    page = (pytester.path / "r.html").read_text()  # the name shown, its tab and line feed as white space
    escapes = {c: f"\\x{c:02x}" for c in [*range(9), 11, 12, *range(14, 32), 0x7f, 0x85]} | {13: "\\r"}
    assert html.escape(CONTROL_NAME.translate(escapes)) in page
