"""A report asked for and not written fails the run, naming the report and why: a gate whose
artifact or pull-request summary went missing is a gate nobody can read."""

from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "example_suite" / "traces"


def _replay(pytester, *args):
    """The shipped MoE trace replayed against the shipped baselines (the test passes)."""
    pytester.chdir()
    return pytester.runpytest_subprocess(str(ROOT / "example_suite" / "test_moe.py"), "--rootdir", str(ROOT), "-p",
                                         "no:cacheprovider", "--gpuprof", f"--gpuprof-replay={TRACES}", *args)


def test_every_report_written_leaves_the_run_green(pytester, tmp_path):
    result = _replay(pytester, f"--gpuprof-json={tmp_path / 'r.json'}", f"--gpuprof-summary={tmp_path / 's.md'}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["json report: *r.json", "summary report: *s.md"])


@pytest.mark.parametrize("kind", ["json", "html", "summary", "benchmark-json"])
def test_a_report_that_cannot_be_written_fails_the_run(pytester, tmp_path, kind):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a path under a file: no such folder can be made
    result = _replay(pytester, f"--gpuprof-{kind}={blocker / 'report'}")
    result.assert_outcomes(passed=1)  # the test itself held its gate
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"{kind} report not written: {blocker / 'report'}: *: the run fails"])


def test_a_full_step_summary_fails_the_run(pytester, monkeypatch):
    """$GITHUB_STEP_SUMMARY on a full file system (/dev/full answers every write so)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "/dev/full")
    result = _replay(pytester)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["summary report not written: /dev/full: No space left on device: the run fails"])
