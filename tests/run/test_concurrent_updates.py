"""Two recordings of one suite at once (two CI jobs refreshing its baselines): each keeps its
run; a read-only baseline directory judges."""

import errno
import json
import os
import subprocess
import sys
import textwrap

from helpers.suites import CNN, MOE, TRACES, fixture_test, section, write_module

#: Holds each session back before it writes, until both have judged every test (read the
#: entries they record over): the two updates then always race for the lock.
BARRIER = textwrap.dedent('''
    import os, pathlib, time
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(session):
        folder = pathlib.Path(os.environ["BARRIER"])
        (folder / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
''')


def two_tests(pytester):
    pytester.makefile(".ini", pytest="[pytest]\n")
    for nodeid in (MOE, CNN):
        module, name = nodeid.removeprefix("example_suite/").removesuffix(".py").split(".py::")
        write_module(pytester, module, fixture_test(name))


def recorded_runs(baselines):
    return {nodeid: len(by_gpu["NVIDIA H200"]["runs"]) for file in sorted(baselines.rglob("*.json"))
            for nodeid, by_gpu in json.loads(file.read_text())["tests"].items()}


def record(pytester, baselines, *env):
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gpuprof-update-baseline",
                             f"--gpuprof-replay={TRACES}", f"--gpuprof-baseline-dir={baselines}",
                             "--gpuprof-baseline-runs=100"], cwd=pytester.path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(*env))


def test_two_recordings_at_once_each_keep_their_run(pytester):
    """Both sessions judge (reading one run recorded) before either writes: the entries end
    with three runs, as one recording after the other leaves them, and each says which run
    it recorded."""
    two_tests(pytester)
    baselines = pytester.path / "baselines"
    first = record(pytester, baselines, os.environ)
    assert first.wait(120) == 0, first.stdout.read()
    assert recorded_runs(baselines) == {MOE: 1, CNN: 1}
    pytester.makeconftest(BARRIER)
    barrier = pytester.mkdir("barrier")
    env = {**os.environ, "BARRIER": str(barrier)}
    both = [record(pytester, baselines, env) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    assert recorded_runs(baselines) == {MOE: 3, CNN: 3}
    said = sorted(line.rsplit("(", 1)[1] for out in outputs for line in out.splitlines()
                  if line.startswith("updated ") and "test_moe" in line)
    assert said == ["run 2 of at most 100 recorded)", "run 3 of at most 100 recorded)"], outputs


READ_ONLY = textwrap.dedent('''
    import errno, os, pathlib
    import pytest

    FOLDER = os.path.realpath(os.environ["READ_ONLY"])

    def _inside(path):
        return os.path.realpath(os.fspath(path)).startswith(FOLDER)

    def _refuse(real, test):
        def call(*args, **kwargs):
            if test(*args, **kwargs):
                raise OSError(errno.EROFS, "Read-only file system", os.fspath(args[0]))
            return real(*args, **kwargs)
        return call

    WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    os.open = _refuse(os.open, lambda path, flags, *a, **k: _inside(path) and flags & WRITES)
    os.unlink = _refuse(os.unlink, lambda path, *a, **k: _inside(path))
    os.replace = _refuse(os.replace, lambda src, dst, *a, **k: _inside(dst))
    os.mkdir = _refuse(os.mkdir, lambda path, *a, **k: _inside(path))
    pathlib.Path.unlink = _refuse(pathlib.Path.unlink, lambda self, *a, **k: _inside(self))
''')


def test_a_read_only_baseline_directory_judges(pytester, monkeypatch):
    """Judging reads: where every write under the baseline directory fails as on a read-only
    mount (EROFS), the run judges against what it holds."""
    two_tests(pytester)
    baselines = pytester.path / "baselines"
    first = record(pytester, baselines, os.environ)
    assert first.wait(120) == 0, first.stdout.read()
    pytester.makeconftest(READ_ONLY)
    monkeypatch.setenv("READ_ONLY", str(baselines))
    before = {p: p.read_bytes() for p in baselines.rglob("*") if p.is_file()}
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof", f"--gpuprof-replay={TRACES}",
                                           f"--gpuprof-baseline-dir={baselines}")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)
    assert {p: p.read_bytes() for p in baselines.rglob("*") if p.is_file()} == before
    # and a recording there is refused as a whole, each test said not recorded
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof-update-baseline",
                                           f"--gpuprof-replay={TRACES}", f"--gpuprof-baseline-dir={baselines}")
    assert result.ret != 0
    out = result.stdout.str()
    assert f"[Errno {errno.EROFS}] Read-only file system" in out, out
    assert {MOE: "error", CNN: "error"}.items() <= {line.split()[0]: line.split()[1] for line in section(result)
                                                    if "::" in line}.items()
    assert {p: p.read_bytes() for p in baselines.rglob("*") if p.is_file()} == before
