"""A gpuprof option's path given with a space that moved pytest's rootdir is a usage error.

pytest chooses the rootdir and ini file before it knows plugin options, so in
``--gpuprof-base DIR`` it takes DIR for a test path as well.  The project here has no ini
file: ``head/test_x.py``, a base checkout ``base/``, and ``other/``, another project with
its own ``pytest.ini``; pytest runs from ``head/``.  Without the option's value pytest
chooses ``head/`` (no ini file); with it, the common parent of ``head/`` and the value, or
the other project.
"""

import pytest

# Imported here, before any in-process pytester run, so pandas/numpy stay loaded across
# runs (pytester drops modules first imported inside a run).
import pytest_gpuprof.run.session  # noqa: F401

TEST = '''
def test_x(gpuprof):
    for _ in gpuprof.steps(warmup=0, active=1):
        pass
'''


@pytest.fixture
def projects(pytester, monkeypatch):
    """(the folder holding the projects, head/), pytest running from head/."""
    top = pytester.path
    for folder in ("head", "base", "other/replay"):
        (top / folder).mkdir(parents=True)
    (top / "head" / "test_x.py").write_text(TEST)
    (top / "base" / "test_x.py").write_text(TEST)
    (top / "other" / "pytest.ini").write_text("[pytest]\n")
    (top / "out.json").write_text("{}")  # a report left by an earlier run
    monkeypatch.chdir(top / "head")
    return top, top / "head"


def run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "test_x.py", *args)


@pytest.mark.parametrize("flag, value, chosen", [
    ("--gpuprof-base", "../base", "rootdir {top}, no ini file"),
    ("--gpuprof-replay", "../other/replay", "rootdir {top}/other, ini file {top}/other/pytest.ini"),
    ("--gpuprof-json", "../out.json", "rootdir {top}, no ini file"),
], ids=["base", "replay", "report"])
def test_a_path_that_moved_the_rootdir_is_an_error_showing_the_equals_form(pytester, projects, flag, value, chosen):
    top, head = projects
    result = run(pytester, "--gpuprof", flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0] == (
        f"ERROR: {flag} {value}: given with a space, pytest also took {value} for a test path when it chose the "
        f"rootdir and ini file ({chosen.format(top=top)}; without it rootdir {head}, no ini file), which decide "
        f"the node ids that name traces and baselines: write {flag}={value}")


def test_the_equals_form_and_a_space_that_moved_nothing_run(pytester, projects):
    top, head = projects
    (head / "baselines").mkdir()
    for args in (["--gpuprof-base=../base"], ["--gpuprof-replay=../other/replay"], ["--gpuprof-json=../out.json"],
                 ["--gpuprof-baseline-dir", "baselines"]):  # inside head/: the rootdir stays
        result = run(pytester, "--gpuprof", *args)
        assert result.ret == pytest.ExitCode.OK, (args, result.errlines)
        assert f"rootdir: {head}" in result.outlines
