"""The pytest session under hostile conditions: pytest-xdist, kill -9 during a baseline
update, a steps() loop left running, odd node ids and rootdirs, the plugin disabled.

Suites replay real H200 traces from ``example_suite/traces`` (no GPU needed).
"""

import json
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.nsys import FAKE_NSYS, executable
from helpers.nsys import run as run_under_nsys
from helpers.suites import NO_GPU, ROOT, TRACES, fixture_test, replay_dir, section, write_module
from pytest_gpuprof.compare import baseline
from pytest_gpuprof.files import JOURNAL
from pytest_gpuprof.run.kept_traces import trace_name, unique_trace_name

SHIPPED = {  # node id -> its shipped trace (named by trace_name, without a digest)
    nodeid: TRACES / trace_name(nodeid) for nodeid in (
        "example_suite/test_cnn.py::test_cnn_train_step",
        "example_suite/test_launch_bound.py::test_small_batch_decode",
        "example_suite/test_moe.py::test_moe_forward",
        "example_suite/test_transformer.py::test_transformer_train_step",
        "example_suite/test_weight_streaming.py::test_weight_streaming",
    )
}


def shipped_suite(pytester):
    """The example suite's five node ids, each a fixture-form test (bodies never run under replay)."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    for nodeid in SHIPPED:
        module, name = nodeid.removeprefix("example_suite/").removesuffix(".py").split(".py::")
        write_module(pytester, module, fixture_test(name))


def reports(folder):
    """Every report option, each into ``folder``."""
    return [f"--gpuprof-json={folder / 'r.json'}", f"--gpuprof-summary={folder / 's.md'}",
            f"--gpuprof-html={folder / 'r.html'}", f"--gpuprof-benchmark-json={folder / 'b.json'}"]


def named_in_reports(folder, nodeids):
    """For each report, the node ids it names."""
    doc = json.loads((folder / "r.json").read_text())
    bench = json.loads((folder / "b.json").read_text())
    return {
        "json": {t["nodeid"] for t in doc["tests"]},
        "summary": {n for n in nodeids if n in (folder / "s.md").read_text()},
        "html": {n for n in nodeids if n in (folder / "r.html").read_text().replace("<wbr>", "")},
        "benchmark-json": {n for n in nodeids if any(n in entry["name"] for entry in bench)},
    }


def baseline_entries(folder):
    return {nodeid: sorted(by_gpu) for file in sorted(folder.rglob("*.json"))
            for nodeid, by_gpu in json.loads(file.read_text())["tests"].items()}


# --- pytest-xdist --------------------------------------------------------------------

@pytest.mark.parametrize("workers", [2])
def test_xdist_reports_and_baselines_hold_every_test(pytester, workers):
    """Workers judge, the controller writes: every report and the baselines hold every test,
    exactly as a run without xdist writes them."""
    pytest.importorskip("xdist")
    shipped_suite(pytester)
    out = {}
    for mode in ("serial", "xdist"):
        folder = pytester.path / mode
        folder.mkdir()
        args = ["-p", "no:cacheprovider", f"--gpuprof-replay={TRACES}", "--gpuprof-update-baseline",
                f"--gpuprof-baseline-dir={folder / 'baselines'}", *reports(folder)]
        result = pytester.runpytest_subprocess(*args, *(["-n", str(workers)] if mode == "xdist" else []))
        assert result.ret == 0, result.stdout.str()
        assert "no profiled tests ran" not in result.stdout.str()
        assert {n: "updated" for n in SHIPPED}.items() <= {
            line.split()[0]: line.split()[1] for line in section(result) if "::" in line}.items()
        assert named_in_reports(folder, SHIPPED) == {kind: set(SHIPPED) for kind in
                                                     ("json", "summary", "html", "benchmark-json")}
        assert baseline_entries(folder / "baselines") == {n: ["NVIDIA H200"] for n in SHIPPED}
        doc = json.loads((folder / "r.json").read_text())
        out[mode] = json.loads(json.dumps(doc["tests"]).replace(str(folder), "FOLDER"))
    assert out["xdist"] == out["serial"]  # the controller's document is the one a plain run writes
    serial, xdist = (sorted((pytester.path / m / "baselines").rglob("*.json")) for m in ("serial", "xdist"))
    assert [f.read_text() for f in xdist] == [f.read_text() for f in serial]


# --- kill -9 during a baseline update --------------------------------------------------

KILLS = int(os.environ.get("GPUPROF_KILL_TRIALS", "12"))
FILES = 5

UPDATER = string.Template(textwrap.dedent('''
    import sys
    from pathlib import Path
    from pytest_gpuprof.compare import baseline

    root = Path(sys.argv[1])
    generation = int(sys.argv[2])
    print("ready", flush=True)
    while True:  # one multi-file update after another until killed
        generation += 1
        baseline.update_all(root, {root / f"m{i}.json": {f"m{i}.py::t": {"GPU": {
            "generation": generation, "pad": "x" * 300_000}}} for i in range($files)})
''')).substitute(files=FILES)


def generations(root):
    """Each file's generation, reading it as a run would (a half-written file fails here)."""
    return [baseline.BaselineFile(root / f"m{i}.json").load()["tests"][f"m{i}.py::t"]["GPU"]["generation"]
            for i in range(FILES)]


def test_kill_9_during_multi_file_updates_loses_nothing(pytester):
    """SIGKILL at random moments of updates of five files: every file is always a whole
    version; the next run finishes or undoes the interrupted update, so all five files are
    the same update's; no temporary file or journal survives it."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    root = pytester.path / "baselines"
    baseline.update_all(root, {root / f"m{i}.json": {f"m{i}.py::t": {"GPU": {"generation": 0}}} for i in range(FILES)})
    rng = random.Random(11)
    seen = {"journal": 0, "temps": 0, "mixed": 0}
    last = 0
    for _ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", UPDATER, str(root), str(last)], stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout.readline() == "ready\n"
        try:
            child.wait(rng.uniform(0.0, 0.4))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        child.stdout.close()
        before = generations(root)  # readable at once: each file an old or a new version
        assert min(before) >= last
        seen["journal"] += (root / JOURNAL).exists()
        seen["temps"] += any(root.glob(".*.tmp"))
        seen["mixed"] += len(set(before)) > 1
        baseline.clean(root)  # what every later run does first
        after = generations(root)
        assert len(set(after)) == 1 and after[0] >= last and set(before) <= set(after) | {after[0] - 1}
        last = after[0]
        assert not list(root.glob(".*.tmp")) and not (root / JOURNAL).exists()
    print(f"kill -9 trials: {KILLS}; with the journal written: {seen['journal']}; with temporary files: "
          f"{seen['temps']}; files of different updates before recovery: {seen['mixed']}; lost or torn: 0")


def test_the_next_run_deletes_what_a_killed_update_left(pytester):
    """A temporary file and a journal left by a killed update: the next run (no update)
    finishes the renames, deletes the temporary files and says so."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    root = pytester.path / "baselines"
    root.mkdir()
    (root / "old.json").write_text("{}")
    (root / ".old.json.abc123.tmp").write_text('{"tests": {}, "schema_version": 1}')
    (root / ".left.json.xyz.tmp").write_text("half a fi")
    (root / JOURNAL).write_text(json.dumps([[".old.json.abc123.tmp", "old.json"]]))
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpuprof")
    assert result.ret == 0
    assert json.loads((root / "old.json").read_text()) == {"tests": {}, "schema_version": 1}
    assert sorted(p.name for p in root.iterdir()) == ["old.json"]
    assert f"deleted 1 temporary file(s) an interrupted run left in {root}" in section(result)


# --- the steps() loop left running -----------------------------------------------------

FAKE_PROFILER = '''
import pytest
import torch
from pytest_gpuprof.capture import profiler
from pytest_gpuprof.run import backends, session

LOG = []


def fake_profiled_steps(self, plan, trace_path):
    """torch.profiler's start and stop, logged (no GPU here)."""
    LOG.append("profiler started")
    try:
        for i in range(plan.total):
            yield i
    finally:
        LOG.append("profiler stopped")


profiler.GpuProf._profiled_steps = fake_profiled_steps
torch.cuda.is_available = lambda: True
backends.no_cuda = lambda: None  # a GPU, whatever driver this machine has
session.measure_machine = lambda device: {}
torch.cuda.current_device = lambda: 0


@pytest.fixture
def log():
    return LOG
'''


def test_a_steps_loop_held_in_a_variable_stops_profiling_when_its_test_raises(pytester):
    pytester.makeconftest(FAKE_PROFILER)
    pytester.makepyfile(test_held='''
        def test_raises(gpuprof):
            it = gpuprof.steps(warmup=0, active=3)
            next(it)
            raise RuntimeError("the test fails mid-loop")


        def test_next(log):
            assert log == ["profiler started", "profiler stopped"]
    ''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: the test fails mid-loop*"])


# --- node ids and rootdirs -------------------------------------------------------------

def test_node_ids_that_differ_only_in_unsafe_characters_get_distinct_traces():
    names = {unique_trace_name(n) for n in ("a/b", "a_b", "a b", "a::b", "a?b")}
    assert len(names) == 5
    assert all(name.startswith("a_b.") and name.endswith(".pt.trace.json.gz") for name in names)


def test_tests_sharing_a_trace_name_replay_their_own_traces(pytester):
    """Ids ``a b``, ``a_b`` and ``a/b`` of one test: each replays its own trace; a trace under
    the name they share is replayed for none of them."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_ids='''
        import pytest


        @pytest.mark.parametrize("v", [1, 2, 3], ids=["a b", "a_b", "a/b"])
        def test_x(gpuprof, v):
            pass
    ''')
    nodeids = [f"test_ids.py::test_x[{i}]" for i in ("a b", "a_b", "a/b")]
    folder = pytester.path / "replay"
    folder.mkdir()
    for nodeid, source in zip(nodeids, SHIPPED.values()):
        shutil.copyfile(source, folder / unique_trace_name(nodeid))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}", "--gpuprof-json=r.json")
    assert result.ret == 0, result.stdout.str()
    doc = json.loads((pytester.path / "r.json").read_text())
    assert {t["nodeid"]: Path(t["trace"]).name for t in doc["tests"]} == {n: unique_trace_name(n) for n in nodeids}
    shared = folder / trace_name(nodeids[0])
    assert all(trace_name(n) == shared.name for n in nodeids)
    for n in nodeids:
        (folder / unique_trace_name(n)).rename(shared)  # the last one stays, under the shared name
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}")
    result.assert_outcomes(failed=3)
    for n in nodeids:
        others = ", ".join(o for o in nodeids if o != n)
        assert f"gpuprof: trace {shared} could be the trace of {n} or of {others}: rename it {unique_trace_name(n)}" \
            in result.outlines


def test_a_test_outside_the_rootdir_is_judged_and_recorded(pytester):
    """Node id ``::test_moe_forward`` (a file outside the rootdir): its trace and its
    baseline file have names, and the baseline stays under the baseline directory."""
    project, outside = pytester.path / "project", pytester.path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (outside / "test_far.py").write_text(fixture_test("test_moe_forward"))
    traces = project / "traces"
    traces.mkdir()
    shutil.copyfile(SHIPPED["example_suite/test_moe.py::test_moe_forward"],
                    traces / unique_trace_name("::test_moe_forward"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir=.",
                             f"--gpuprof-replay={traces}", "--gpuprof-update-baseline", "../outside/test_far.py"],
                            cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    entries = json.loads((project / "baselines" / f"{baseline.OUTSIDE_ROOTDIR}.json").read_text())["tests"]
    assert list(entries) == ["::test_moe_forward"]
    assert baseline.baseline_file(project, "../outside/test_far.py::t") == project / "__" / "outside" / "test_far.json"


@pytest.mark.parametrize("form", ["space", "equals"])
def test_replay_dir_given_with_a_space_that_moved_the_rootdir_is_refused(pytester, form):
    shipped_suite(pytester)
    traces = pytester.path.parent / f"{pytester.path.name}-traces"
    shutil.copytree(TRACES, traces, dirs_exist_ok=True)
    value = os.path.relpath(traces, pytester.path)
    args = ["--gpuprof-replay", value] if form == "space" else [f"--gpuprof-replay={value}"]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    refused = f"write --gpuprof-replay={value}" in result.stderr.str()
    assert refused == (form == "space")
    assert result.ret == (pytest.ExitCode.USAGE_ERROR if form == "space" else 0), result.stdout.str()


# --- replay gaps, no GPU, no plugin ----------------------------------------------------

def test_replaying_a_folder_without_some_traces_skips_those_tests_naming_the_file(pytester):
    shipped_suite(pytester)
    folder = replay_dir(pytester, dict(list(SHIPPED.items())[1:]))
    [absent] = list(SHIPPED)[:1]
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", f"--gpuprof-replay={folder}")
    result.assert_outcomes(passed=4, skipped=1)
    reason = (f"no trace to replay in {folder}: looked for {unique_trace_name(absent)}, {trace_name(absent)}, and the "
              "names its node id has under another rootdir (directories before it, or fewer)")
    assert f"1 profiled test(s) skipped: {reason}" in section(result)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}", "--gpuprof-strict",
                                "--gpuprof-update-baseline")  # (a strict gate needs baselines; record them)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "--gpuprof-strict: 1 of 5 profiled test(s) were not measured (skipped, see above): the gate fails" \
        in section(result)


def without_a_gpu(pytester, tmp_path, backend, *args):
    """(exit status, the gpuprof section) of the shipped suite run here, where there is no GPU;
    with the nsys backend under a stand-in nsys, the outer session's section."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU path")
    reports = ["--gpuprof-json=r.json", "--gpuprof-html=r.html"]
    if backend == "torch":
        result = pytester.runpytest("-p", "no:cacheprovider", "--gpuprof", *reports, *args)
        result.assert_outcomes(skipped=5)
        return result.ret, section(result)
    fake = executable(tmp_path / "bin" / "nsys", FAKE_NSYS.format(python=sys.executable))
    done = run_under_nsys(pytester, fake, {"NSYS_FAKE_LOG": str(tmp_path / "nsys.log")}, *reports, *args)
    assert "5 skipped" in done.stdout, done.stdout + done.stderr  # the session under nsys
    return done.returncode, done.stdout.split(" gpuprof (nsys backend) ")[1].splitlines()[1:]


@pytest.mark.parametrize("backend", ["torch", "nsys"])
def test_a_strict_gate_without_a_gpu_fails(pytester, tmp_path, backend):
    shipped_suite(pytester)
    status, lines = without_a_gpu(pytester, tmp_path, backend, "--gpuprof-strict")
    assert status == pytest.ExitCode.TESTS_FAILED, lines
    assert f"5 profiled test(s) skipped: {NO_GPU}" in lines
    assert "--gpuprof-strict: 5 of 5 profiled test(s) were not measured (skipped, see above): the gate fails" in lines
    doc = json.loads((pytester.path / "r.json").read_text())
    assert doc["tests"] == [] and len(doc["skipped"]) == 5
    html = (pytester.path / "r.html").read_text()
    assert "nothing was measured" in html and "no GPU performance regression" not in html
    # without --gpuprof-strict the run passes, saying why nothing was measured
    status, lines = without_a_gpu(pytester, tmp_path, backend)
    assert status == 0 and f"5 profiled test(s) skipped: {NO_GPU}" in lines
    assert not any(line.startswith("--gpuprof-strict") for line in lines)


def test_example_suite_runs_with_the_plugin_disabled():
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:gpuprof", "-q",
                             "-W", "error::pytest.PytestUnknownMarkWarning", "example_suite"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no option named" not in result.stdout + result.stderr
    # gpuprof is off: the suite's no-GPU banner, which shows gpuprof at work, says nothing
    assert "gpuprof on a shipped trace" not in result.stdout and "--gpuprof" not in result.stdout


def test_every_replay_command_shown_writes_the_option_with_equals():
    """README, every page of the docs site (docs/ and its folders) and the example suite's
    no-GPU banner show one form of the option, the one that keeps the rootdir
    (docs/guide/running.md, "Replay, trace names and the rootdir")."""
    texts = [ROOT / "README.md", ROOT / "example_suite" / "conftest.py", *sorted((ROOT / "docs").rglob("*.md"))]
    shown = {path.relative_to(ROOT).as_posix(): re.findall(r"--gpuprof-replay[ =]\S+", path.read_text())
             for path in texts}
    assert shown["README.md"] and shown["example_suite/conftest.py"] == ["--gpuprof-replay=example_suite/traces\")"]
    spaced = {name: [s for s in found if s.startswith("--gpuprof-replay ") and s != "--gpuprof-replay DIR`"]
              for name, found in shown.items()}
    assert not any(spaced.values()), spaced
