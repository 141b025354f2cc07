"""tests/conftest.py shares the GPUs out among pytest-xdist workers, a disjoint group each
(tests/gpu/test_gpu.py's distributed tests need two GPUs in one worker); on the CPU: the GPUs
are the entries of CUDA_VISIBLE_DEVICES, which is all a worker is told."""

import os
import threading
from pathlib import Path

import pytest

from conftest import ALL_GPUS, TURN_FOLDER, all_gpus, gpu_group, gpu_groups_line, gpu_turn, take_gpu_group, xdist_worker

FOUR = ["0", "1", "2", "3"]


def test_each_worker_takes_its_own_run_of_the_gpus():
    assert [gpu_group(k, 2, FOUR) for k in range(2)] == [["0", "1"], ["2", "3"]]
    assert [gpu_group(k, 4, FOUR) for k in range(4)] == [["0"], ["1"], ["2"], ["3"]]
    # 5 GPUs, 2 workers: two each, the fifth unused; UUIDs as given
    five = ["GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e"]
    assert [gpu_group(k, 2, five) for k in range(2)] == [["GPU-a", "GPU-b"], ["GPU-c", "GPU-d"]]
    assert gpu_group(2, 2, FOUR) == ["0", "1"]  # a replacement worker, gw2 of 2: gw0's


def test_nothing_is_shared_out_with_one_worker_or_fewer_gpus_than_workers():
    assert gpu_group(0, 1, FOUR) is None
    assert gpu_group(0, 3, ["0", "1"]) is None and gpu_group(2, 3, ["0", "1"]) is None
    assert gpu_group(0, 2, []) is None


def test_the_header_says_how_the_gpus_are_shared_out_or_why_not():
    assert gpu_groups_line(2, FOUR) == "GPUs: 4 for 2 xdist workers, 2 each (CUDA_VISIBLE_DEVICES): gw0 0,1; gw1 2,3"
    assert gpu_groups_line(1, FOUR) == ("GPUs: 4 for 1 xdist worker(s), not shared out (one worker): "
                                        "each worker sees every GPU")
    assert gpu_groups_line(3, ["0", "1"]) == ("GPUs: 2 for 3 xdist worker(s), not shared out (fewer GPUs than "
                                              "workers): each worker sees every GPU")
    assert gpu_groups_line(2, []) is None  # no GPU: nothing to say (the CPU suite under -n)


def test_a_worker_is_read_from_what_xdist_sets():
    assert xdist_worker({"PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_WORKER_COUNT": "4"}) == (3, 4)
    assert xdist_worker({}) is None
    assert xdist_worker({"PYTEST_XDIST_WORKER": "master", "PYTEST_XDIST_WORKER_COUNT": "2"}) is None


@pytest.mark.parametrize(("worker", "workers", "visible", "seen"), [
    ("gw1", "2", "4,5,6,7", "6,7"),
    ("gw0", "1", "4,5", "4,5"),  # one worker: untouched
    ("gw1", "2", "4", "4"),  # fewer GPUs than workers: untouched
])
def test_a_worker_sees_its_own_group(monkeypatch, worker, workers, visible, seen):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setenv(ALL_GPUS, "")  # (restored to unset after the test)
    monkeypatch.delenv(ALL_GPUS)
    take_gpu_group()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == seen
    assert all_gpus() == visible.split(",")  # a test that needs them all still finds them


def test_outside_a_worker_every_gpu_stays_visible(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    take_gpu_group()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


WHERE = '''
import os


def test_where():
    with open(os.environ["WHERE_FILE"], "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + " " + os.environ["CUDA_VISIBLE_DEVICES"] + "\\n")
'''


def test_n_2_on_four_gpus_gives_each_worker_two(pytester, monkeypatch):
    """The conftest itself, in a run of -n 2 on CUDA_VISIBLE_DEVICES=0,1,2,3: each worker's
    tests see its two GPUs, and the header says so once."""
    pytest.importorskip("xdist")
    where = pytester.path / "where.txt"
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # when this suite itself runs under xdist
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("WHERE_FILE", str(where))
    pytester.makeconftest((Path(__file__).parents[1] / "conftest.py").read_text())
    pytester.makepyfile(**{f"test_{i}": WHERE for i in range(4)})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["GPUs: 4 for 2 xdist workers, 2 each (CUDA_VISIBLE_DEVICES): gw0 0,1; gw1 2,3"])
    assert {tuple(line.split()) for line in where.read_text().splitlines()} <= {("gw0", "0,1"), ("gw1", "2,3")}


class Turn(threading.Thread):
    """A process's turn on the GPUs (``gpu_turn``), taken in a thread and held until ``done``."""

    def __init__(self, alone):
        super().__init__(daemon=True)
        self.alone, self.entered, self.done = alone, threading.Event(), threading.Event()

    def run(self):
        with gpu_turn(self.alone):
            self.entered.set()
            self.done.wait(10)


def test_a_process_on_every_gpu_runs_alone_and_is_not_starved(tmp_path, monkeypatch):
    """Side by side with another's process, one on every GPU waits; while it waits, a third
    worker's process waits behind it (it does not slip in between), and runs once it is done."""
    monkeypatch.setenv(TURN_FOLDER, str(tmp_path))
    first, second = Turn(alone=False), Turn(alone=False)
    first.start()
    second.start()
    assert first.entered.wait(5) and second.entered.wait(5)  # two workers' processes side by side
    alone = Turn(alone=True)
    alone.start()
    assert not alone.entered.wait(0.3)  # waits for them
    third = Turn(alone=False)
    third.start()
    assert not third.entered.wait(0.3)  # held back behind the one waiting to run alone
    first.done.set()
    second.done.set()
    assert alone.entered.wait(5)
    assert not third.entered.wait(0.3)  # still alone
    alone.done.set()
    assert third.entered.wait(5)
    third.done.set()


def test_without_xdist_nobody_waits(monkeypatch):
    monkeypatch.delenv(TURN_FOLDER, raising=False)
    held, alone = Turn(alone=True), Turn(alone=True)
    held.start()
    assert held.entered.wait(5)
    alone.start()
    assert alone.entered.wait(5)
    held.done.set()
    alone.done.set()
