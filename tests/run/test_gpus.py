"""One pytest-xdist worker per GPU (run/gpus.py), on the CPU: the GPUs are the entries of
CUDA_VISIBLE_DEVICES, which is all a worker is told."""

import pytest

from pytest_gpuprof.run.gpus import GPUS, pin_worker, visible_gpus, worker_gpu

pytest.importorskip("xdist")

WHERE = '''
import os


def test_where(tmp_path_factory):
    with open(os.environ["WHERE_FILE"], "a") as out:
        out.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " "
                  + os.environ.get("CUDA_VISIBLE_DEVICES", "-") + "\\n")
'''


def test_each_worker_takes_its_own_gpu_round_robin():
    gpus = ["3", "GPU-5f0e", "7"]
    assert [worker_gpu(f"gw{k}", gpus) for k in range(5)] == ["3", "GPU-5f0e", "7", "3", "GPU-5f0e"]
    assert worker_gpu("gw0", []) is None and worker_gpu("master", gpus) is None


def test_the_visible_gpus_are_cuda_visible_devices_entries(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5,")
    assert visible_gpus() == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


#: A conftest that notes what CUDA_VISIBLE_DEVICES it saw when it loaded: before any test,
#: where a conftest could start CUDA.
CONFTEST = '''
import os

with open(os.environ["WHERE_FILE"] + ".conftest", "a") as out:
    out.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " " + os.environ.get("CUDA_VISIBLE_DEVICES", "-") + "\\n")
'''


@pytest.mark.parametrize("workers", ["auto", "3"])
def test_n_auto_starts_a_worker_per_gpu_and_each_sees_only_its_own(pytester, monkeypatch, workers):
    """CUDA_VISIBLE_DEVICES=3,5,7 (as a runner with three GPUs of eight would set it), on a
    machine of fewer cores: -n auto under --gpuprof starts three workers, one per GPU, and
    each sees its GPU alone from the moment the conftests load."""
    where = pytester.path / "where.txt"
    for inherited in ("PYTEST_XDIST_WORKER", GPUS):  # when this suite itself runs under xdist
        monkeypatch.delenv(inherited, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    monkeypatch.setenv("WHERE_FILE", str(where))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**{f"test_{i}": WHERE for i in range(6)})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", workers, "--gpuprof")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*3 workers*"])
    expected = {("gw0", "3"), ("gw1", "5"), ("gw2", "7")}
    assert {tuple(line.split()) for line in where.read_text().splitlines()} <= expected
    loaded = {tuple(line.split()) for line in (pytester.path / "where.txt.conftest").read_text().splitlines()}
    assert loaded == expected | {("-", "3,5,7")}  # the controller loads it too, and keeps every GPU


def test_pinning_reads_the_controllers_gpus_from_the_environment():
    environ = {"PYTEST_XDIST_WORKER": "gw4", GPUS: "3,5,7", "CUDA_VISIBLE_DEVICES": "3,5,7"}
    pin_worker(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "5"
    untouched = {"CUDA_VISIBLE_DEVICES": "3,5,7", GPUS: "3,5,7"}  # not a worker: the controller itself
    pin_worker(untouched)
    assert untouched["CUDA_VISIBLE_DEVICES"] == "3,5,7"


def test_without_gpuprof_workers_keep_every_gpu(pytester, monkeypatch):
    where = pytester.path / "where.txt"
    for inherited in ("PYTEST_XDIST_WORKER", GPUS):
        monkeypatch.delenv(inherited, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setenv("WHERE_FILE", str(where))
    pytester.makepyfile(test_a=WHERE)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2").assert_outcomes(passed=1)
    assert where.read_text().split()[1] == "3,5"
