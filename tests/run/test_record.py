"""Recording in fresh processes (run/record.py): the same command again, each process told
that it is one of them, its updates shown, one that recorded nothing reported."""

import json
import re
import sys

from pytest_gpuprof.run.record import record_again

# a stand-in suite: each process appends its RECORDING value and its arguments, and writes to
# the results document it is given what an update writes there (or that it wrote nothing, when told to)
CONFTEST = """
import json, os, sys

def pytest_terminal_summary(terminalreporter):
    args = sys.argv[1:]
    with open("processes.txt", "a") as fh:
        kept = [a for a in args if not a.startswith("--gpuprof-json=")]
        fh.write(os.environ.get("GPUPROF_RECORDING", "-") + " " + " ".join(kept) + "\\n")
    out = [a.split("=", 1)[1] for a in args if a.startswith("--gpuprof-json=")][-1]
    if os.environ.get("REFUSE"):
        baselines = {"updated": [], "refused": "disk full"}
    else:
        baselines = {"updated": [{"file": "baselines/x.json", "tests": 1, "how": "run 2 of at most 5 recorded"}],
                     "refused": None}
    with open(out, "w") as fh:
        json.dump({"schema_version": 1, "tests": [], "baselines": baselines}, fh)
"""


def test_each_fresh_process_runs_the_same_command_once_and_says_what_it_recorded(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    said = []
    problems = record_again(["-p", "no:cacheprovider", "-q", "test_x.py"], pytester.path, 3, 1, said.append)
    assert problems == []
    processes = (pytester.path / "processes.txt").read_text().splitlines()
    # --gpuprof-baseline-runs 1 starts afresh in the first process; the others keep this recording's runs
    assert processes == [f"{k} -p no:cacheprovider -q test_x.py --gpuprof-record-processes=1 --gpuprof-baseline-runs=3"
                         for k in (2, 3)]
    # each on a line of its own: the terminal writer would show a newline inside one as "\n"
    assert len(said) == 4 and all("\n" not in line for line in said)
    assert re.fullmatch(r"gpuprof: recorded run 2 of 3 in a fresh process \([0-9.]+ s\): 1 passed in [0-9.]+s", said[0])
    assert said[1] == "  updated 1 test(s) in baselines/x.json (run 2 of at most 5 recorded)"
    assert said[2].startswith("gpuprof: recorded run 3 of 3 in a fresh process (")


def test_a_process_that_recorded_nothing_is_reported(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("REFUSE", "1")
    problems = record_again(["-p", "no:cacheprovider", "test_x.py"], pytester.path, 2, 5, lambda line: None)
    assert problems == ["run 2 of 2 recorded nothing (exit 0): no baseline written, every file left as it was: "
                        "disk full"]


def test_a_process_that_wrote_no_results_document_is_reported(pytester):
    """A fresh process that ended before writing its results document recorded nothing: the
    problem names it and the file it did not write."""
    pytester.makeconftest("def pytest_configure(config):\n    raise SystemExit(3)\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    said = []
    problems = record_again(["-p", "no:cacheprovider", "test_x.py"], pytester.path, 2, 5, said.append)
    assert len(problems) == 1 and problems[0].startswith("run 2 of 2 recorded nothing (exit 3): recorded run 2 "
                                                         "measured nothing (no results document): ")
    assert problems[0].endswith("results.json; exit 3")


def test_one_process_records_no_other():
    said = []
    assert record_again([sys.executable], ".", 1, 5, said.append) == [] and said == []


def test_a_process_that_records_again_keeps_no_traces_and_writes_only_its_results_document(pytester, monkeypatch):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.makeconftest(
        "import json\nfrom pytest_gpuprof.plugin import SESSION\n\n"
        "def pytest_sessionfinish(session):\n"
        "    s = session.config.stash[SESSION].settings\n"
        "    open('settings.json', 'w').write(json.dumps({'keep': s.keep_traces}))\n")
    monkeypatch.setenv("GPUPROF_RECORDING", "2")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof", "--gpuprof-keep-traces",
                                           "--gpuprof-json=results.json", "--gpuprof-summary=summary.md")
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "settings.json").read_text()) == {"keep": False}
    assert (pytester.path / "results.json").is_file()  # what its first process reads
    assert not (pytester.path / "summary.md").exists()  # the user's reports are the first process's
    monkeypatch.delenv("GPUPROF_RECORDING")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof", "--gpuprof-keep-traces",
                                  "--gpuprof-json=results.json").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "settings.json").read_text()) == {"keep": True}
    assert (pytester.path / "results.json").is_file()


def test_a_recording_from_replayed_traces_says_what_it_recorded_from(pytester, tmp_path):
    """No fresh process replays the same traces again: the line says so, and where they came from."""
    from pathlib import Path

    root = Path(__file__).parents[2]
    traces = root / "example_suite" / "traces"
    pytester.chdir()
    result = pytester.runpytest_subprocess(str(root / "example_suite" / "test_moe.py"), "--rootdir", str(root),
                                           "-p", "no:cacheprovider", "--gpuprof-update-baseline",
                                           f"--gpuprof-replay={traces}", f"--gpuprof-baseline-dir={tmp_path}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"updated 1 test(s) in {tmp_path}*(first run recorded)",
                                 f"recorded from the traces replayed from {traces}: one run a test, no fresh process; "
                                 "--gpuprof-record-processes=3 applies to tests run on a GPU"])
    assert "recorded run 2" not in result.stdout.str()
